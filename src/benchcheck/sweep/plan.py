"""What the sweep must do for each (bench, item, condition): one pure decision per cell.

The dry-run prints these decisions counted, and the runner executes the very same list, so the
counts of a dry-run equal what the full run then writes (``todo`` -> an ``ok``/``unparsed`` row,
``na`` -> an ``NA`` row, ``reuse`` -> a row with ``meta.reused_from``, ``failure`` -> a line in
``failures.jsonl`` and an error row, once while it fails the same way). Whether a cell is already
settled is the reducer's word (``verdicts.StepState`` over the group's rows, ``sweep.state``):
``done`` (an answer under the condition's current ``config_hash``, or one of the origin's answers:
``results.settles``), ``failed`` (given up after ``MAX_ERRORS_PER_ITEM`` engine errors). A cell
whose only rows were made under another hash is *stale*: it is decided afresh like a new cell and
``stale`` says what changed, never ``done``.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Protocol

from benchcheck.items import Item
from benchcheck.items.record import video_has_frames
from benchcheck.protocol import build_prompt
from benchcheck.records import ErrorRow
from benchcheck.spec import RunSpec
from benchcheck.sweep.conditions import BLIND, na_if_too_short, plan_of, reuses
from benchcheck.sweep.results import Key
from benchcheck.verdicts import StepState
from benchcheck.video.meta import VideoMeta, read_meta
from benchcheck.video.plans import MAX_IMAGES, TOKEN_BUDGET, FramePlan, plan_frames, tokens_per_frame

Kind = Literal["done", "todo", "na", "reuse", "failure", "failed"]
KINDS: tuple[Kind, ...] = ("done", "todo", "na", "reuse", "failure", "failed")


@dataclass(frozen=True, slots=True)
class Cell:
    """One (bench, item, condition) decision; ``plan`` is set for visual ``todo`` cells."""

    item: Item
    condition: str
    kind: Kind
    prompt: str
    plan: FramePlan | None = None
    reason: str = ""
    reuse_from: str | None = None
    projected_tokens: int = 0
    config_hash: str = ""  # the condition's current spec hash: the rows written for this cell carry it
    stale: str = ""  # the cell's rows were made under another spec: what changed (it is redone)
    error: tuple[str, str] = ("", "")  # a gave-up cell's last error: (its kind, its message)

    @property
    def key(self) -> Key:
        return (self.item.bench, self.item.item_id, self.condition)


# How the error row of a failure before the engine begins (each written as an internal failure):
# frames that could not be decoded (``runner.prepare_unit``), no usable video or no frame plan
# (``runner.write_static``: ``failure_label``'s kinds).
DECODE = "decode"
NO_VIDEO = "no video"
FRAME_PLAN = "frame plan"
STAGES = (DECODE, NO_VIDEO, FRAME_PLAN)


def error_label(row: ErrorRow) -> tuple[str, str]:
    """(kind, message) of an error row, as a run's outcome names it: ``decode``, ``no video`` or
    ``frame plan`` for a failure before the engine, else the engine's failure kind and HTTP status
    (``http 500``)."""
    head = f"{row.error_kind} {row.error_status}" if row.error_status is not None else row.error_kind
    message = row.error.split(": ", 1)[1] if ": " in row.error else row.error
    if row.error_kind == "internal":
        for stage in STAGES:
            if message.startswith(f"{stage}: "):
                return stage, message[len(stage) + 2:]
    return head, message


def failure_label(cell: Cell) -> tuple[str, str]:
    """(kind, message) of a cell that has no answer and will get none: no video, a frame plan that
    cannot be made, or the last error of an item given up."""
    if cell.kind == "failed":
        return cell.error if cell.error[0] else ("engine", cell.reason)
    if cell.reason.startswith(f"{FRAME_PLAN}: "):
        return FRAME_PLAN, cell.reason[len(FRAME_PLAN) + 2:]
    return NO_VIDEO, cell.reason


class MetaCache:
    """``meta.json`` of each video read once; a missing or unreadable one is a reason string."""

    def __init__(self, store: Path | None) -> None:
        self.store = store
        self._cache: dict[str, VideoMeta | str] = {}

    def get(self, video_id: str | None) -> VideoMeta | str:
        if not video_has_frames(video_id) or video_id is None:
            return f"no normalized video (video_id {video_id!r})"
        if self.store is None:
            return "no --store given"
        if video_id not in self._cache:
            try:
                self._cache[video_id] = read_meta(self.store, video_id)
            except ValueError as e:
                self._cache[video_id] = f"no normalized video: {e}"
        return self._cache[video_id]


def text_tokens(prompt: str) -> int:
    """Projected text tokens of a prompt (4 characters per token, plus the chat template's ~20)."""
    return math.ceil(len(prompt) / 4) + 20


class Reduced(Protocol):
    """What the planner asks of the rows already written (``sweep.state.SweepState``)."""

    def group(self, bench: str, condition: str) -> StepState | None: ...

    def why_stale(self, condition: str, old_hash: str) -> str: ...


EDITED = "the item changed since its answer (question, options or gold)"


def settled(item: Item, cond: str, prompt: str, state: StepState | None, why: Reduced | None) -> Cell | str:
    """The cell when its rows settle it (``done``/``failed``); otherwise why it is stale ("" if not)."""
    if state is None:
        return ""
    v = state.verdict(item.item_id)
    if v.done:
        return Cell(item, cond, "done", prompt, config_hash=state.expect_hash or "")
    if v.failed:
        last = state.last_error.get(item.item_id)
        return Cell(item, cond, "failed", prompt, reason=f"gave up after {v.counted_errors} engine errors",
                    config_hash=state.expect_hash or "", error=error_label(last) if last else ("", ""))
    # The edit is told before a spec change: an item answered under an earlier spec too keeps that
    # row's hash in ``stale_hash``, yet what sends it back now is its edit.
    if v.stale and item.item_id in state.edited:
        return EDITED
    if v.stale and why is not None:
        return why.why_stale(cond, state.stale_hash.get(item.item_id, ""))
    return ""


def decide(item: Item, spec: RunSpec, metas: MetaCache, state: StepState | None = None,
           why: Reduced | None = None, chash: str | None = None) -> Cell:
    """The decision for one cell (see the module doc); pure apart from reading ``meta.json``.
    ``state``: the reducer over the cell's (bench, condition) rows, judged by ``chash``."""
    cond = spec.name
    chash = chash if chash is not None else spec.config_hash
    prompt = build_prompt(spec.prompt.intro, item.question, item.options)
    known = settled(item, cond, prompt, state, why)
    if isinstance(known, Cell):
        return known
    # A failure is never said stale: it redoes nothing (the dry run's ``stale`` counts the todo, NA
    # and reuse cells), and since it has an error row of its own, its error rows of another spec
    # would make every failure of a new spec one "to redo".
    stale = known
    if cond == BLIND:  # needs no video: every item is answered
        return Cell(item, cond, "todo", prompt, projected_tokens=text_tokens(prompt), config_hash=chash, stale=stale)
    meta = metas.get(item.video_id)
    if isinstance(meta, str):
        return Cell(item, cond, "failure", prompt, reason=meta, config_hash=chash)
    if meta.too_short and na_if_too_short(cond):
        return Cell(item, cond, "na", prompt, reason="too_short", config_hash=chash, stale=stale)
    source = reuses(cond, meta.width, meta.height)
    if source is not None:
        return Cell(item, cond, "reuse", prompt, reuse_from=source, config_hash=chash, stale=stale)
    plan_spec = plan_of(cond)
    assert plan_spec is not None
    fs = spec.frames
    try:
        plan = plan_frames(plan_spec, meta.timestamps, meta.width, meta.height,
                           fs.token_budget or TOKEN_BUDGET, fs.max_images or MAX_IMAGES)
        tokens = text_tokens(prompt) + len(plan.indices) * tokens_per_frame(plan.width, plan.height)
    except ValueError as e:  # also frames the processor refuses (too elongated): never sent
        return Cell(item, cond, "failure", prompt, reason=f"{FRAME_PLAN}: {e}", config_hash=chash)
    return Cell(item, cond, "todo", prompt, plan=plan, projected_tokens=tokens, config_hash=chash, stale=stale)


def plan_sweep(items: Iterable[Item], specs: Mapping[str, RunSpec], store: Path | None,
               reduced: Reduced | None = None) -> list[Cell]:
    """Every cell, bench-major, conditions in run order, items in id order."""
    metas = MetaCache(store)
    by_bench: dict[str, list[Item]] = defaultdict(list)
    for it in items:
        by_bench[it.bench].append(it)
    hashes = {name: spec.config_hash for name, spec in specs.items()}  # once per spec, not per cell
    cells: list[Cell] = []
    for bench in sorted(by_bench):
        its = sorted(by_bench[bench], key=lambda i: i.item_id)
        for name, spec in specs.items():
            state = reduced.group(bench, name) if reduced is not None else None
            cells.extend(decide(it, spec, metas, state, reduced, hashes[name]) for it in its)
    return cells


@dataclass(slots=True)
class Counts:
    """Per (bench, condition): cells of each kind and the projected prompt tokens of the todo ones."""

    kinds: Counter[Kind] = field(default_factory=Counter)
    tokens: int = 0

    @property
    def tokens_per_item(self) -> float:
        return self.tokens / self.kinds["todo"] if self.kinds["todo"] else 0.0


def count_cells(cells: Sequence[Cell]) -> dict[tuple[str, str], Counts]:
    out: dict[tuple[str, str], Counts] = {}
    for c in cells:
        n = out.setdefault((c.item.bench, c.condition), Counts())
        n.kinds[c.kind] += 1
        if c.kind == "todo":
            n.tokens += c.projected_tokens
    return out


def dry_run_lines(cells: Sequence[Cell]) -> list[str]:
    """The dry-run table: per bench x condition, todo / NA / reuse / failures / gave up / done, and
    ``stale``: how many of the todo, NA and reuse cells redo rows made under another spec (one line
    per group below the table says what changed)."""
    lines = [f"{'bench':20s} {'condition':16s} {'todo':>6s} {'NA':>5s} {'reuse':>6s} {'fail':>5s} {'gaveup':>6s} "
             f"{'stale':>6s} {'done':>6s} {'prompt_tok/item':>15s}"]
    total: Counter[Kind] = Counter()
    stale: dict[tuple[str, str], Counter[str]] = defaultdict(Counter)
    for c in cells:
        if c.stale:
            stale[(c.item.bench, c.condition)][c.stale] += 1
    for (bench, cond), n in count_cells(cells).items():
        k = n.kinds
        total.update(k)
        n_stale = sum(stale[(bench, cond)].values()) if (bench, cond) in stale else 0
        lines.append(f"{bench:20s} {cond:16s} {k['todo']:6d} {k['na']:5d} {k['reuse']:6d} {k['failure']:5d} "
                     f"{k['failed']:6d} {n_stale:6d} {k['done']:6d} {n.tokens_per_item:15.0f}")
    for (bench, cond), whys in stale.items():
        for why, count in sorted(whys.items()):
            lines.append(f"stale {bench} {cond}: {count} to redo ({why})")
    n_stale = sum(sum(w.values()) for w in stale.values())
    lines.append(f"TOTAL todo={total['todo']} NA={total['na']} reuse={total['reuse']} failures={total['failure']} "
                 f"done={total['done']} stale={n_stale} gave_up={total['failed']}")
    return lines
