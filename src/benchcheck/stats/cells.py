"""How the audit writes a number into its CSV rows: 4 decimals, a missing value stays missing."""

from __future__ import annotations

DECIMALS = 4


def cell(v: float | None) -> float | None:
    return None if v is None else round(v, DECIMALS)
