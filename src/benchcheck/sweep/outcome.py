"""What a ``sweep run`` came to, from the plan made again after it (this run's rows and every
earlier run's together): cells answered, cells that failed and why, and the exit code.

A cell is answered when a row settles it (``ok``, ``unparsed``, ``NA`` or reused); it has failed
when it has no answer and none is coming: no video, a frame plan that cannot be made, or an item
given up after its engine errors. Cells still to do (held by another process, a stopped run, a
reuse waiting for its source) are neither: while any is left (another process on the same work
may still answer it), the run has not come to nothing. A run that answered no cell, left none to
do and failed some could do nothing: it says why in one line and exits 1; a run with some of each
exits 0 and names the failed cells in its last line.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from benchcheck.sweep.plan import Cell, failure_label
from benchcheck.sweep.results import SweepPaths

# Characters of the example message a run's last line quotes (the whole one is in the failure rows).
EXAMPLE_CHARS = 160


@dataclass(frozen=True, slots=True)
class Outcome:
    answered: int
    failed: int
    top: tuple[str, int, str] = ("", 0, "")  # the most common failure kind, its cells, one message
    gave_up: int = 0  # failed cells whose error rows are in sweep_rows (the others have none)
    pending: int = 0  # cells still to do (another process's, a stopped run's, a waiting reuse)

    @property
    def exit_code(self) -> int:
        return 1 if self.failed and not self.answered and not self.pending else 0


def outcome(cells: Sequence[Cell]) -> Outcome:
    """The outcome of the planned cells (pure): the most common failure kind first, ties by name."""
    failed = [failure_label(c) for c in cells if c.kind in ("failure", "failed")]
    gave_up = sum(c.kind == "failed" for c in cells)
    answered = sum(c.kind == "done" for c in cells)
    pending = len(cells) - answered - len(failed)
    if not failed:
        return Outcome(answered, 0, pending=pending)
    counts = Counter(kind for kind, _ in failed)
    kind, n = min(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    example = next(msg for k, msg in failed if k == kind)
    return Outcome(answered, len(failed), (kind, n, example), gave_up, pending)


def outcome_line(o: Outcome, paths: SweepPaths) -> str:
    """The run's last line when cells failed ("" when none did): how many, the most common reason
    with its count and an example, and where the failure rows are."""
    if not o.failed:
        return ""
    kind, n, example = o.top
    if len(example) > EXAMPLE_CHARS:
        example = example[:EXAMPLE_CHARS - 3] + "..."
    where = f"every failure in {paths.failures}" + (
        f", the error rows in {paths.results / 'sweep_rows'}/<condition>/<bench>.jsonl" if o.gave_up else "")
    head = (f"no cell answered: {_cells(o.failed)} failed" if o.exit_code
            else f"{o.failed} of {_cells(o.failed + o.answered + o.pending)} failed")
    return f"sweep: {head}; most often {kind} ({_cells(n)}, e.g. {example}); {where}"


def _cells(n: int) -> str:
    return f"{n} cell" if n == 1 else f"{n} cells"
