"""Fill a frame cache for many videos in parallel processes, resumably.

Each video is one task (:func:`~benchcheck.video.extract.extract_to_cache`); a video whose
cache already holds the plan is skipped, so a killed run continues where it stopped. A video
that cannot be extracted (not in the store, unreadable) is written to ``<out>/failures.jsonl``
and the run goes on.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import Future, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchcheck.masking import drop_secret_variables
from benchcheck.protocol import JPEG_QUALITY
from benchcheck.store import append_rows
from benchcheck.video.cache import clear_stale, frames_present, read_frames_json
from benchcheck.video.extract import CacheOutcome, extract_to_cache
from benchcheck.video.meta import META_FILE, video_dir
from benchcheck.video.plans import MAX_IMAGES, TOKEN_BUDGET, parse_plan
from benchcheck.workers import process_pool

FAILURES_FILE = "failures.jsonl"


def _failure_key(row: Mapping[str, Any]) -> object:
    """A failure is written once: a rerun that fails the same way adds no row (a new reason does)."""
    return (row.get("video_id"), row.get("plan"), row.get("reason"))

# A ``v32`` cache serves ``mid`` (its frame_16.jpg), and extracting v32 over a mid cache loses nothing.
_SUPERSETS = {"v32": {"mid"}}


@dataclass(slots=True)
class ExtractReport:
    """What :func:`extract_many` did per video."""

    out: Path
    plan: str
    outcomes: list[CacheOutcome] = field(default_factory=list)
    failures: list[tuple[str, str]] = field(default_factory=list)

    def count(self, status: str) -> int:
        return sum(o.status == status for o in self.outcomes)

    def summary(self) -> str:
        frames = sum(o.n_frames for o in self.outcomes if o.status == "done")
        return (f"plan {self.plan}: {self.count('done')} videos extracted ({frames} frames), "
                f"{self.count('cached')} already cached, {len(self.failures)} failed")


def _check(store: Path, out: Path, video_id: str, plan: str, force: bool) -> str | None:
    """Why this video cannot be extracted into ``out`` (None when it can)."""
    try:
        if not (video_dir(store, video_id) / META_FILE).is_file():
            return "not in the store (no normalized/<id>/meta.json)"
        if not force and frames_present(out, video_id):
            have = str(read_frames_json(out, video_id).get("plan", ""))
            related = have in _SUPERSETS.get(plan, set()) or plan in _SUPERSETS.get(have, set())
            if have and have != plan and not related:
                return f"cache folder holds plan {have!r}, not {plan!r}: use another --out or --force"
    except (OSError, ValueError) as e:
        return str(e)
    return None


def _one(store: Path, video_id: str, plan: str, out: Path, jpeg_quality: int, token_budget: int,
         max_images: int) -> CacheOutcome | str:
    try:
        return extract_to_cache(store, video_id, plan, out, jpeg_quality=jpeg_quality,
                                token_budget=token_budget, max_images=max_images)
    except (OSError, ValueError) as e:
        return " ".join(str(e).split())[:500] or type(e).__name__


def extract_many(store: Path, video_ids: Sequence[str], plan: str, out: Path, workers: int = 1, *,
                 jpeg_quality: int = JPEG_QUALITY, token_budget: int = TOKEN_BUDGET,
                 max_images: int = MAX_IMAGES, force: bool = False, progress: bool = False) -> ExtractReport:
    """Extract ``plan`` for every video into the cache ``out`` (module doc)."""
    from tqdm import tqdm

    canonical = parse_plan(plan).name
    store, out = Path(store), Path(out)
    out.mkdir(parents=True, exist_ok=True)
    clear_stale(out)
    report = ExtractReport(out, canonical)
    todo = []
    for vid in dict.fromkeys(video_ids):
        why = _check(store, out, vid, canonical, force)
        if why:
            report.failures.append((vid, why))
        else:
            todo.append(vid)
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    append_rows(out / FAILURES_FILE, [{"video_id": v, "plan": canonical, "reason": r, "time": stamp}
                                      for v, r in report.failures], unique_by=_failure_key)
    bar = tqdm(total=len(todo), desc=f"frames {canonical}", unit="video", file=sys.stderr, disable=not progress)
    args = (canonical, out, jpeg_quality, token_budget, max_images)

    def record(vid: str, res: CacheOutcome | str) -> None:
        if isinstance(res, str):
            report.failures.append((vid, res))
            append_rows(out / FAILURES_FILE, [{"video_id": vid, "plan": canonical, "reason": res,
                                               "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}],
                        unique_by=_failure_key)
        else:
            report.outcomes.append(res)
        bar.update(1)

    try:
        if workers <= 1:
            for vid in todo:
                record(vid, _one(store, vid, *args))
        else:
            with process_pool(workers, drop_secret_variables) as pool:
                futures: dict[Future[CacheOutcome | str], str] = {
                    pool.submit(_one, store, vid, *args): vid for vid in todo}
                for fut in as_completed(futures):
                    try:
                        res = fut.result()
                    except Exception as e:  # a worker that died (e.g. a decoder crash)
                        res = f"worker process died: {type(e).__name__}"
                    record(futures[fut], res)
    finally:
        bar.close()
    return report
