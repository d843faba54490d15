"""The failed-precondition error of the QA harness (exit code 2)."""

from __future__ import annotations


class PreconditionError(Exception):
    """Something the run needs is missing or wrong; nothing was asked of the VLM or the judge."""
