"""What ``build_report`` is asked to build (one record the CLI, the demo and the page builders share)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from benchcheck.items import Item


@dataclass(slots=True)
class ReportOptions:
    results: Path
    out: Path
    items: Sequence[Item] | None = None
    chain: tuple[int, ...] = (1, 2, 3, 4, 5, 6)
    sweep: Path | None = None
    qa: Path | None = None
    audit: Path | None = None  # output folder of `benchcheck audit` (its per-item confidence goes to the browser)
    frames: Path | None = None  # frame cache root (pool_frames)
    copy_frames: bool = False  # copy the shown frames small instead of referencing the cache
    plots: bool = True
    progress: bool = False
    workers: int = 1  # processes, one benchmark each at a time
    bench_png: bool = False  # also a matplotlib PNG per benchmark (slow on big pools)
    side_results: tuple[Path, ...] = ()  # other runs on the same items (their run logs go into provenance)
    side_audits: tuple[Path, ...] = ()  # audits of other runs, shown after the main one on the audit page
    step0: Path | None = None  # `benchcheck dedup`'s folder or a kept list: duplicates shown removed at step 0
