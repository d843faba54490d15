"""Hints for VLM errors the seed names by their message (docs/qa.md, "Errors and their fixes").

Branch on exit codes; these only say what to do about errors already counted as errors.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from benchcheck.qa.records import VLMAnswer

HINT_INLINE_422 = (
    "{n} item(s) failed with HTTP 422 '... content ... valid string': the clips were sent inline as base64 "
    "and the VLM rejects large ones. The recorded origin is loopback, so the VLM (in its container) cannot "
    "fetch them by URL: reconfigure with a routable address (`vss configure --base-url http://<host-ip>:7777`; "
    "with --vlm-endpoint, --video-url-base http://<host-ip>:PORT). --inline-media is safe only below ~10 MB")
HINT_EXIT_4 = (
    "{n} item(s): the VLM command exited 4 (a service missing from the recorded configuration): "
    "the fix is `vss configure` (check `vss configure check`), not a flag of this run")
HINT_WATCHDOG = (
    "{n} item(s) were killed by the watchdog: the VLM CLI never returned by --timeout + --watchdog-grace. "
    "They are errors, never low scores; do not wrap the CLI in retries")

_INLINE_422 = re.compile(r"\b422\b.*content.*valid string", re.I | re.S)


def vlm_hints(answers: Iterable[VLMAnswer]) -> list[str]:
    """One hint per kind of VLM error the seed names, with how many items it concerns."""
    errors = [a for a in answers if a.status == "error"]
    counts = {
        HINT_INLINE_422: sum(1 for a in errors if _INLINE_422.search(a.error or "")),
        HINT_EXIT_4: sum(1 for a in errors if a.error_kind == "exit" and (a.error or "").startswith(
            "VLM command exited 4")),
        HINT_WATCHDOG: sum(1 for a in errors if a.error_kind == "watchdog"),
    }
    return [hint.format(n=n) for hint, n in counts.items() if n]
