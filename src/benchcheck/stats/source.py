"""The one place the audit and the pool confidence read result rows (swap this module when typed
records land).

Everything else (the audit, the pool confidence) takes :class:`Forwards` records and never sees a JSON row, so
moving to the typed ``ScoreRow`` / ``ItemVerdict`` reader changes this file only.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchcheck.store import StepStore, bench_files, bench_of_file
from benchcheck.verdicts import ItemHashes

_STEP_DIR = re.compile(r"^step(\d+)$")


@dataclass(frozen=True, slots=True)
class Forwards:
    """One item's recorded forwards at one step, as the audit needs them.

    ``perms[f][j]`` is the original option shown at position j in forward f, ``lps[f][j]`` that
    position's protocol (top-20, floored) log-prob; ``lps_exact`` the full-softmax ones when the
    engine recorded them. ``extra_*`` are additional permutations recorded beside the protocol's
    (``--extra-perms``): evidence only, never part of the decision.
    """

    step: int
    bench: str
    item_id: str
    model: str
    answer: int
    perms: tuple[tuple[int, ...], ...]
    lps: tuple[tuple[float, ...], ...]
    removed: bool
    lps_exact: tuple[tuple[float, ...], ...] | None = None
    extra_perms: tuple[tuple[int, ...], ...] = ()
    extra_lps: tuple[tuple[float, ...], ...] = ()
    video: str = ""  # the item's video (resampling clusters); the item's own id when the row has none

    @property
    def k(self) -> int:
        return len(self.perms[0])

    @property
    def multi(self) -> bool:
        """Decided over permutations (step 1) rather than by one forward."""
        return len(self.perms) > 1


def _floats(v: Any) -> tuple[float, ...]:
    return tuple(float(x) for x in v)


def _finite(rows: tuple[tuple[float, ...], ...]) -> bool:
    return all(math.isfinite(x) for row in rows for x in row)


def _ints(v: Any) -> tuple[int, ...]:
    return tuple(int(x) for x in v)


def forwards_of(row: Mapping[str, Any]) -> Forwards | None:
    """A result row as :class:`Forwards`; None for a row the audit cannot use (no log-probs, or a
    log-prob that is NaN or infinite: a model that overflowed gives no margin to audit, and one such
    number made every fit of its model x step fail). A non-finite ``lp_exact`` is dropped alone."""
    try:
        lp = row["lp"]
        if row.get("perms") is not None:
            perms = tuple(_ints(p) for p in row["perms"])
            lps = tuple(_floats(x) for x in lp)
            exact_raw = row.get("lp_exact")
            exact = tuple(_floats(x) for x in exact_raw) if exact_raw else None
        else:
            perms = (_ints(row["perm"]),)
            lps = (_floats(lp),)
            exact_raw = row.get("lp_exact")
            exact = (_floats(exact_raw),) if exact_raw else None
        extra_p = tuple(_ints(p) for p in row.get("extra_perms") or ())
        extra_l = tuple(_floats(x) for x in row.get("extra_lp") or ())
        f = Forwards(step=int(row["step"]), bench=str(row["bench"]), item_id=str(row["item_id"]),
                     model=str(row.get("model") or ""), answer=int(row["answer"]), perms=perms, lps=lps,
                     removed=bool(row.get("removed")), lps_exact=exact, extra_perms=extra_p, extra_lps=extra_l,
                     video=str(row.get("video_id") or row["item_id"]))
    except (KeyError, TypeError, ValueError):
        return None
    k = f.k
    if (k < 2 or not 0 <= f.answer < k or len(f.perms) != len(f.lps) or any(len(x) != k for x in f.lps)
            or any(sorted(p) != list(range(k)) for p in f.perms)
            or len(f.extra_perms) != len(f.extra_lps) or any(sorted(p) != list(range(k)) for p in f.extra_perms)
            or any(len(x) != k for x in f.extra_lps) or not _finite(f.lps) or not _finite(f.extra_lps)):
        return None
    if exact is not None and (len(exact) != len(lps) or any(len(x) != k for x in exact) or not _finite(exact)):
        f = Forwards(f.step, f.bench, f.item_id, f.model, f.answer, f.perms, f.lps, f.removed, None,
                     f.extra_perms, f.extra_lps, f.video)
    return f


def steps_in(results: str | Path) -> list[int]:
    """The step folders present under a results folder, in order."""
    d = Path(results)
    if not d.is_dir():
        return []
    return sorted(int(m.group(1)) for p in d.iterdir() if p.is_dir() and (m := _STEP_DIR.match(p.name)))


def read_forwards(results: str | Path, item_ids: Iterable[str] | None = None,
                  steps: Sequence[int] | None = None, benches: Iterable[str] | None = None,
                  current: ItemHashes | None = None) -> dict[int, list[Forwards]]:
    """Per step, the last ok row of each item (the store's rule), as :class:`Forwards`.

    With ``item_ids``, only those items (the audited pool); with ``benches``, only those
    benchmarks' rows (the items' own: another benchmark of the folder may use the same ids);
    rows that lack log-probs are skipped. ``current``: the items' fingerprints, so a row of an
    item edited since is no evidence (``StepStore.current_state``).
    """
    wanted = set(item_ids) if item_ids is not None else None
    only = set(benches) if benches is not None else None
    out: dict[int, list[Forwards]] = {}
    for s in steps if steps is not None else steps_in(results):
        folder = Path(results) / f"step{s}"
        rows = []
        # Benchmark by benchmark: one reducer over the whole folder took two benchmarks' items of
        # one id for one item (the last row of either).
        for bench in sorted({b for p in bench_files(folder) if (b := bench_of_file(p.name))}):
            if only is not None and bench not in only:
                continue
            state = StepStore(folder).current_state([bench], items=current)  # a replaced run's rows are not evidence
            for iid in sorted(state.ok):
                if wanted is not None and iid not in wanted:
                    continue
                f = forwards_of(state.ok[iid].fields)
                if f is not None:
                    rows.append(f)
        if rows:
            out[s] = sorted(rows, key=lambda f: (f.item_id, f.bench))
    return out


def id_clash(by_step: Mapping[int, Sequence[Forwards]]) -> str | None:
    """Why these forwards cannot be told apart by item id (one id in two benchmarks at a step), or
    None: the audit's tables and the pool's confidences key items by id."""
    for step, rows in sorted(by_step.items()):
        seen: dict[str, str] = {}
        for f in rows:
            if seen.setdefault(f.item_id, f.bench) != f.bench:
                return (f"step{step}: item id {f.item_id!r} is in benchmark {seen[f.item_id]!r} and in {f.bench!r}; "
                        "items are told apart by id: screen each benchmark into its own --results, or give one "
                        "benchmark's ids a prefix")
    return None
