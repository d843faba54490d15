"""Load what a screening command needs: items, the step states of a chain, frames predicate."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from benchcheck.items import Item, fingerprints
from benchcheck.screen.frames import FrameSource
from benchcheck.screen.plan import StepPlan, load_keep, plan_step
from benchcheck.store import StepState, StepStore


def step_dir(results: str | Path, step: int) -> Path:
    return Path(results) / f"step{step}"


def step_store(results: str | Path, step: int) -> StepStore:
    return StepStore(step_dir(results, step))


@dataclass(slots=True)
class ScreenContext:
    """Items plus everything the planner reads from disk for one step."""

    items: list[Item]
    results: Path
    chain: tuple[int, ...]
    frames: FrameSource | None = None
    # ids of the items step 0 let through (``KeptList.kept_ids`` over every item loaded); None: no --keep
    keep: set[str] | None = None
    # Every item id of each benchmark as loaded, before --limit: what units are planned over, so an
    # item is in the same unit (file, lease) whatever part of its benchmark a run asks for.
    # None: the ids of ``items``.
    all_ids: dict[str, tuple[str, ...]] | None = None
    not_deduplicated: tuple[str, ...] = ()  # benchmarks of ``items`` the kept list does not cover

    def unit_basis(self) -> dict[str, tuple[str, ...]]:
        """Each benchmark's item ids that units are planned over (see ``all_ids``)."""
        return self.all_ids if self.all_ids is not None else ids_by_bench(self.items)

    def states(self, upto: int, include_own: bool = True, compact: bool = False) -> dict[int, StepState]:
        """The chain's step states up to ``upto`` (without it when ``include_own`` is false), each
        read once through the reducer and judged against its folder's ``run_spec.json``."""
        benches = {i.bench for i in self.items}
        steps = self.chain[: self.chain.index(upto) + (1 if include_own else 0)]
        hashes = fingerprints(self.items)
        return {s: step_store(self.results, s).current_state(benches, compact=compact, items=hashes) for s in steps}

    def has_frames(self, item: Item) -> bool:
        return self.frames is not None and bool(item.video_id) and self.frames.available(str(item.video_id))

    def plan(self, step: int, include_own: bool = True) -> StepPlan:
        """The step's plan and the states it read (``plan.states``). Without ``include_own`` the
        step's own rows are not read: every eligible item is "todo", and ``run_task`` reads each
        unit's rows itself under the unit's lease (read before the lease, they could be stale).
        Read compact: the planner needs each row's verdict, not its log-probs."""
        states = self.states(step, include_own, compact=True)
        plan = plan_step(self.items, step, self.chain, states, self.has_frames, self.keep)
        plan.not_deduplicated = self.not_deduplicated
        return plan


def ids_by_bench(items: Sequence[Item]) -> dict[str, tuple[str, ...]]:
    out: dict[str, list[str]] = {}
    for i in items:
        out.setdefault(i.bench, []).append(i.item_id)
    return {b: tuple(ids) for b, ids in out.items()}


def make_context(items: Sequence[Item], results: str | Path, chain: tuple[int, ...],
                 frames: FrameSource | None, keep_file: str | Path | None,
                 benches: Sequence[str] | None = None, limit: int | None = None) -> ScreenContext:
    """Filter items to the benchmarks asked for and the first ``limit`` per benchmark. A benchmark
    asked for that no item has is a ValueError (a typo would otherwise run nothing, exit 0)."""
    if benches and (unknown := [b for b in benches if b not in {i.bench for i in items}]):
        present = sorted({i.bench for i in items})
        raise ValueError(f"--bench: no items for {', '.join(unknown)} (have {', '.join(present)})")
    chosen = [i for i in items if not benches or i.bench in benches]
    all_ids = ids_by_bench(chosen)
    if limit is not None:
        seen: dict[str, int] = {}
        kept = []
        for i in chosen:
            seen[i.bench] = seen.get(i.bench, 0) + 1
            if seen[i.bench] <= limit:
                kept.append(i)
        chosen = kept
    keep: set[str] | None = None
    uncovered: tuple[str, ...] = ()
    if keep_file:
        step0 = load_keep(keep_file)
        keep = step0.kept_ids(items)
        uncovered = tuple(sorted({i.bench for i in chosen} - step0.covered(items)))
    return ScreenContext(list(chosen), Path(results), chain, frames, keep, all_ids, uncovered)
