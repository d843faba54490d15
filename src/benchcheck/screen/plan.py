"""What is left to do at a step: eligibility along the chain (docs/PROTOCOL.md, "Eligibility").

Pure: it takes items, the step states of the earlier steps and a frames predicate, and returns
the items to run plus a count for every item it left out and why.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from benchcheck.errors import first_line
from benchcheck.items import Item
from benchcheck.screen.steps import STEPS, StepSpec
from benchcheck.verdicts import ItemVerdict, StepState

# Printed by --plan-only after REMAINING_TOTAL, in this order.
COUNT_KEYS = (
    "DONE_TOTAL",
    "FAILED_TOTAL",
    "MISSING_FRAMES",
    "NO_VIDEO",
    "OPEN_FORMAT",
    "NOT_KEPT",
    "REMOVED_EARLIER",
    "FAILED_EARLIER",
    "WAITING_EARLIER",
    "STALE",  # still to do (in REMAINING_TOTAL): their rows were asked under another config_hash
)


# Why an item is not run at a step, in the order ``why_lines`` says it (``{steps}``: the earlier
# steps that have not decided the waiting items yet).
WHY = {
    "WAITING_EARLIER": "wait{s} for step {steps}, which has not decided {them} yet: run it first",
    "NO_VIDEO": "reach{es} no video (the 'no video:' lines say why; 'benchcheck items stats' counts them)",
    "NO_VIDEO_NAMED": "name{s} no video: the visual steps skip {them}",
    "MISSING_FRAMES": "ha{ve} no frames in the frame source (run 'benchcheck frames extract ... --plan v32')",
    "DONE_TOTAL": "{are} done at this step",
    "FAILED_TOTAL": "failed at this step (retry-free: the error rows used up the retries)",
    "REMOVED_EARLIER": "{were} removed at an earlier step",
    "FAILED_EARLIER": "failed at an earlier step",
    "NOT_KEPT": "{are} not in the step-0 kept list (--keep)",
    "OPEN_FORMAT": "ha{ve} more than 26 options (kept, not letter-screened)",
}
_ONE = {"s": "s", "es": "es", "them": "it", "ve": "s", "are": "is", "were": "was"}
_MANY = {"s": "", "es": "", "them": "them", "ve": "ve", "are": "are", "were": "were"}
# A benchmark the step-0 kept list does not cover (``KeptList``): screened whole, which a user who
# meant to deduplicate it must be told.
NOT_DEDUPLICATED = "NOT_DEDUPLICATED"
CAUSES = (*WHY, NOT_DEDUPLICATED)
# Causes worth a note even when the step runs the other items (an item naming no video among items
# that do is as likely a missing cell as a text item).
UNREACHED = ("WAITING_EARLIER", "NO_VIDEO", "NO_VIDEO_NAMED", "MISSING_FRAMES", NOT_DEDUPLICATED)


@dataclass(slots=True)
class StepPlan:
    """Items still to run at a step, and why the others are not."""

    step: int
    todo: list[Item] = field(default_factory=list)
    eligible: list[Item] = field(default_factory=list)  # todo + done + failed here (units: ScreenContext.unit_basis)
    counts: Counter[str] = field(default_factory=Counter)
    missing_frames: list[Item] = field(default_factory=list)
    by_bench: dict[str, Counter[str]] = field(default_factory=dict)
    states: Mapping[int, StepState] = field(default_factory=dict)  # what the plan read: use it, do not re-read
    waiting_on: Counter[int] = field(default_factory=Counter)  # WAITING_EARLIER items per earlier step
    no_video_named: int = 0  # of the NO_VIDEO items, those that name no video at all (text items)
    not_deduplicated: tuple[str, ...] = ()  # benchmarks the step-0 kept list does not cover

    @property
    def remaining(self) -> int:
        return len(self.todo)

    def lines(self, invalid: int = 0, held: int | None = None) -> list[str]:
        out = [f"REMAINING_TOTAL={self.remaining}"]
        out += [f"{k}={self.counts.get(k, 0)}" for k in COUNT_KEYS]
        out.append(f"INVALID_ITEMS={invalid}")
        if held is not None:
            out.append(f"HELD_BY_OTHER={held}")  # remaining items in units a live process holds now
        return out

    def why_lines(self, causes: Iterable[str] = CAUSES) -> list[str]:
        """One sentence per cause (of ``causes``) that left items out of this step."""
        out = []
        # NO_VIDEO counts every item without frames to show; here it is split by whether the item
        # named a video that was not reached (to fix) or named none (a text item: it skips them).
        counts = {**self.counts, "NO_VIDEO": self.counts.get("NO_VIDEO", 0) - self.no_video_named,
                  "NO_VIDEO_NAMED": self.no_video_named}
        for key, text in WHY.items():
            if key in causes and (n := counts.get(key, 0)):
                steps = ", ".join(map(str, sorted(self.waiting_on)))
                words = _ONE if n == 1 else _MANY
                out.append(f"step {self.step}: {n} item{'' if n == 1 else 's'} {text.format(steps=steps, **words)}")
        if NOT_DEDUPLICATED in causes and self.not_deduplicated:
            out.append(f"step {self.step}: {', '.join(self.not_deduplicated)}: no item in the step-0 kept list "
                       "(--keep), so not deduplicated: screened whole")
        return out

    @property
    def cannot_run(self) -> bool:
        """Nothing to run, nothing done or failed here (missing frames are recorded as failures),
        and items held back by a cause the user must fix (an earlier step not run, videos named
        but not reached): the work asked for cannot happen. Items that name no video skip the
        visual steps by the protocol: a step over them alone is finished, not blocked."""
        done_here = sum(self.counts.get(k, 0) for k in ("DONE_TOTAL", "FAILED_TOTAL", "MISSING_FRAMES"))
        unreached = self.counts.get("NO_VIDEO", 0) - self.no_video_named
        return not self.todo and not done_here and bool(self.counts.get("WAITING_EARLIER", 0) or unreached)


def gate(item: Item, spec: StepSpec, state: StepState, has_frames: bool) -> ItemVerdict | None:
    """The item's verdict at ``spec``'s step as the chain reads it, or None when the item skipped
    that step. The one chain rule (the planner and the fates both read it):

    The rows decide first: an item removed or failed at a visual step stays out even when its
    frames are not available now. Only an item that step never touched skipped it for lack of
    frames, and stays eligible for later non-visual steps."""
    v = state.verdict(item.item_id)
    if spec.visual and not has_frames and not v.touched:
        return None
    return v


def _earlier_verdict(item: Item, spec: StepSpec, state: StepState, has_frames: bool) -> str | None:
    """Why an earlier step keeps the item out of this one, or None when it passed (or skipped) it."""
    v = gate(item, spec, state, has_frames)
    if v is None or (v.done and not v.removed):
        return None
    if v.removed:
        return "REMOVED_EARLIER"
    return "FAILED_EARLIER" if v.failed else "WAITING_EARLIER"


def plan_step(
    items: Iterable[Item],
    step: int,
    chain: Sequence[int],
    states: Mapping[int, StepState],
    has_frames: Callable[[Item], bool],
    keep: set[str] | None = None,
) -> StepPlan:
    """Eligible, not done, not failed items of ``step``; ``states`` holds this and earlier steps."""
    if step not in chain:
        raise ValueError(f"step {step} is not in the chain {list(chain)}")
    spec = STEPS[step]
    earlier = [STEPS[s] for s in chain[: list(chain).index(step)]]
    own = states.get(step, StepState())
    plan = StepPlan(step, states=states)
    for item in items:
        reason, waiting = _reason(item, spec, earlier, states, own, has_frames, keep)
        if waiting is not None:
            plan.waiting_on[waiting] += 1
        bench_counts = plan.by_bench.setdefault(item.bench, Counter())
        if reason is None or reason in ("DONE_TOTAL", "FAILED_TOTAL"):
            plan.eligible.append(item)
        if reason is None:
            plan.todo.append(item)
            bench_counts["REMAINING"] += 1
            if own.verdict(item.item_id).stale:
                plan.counts["STALE"] += 1
            continue
        plan.counts[reason] += 1
        if reason == "NO_VIDEO" and not item.video_id:
            plan.no_video_named += 1
        bench_counts[reason] += 1
        if reason == "MISSING_FRAMES":
            plan.missing_frames.append(item)
    return plan


def _reason(
    item: Item,
    spec: StepSpec,
    earlier: Sequence[StepSpec],
    states: Mapping[int, StepState],
    own: StepState,
    has_frames: Callable[[Item], bool],
    keep: set[str] | None,
) -> tuple[str | None, int | None]:
    """Why the item is not run (None: it is), and the earlier step it waits for, if it does."""
    if item.format != "mc":
        return "OPEN_FORMAT", None
    if keep is not None and item.item_id not in keep:
        return "NOT_KEPT", None
    frames = item.has_frames_source and has_frames(item)
    for e in earlier:
        why = _earlier_verdict(item, e, states.get(e.number, StepState()), frames)
        if why:
            return why, e.number if why == "WAITING_EARLIER" else None
    if spec.visual and not item.has_frames_source:
        return "NO_VIDEO", None
    if spec.visual and not frames:
        return "MISSING_FRAMES", None
    v = own.verdict(item.item_id)
    if v.done:
        return "DONE_TOTAL", None
    return ("FAILED_TOTAL" if v.failed else None), None


@dataclass(frozen=True, slots=True)
class KeptList:
    """Step 0's kept list as ``load_keep`` reads it. An item is its benchmark's (``(bench, item_id)``,
    as result rows and item fingerprints name it; another benchmark screened into the same results
    may use the same ids), so a list with a bench column keeps pairs; one without keeps ids.

    Step 0 removed only what its dedup run looked at: a list with a bench column covers the
    benchmarks it names (``step0_kept.parquet`` names every item dedup read, kept or not; a JSONL
    list of kept rows, those it keeps one item of); a list without covers the benchmarks it keeps
    at least one item of. An item of a benchmark the list does not cover was not deduplicated: the
    chain screens it, and no reader counts it removed at step 0."""

    ids: frozenset[str] = frozenset()
    pairs: frozenset[tuple[str, str]] | None = None  # None: the list names no benchmark
    benches: frozenset[str] = frozenset()  # with ``pairs``: the benchmarks the list names

    def keeps(self, item: Item) -> bool:
        if self.pairs is not None:
            return (item.bench, item.item_id) in self.pairs
        return item.item_id in self.ids

    def covered(self, items: Iterable[Item]) -> set[str]:
        """The benchmarks of ``items`` that the dedup run behind the list looked at."""
        if self.pairs is not None:
            return {it.bench for it in items if it.bench in self.benches}
        return {it.bench for it in items if it.item_id in self.ids}

    def removed(self, items: Iterable[Item]) -> list[Item]:
        """The items step 0 removed (left out of the chain), in ``items``' order: those of a
        covered benchmark that the list does not keep."""
        items = list(items)
        covered = self.covered(items)
        return [it for it in items if it.bench in covered and not self.keeps(it)]

    def kept_ids(self, items: Iterable[Item]) -> set[str]:
        """Ids of the items the chain screens (ids are unique among items loaded together)."""
        items = list(items)
        gone = {(it.bench, it.item_id) for it in self.removed(items)}
        return {it.item_id for it in items if (it.bench, it.item_id) not in gone}


def _kept_list(rows: Sequence[tuple[str | None, str, bool]], where: str) -> KeptList:
    """From (bench, id, kept) rows: pairs when the list names benchmarks, every row must then name
    one (a row without would match another benchmark's item of the same id)."""
    missing = [i for b, i, _ in rows if b is None]
    if len(missing) == len(rows):
        return KeptList(frozenset(i for _, i, kept in rows if kept))
    if missing:
        raise ValueError(f"kept list {where}: item {missing[0]} names no bench (other rows do)")
    return KeptList(pairs=frozenset((str(b), i) for b, i, kept in rows if kept),
                    benches=frozenset(str(b) for b, _, _ in rows))


def load_keep(path: str | Path) -> KeptList:
    """The step-0 kept list: a Parquet file (``item_id`` plus ``kept`` or ``verdict``, and ``bench``
    as ``benchcheck dedup`` writes it), a JSONL file of ``{"item_id"}`` rows (``bench`` optional), or
    a text file of one id per line. A file that cannot be read whole is a ValueError naming it (and
    the line): a kept list read in part would drop items silently."""
    p = Path(path)
    if p.suffix == ".parquet":
        import pyarrow.parquet as pq

        try:
            rows = pq.read_table(p).to_pylist()
        except Exception as e:  # pyarrow raises its own types for a file that is not Parquet
            raise ValueError(f"kept list {p}: cannot read Parquet: {first_line(e)}") from None
        if rows and "item_id" not in rows[0]:
            raise ValueError(f"kept list {p}: no item_id column (columns: {', '.join(rows[0])})")
        if rows and "kept" in rows[0]:
            kept = [bool(r["kept"]) for r in rows]
        elif rows and "verdict" in rows[0]:
            kept = [r["verdict"] == "kept" for r in rows]
        else:
            kept = [True] * len(rows)
        return _kept_list([(_bench(r), str(r["item_id"]), k) for r, k in zip(rows, kept, strict=True)], str(p))
    try:
        lines = p.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise ValueError(f"kept list {p}: cannot read: {first_line(e)}") from None
    if p.suffix == ".jsonl":
        import json

        found: list[tuple[str | None, str, bool]] = []
        for n, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as e:
                raise ValueError(f"kept list {p}:{n}: line is not JSON ({e.msg})") from None
            if not isinstance(row, dict) or "item_id" not in row:
                raise ValueError(f"kept list {p}:{n}: not an object with an item_id")
            found.append((_bench(row), str(row["item_id"]), True))
        return _kept_list(found, str(p))
    return KeptList(frozenset(line.strip() for line in lines if line.strip()))


def _bench(row: Mapping[str, object]) -> str | None:
    b = row.get("bench")
    return None if b is None or not str(b).strip() else str(b)
