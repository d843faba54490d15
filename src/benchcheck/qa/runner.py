"""The QA benchmark as stages: dataset -> VLM answers (stored) -> verdicts (stored) -> outputs.

``run_qa`` asks the VLM about every selected item not already answered under the same VLM
configuration, judges every answer not already in the judge cache, and writes the outputs;
``judge_stored`` does the last two stages on a finished folder without calling the VLM.
Every answer and verdict is appended to the folder as it arrives, so a killed run loses at
most the calls in flight and a rerun pays for nothing twice.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from benchcheck import __version__
from benchcheck.masking import Masker
from benchcheck.qa.dataset import QAItem, load_dataset
from benchcheck.qa.errors import PreconditionError
from benchcheck.qa.hints import vlm_hints
from benchcheck.qa.judge import Judge, JudgeConfig, refusal_hint
from benchcheck.qa.outputs import write_outputs
from benchcheck.qa.records import Judgement, VLMAnswer
from benchcheck.qa.state import (
    AnswerStore,
    JudgeCache,
    RunConfig,
    digest,
    folder_lease,
    load_run_config,
    save_run_config,
)
from benchcheck.qa.summary import ItemResult, build_summary
from benchcheck.qa.vlm import VLM

Echo = Callable[[str], None]


@dataclass(frozen=True, slots=True)
class RunOptions:
    """``qa run`` settings that are not the VLM's own."""

    dataset: Path
    videos: Path
    output_dir: Path
    num_frames: int = 8
    timeout_s: float = 300.0
    watchdog_grace_s: float = 60.0
    concurrency: int = 1
    limit: int | None = None
    match_clips: bool = False  # a downloaded dataset: items name their clip (qa.dataset.ClipIndex)
    dataset_name: str | None = None  # --dataset-name, for summary.json


@dataclass(slots=True)
class RunOutcome:
    """What a run or re-judge produced: the exit code, the summary and notable messages."""

    exit_code: int
    summary: dict[str, Any]
    output_dir: Path
    vlm_calls: int = 0
    judge_calls: int = 0
    judge_cache_hits: int = 0
    notes: list[str] = field(default_factory=list)


def _progress(total: int, desc: str) -> Any:
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit="item", disable=None, leave=False)


async def _ask_all(vlm: VLM, items: Sequence[QAItem], store: AnswerStore, concurrency: int) -> None:
    """Ask the VLM about each item, ``concurrency`` at a time; store each answer on arrival."""
    slots = asyncio.Semaphore(concurrency)
    bar = _progress(len(items), "vlm")

    async def one(item: QAItem) -> None:
        async with slots:
            try:
                ans = await vlm.answer(item)
            except Exception as e:  # a bug or an OS error costs one item, never the run
                ans = VLMAnswer(item.id, "error", 0.0, error=f"{type(e).__name__}: {e}", error_kind="internal")
        store.append(item, replace(ans, concurrency=concurrency))
        bar.update(1)

    try:
        await asyncio.gather(*(one(i) for i in items))
    finally:
        bar.close()


async def _judge_answers(config: JudgeConfig, out_dir: Path, items: Sequence[QAItem],
                         answers: dict[str, VLMAnswer], redactor: Masker,
                         outcome: RunOutcome) -> tuple[dict[str, Judgement], str | None]:
    """Verdicts for every ok answer (cache first) and the refusal hint, if every call was refused."""
    pairs = [(i, answers[i.id].answer or "") for i in items if answers[i.id].status == "ok"]
    if not pairs:
        return {}, None
    judge = Judge(config, JudgeCache(out_dir, redactor), redactor)
    bar = _progress(len(pairs), "judge")

    async def one(item: QAItem, answer: str) -> Judgement:
        verdict = await judge.judge(item, answer)
        bar.update(1)
        return verdict

    hint = None
    try:
        verdicts = list(await asyncio.gather(*(one(i, a) for i, a in pairs)))
        bar.close()
        if refusal_hint(verdicts, config, None) is not None:
            # Every call was refused: worth one more request to show which ids the key may use.
            hint = refusal_hint(verdicts, config, await judge.model_ids())
    finally:
        bar.close()
        await judge.aclose()
    outcome.judge_cache_hits = judge.cache_hits
    outcome.judge_calls = len(pairs) - judge.cache_hits
    outcome.notes.append(f"judge: {outcome.judge_calls} calls, {judge.cache_hits} verdicts from the cache")
    return {v.item_id: v for v in verdicts}, hint


async def _finish(config: RunConfig, out_dir: Path, answers: dict[str, VLMAnswer],
                  judge: JudgeConfig | None, redactor: Masker, outcome: RunOutcome,
                  timing: dict[str, Any], t0: float) -> RunOutcome:
    """Judge (unless skipped), then build and write every output file."""
    verdicts: dict[str, Judgement] = {}
    hint = None
    if judge is not None:
        verdicts, hint = await _judge_answers(judge, out_dir, config.items, answers, redactor, outcome)
    results = [ItemResult(i, answers[i.id], verdicts.get(i.id)) for i in config.items]
    settings = {**config.settings, **(judge.settings() if judge else {"skip_judge": True}), **timing,
                "finished_at": _now(), "wall_s": round(time.monotonic() - t0, 3)}
    summary = build_summary(results, dataset_entries=config.dataset_entries, skipped=config.skipped,
                            not_selected=config.not_selected, settings=settings,
                            skipped_entries=config.skipped_entries, entry_errors=config.entry_errors,
                            judge_model_requested=judge.model if judge else None, judge_hint=hint)
    hints = vlm_hints(answers[i.id] for i in config.items)
    if hints:
        summary["vlm_hints"] = hints
    write_outputs(out_dir, results, summary, redactor)
    outcome.exit_code = summary["exit_code"]
    outcome.summary = redactor.value(summary)
    if hint:
        outcome.notes.append(f"hint: {redactor.text(hint)}")
    outcome.notes += [f"hint: {h}" for h in hints]
    return outcome


def _with_missing(config: RunConfig, answers: dict[str, VLMAnswer]) -> dict[str, VLMAnswer]:
    """Every selected item has an answer; one with no stored row (an interrupted run) is an error."""
    for item in config.items:
        if item.id not in answers:
            answers[item.id] = VLMAnswer(item.id, "error", 0.0, error="never answered: the run was "
                                         "interrupted; rerun `benchcheck qa run`", error_kind="not_run")
    return answers


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def prepare_run(opts: RunOptions, vlm: VLM) -> RunConfig:
    """Load the dataset and describe the run; raises :class:`PreconditionError`. Nothing is
    written: the configuration is saved under the folder's lease (:func:`run_qa`)."""
    dataset = load_dataset(opts.dataset, opts.videos, opts.match_clips)
    items = dataset.items[: opts.limit] if opts.limit is not None else dataset.items
    vlm_settings = {**vlm.settings(), "num_frames": opts.num_frames, "timeout_s": opts.timeout_s}
    settings = {
        "dataset": str(opts.dataset), "videos": str(opts.videos),
        **({"dataset_name": opts.dataset_name} if opts.dataset_name else {}), **vlm_settings,
        "watchdog_grace_s": opts.watchdog_grace_s, "concurrency": opts.concurrency,
        "limit": opts.limit, "benchcheck_version": __version__,
    }
    return RunConfig(digest(vlm_settings), settings, items, dataset.total, dataset.skipped,
                     len(dataset.items) - len(items), dataset.skipped_entries, dataset.entry_errors)


def _save_config(opts: RunOptions, config: RunConfig, redactor: Masker) -> None:
    try:
        save_run_config(opts.output_dir, config, redactor)
    except OSError as e:
        raise PreconditionError(f"output folder {opts.output_dir}: {e}") from e


async def run_qa(opts: RunOptions, vlm: VLM, judge: JudgeConfig | None, redactor: Masker,
                 echo: Echo = lambda _s: None) -> RunOutcome:
    """The whole benchmark; ``judge=None`` is ``--skip-judge`` (latency only)."""
    started, t0 = _now(), time.monotonic()
    config = prepare_run(opts, vlm)
    # The folder is written by this run alone from here on: a second run on it stops before it
    # asks anything, instead of asking every item again and appending a second answer for each.
    with folder_lease(opts.output_dir):
        _save_config(opts, config, redactor)
        return await _run_leased(opts, config, vlm, judge, redactor, echo, started, t0)


async def _run_leased(opts: RunOptions, config: RunConfig, vlm: VLM, judge: JudgeConfig | None, redactor: Masker,
                      echo: Echo, started: str, t0: float) -> RunOutcome:
    store = AnswerStore(opts.output_dir, config.vlm_config_hash, redactor)
    done = store.latest(config.items)
    todo = [i for i in config.items if i.id not in done or done[i.id].status != "ok"]
    reused = len(config.items) - len(todo)
    echo(f"qa: {len(config.items)} items selected, {sum(config.skipped.values())} skipped, "
         f"{len(config.entry_errors)} qa entries that cannot run, {reused} answered before, {len(todo)} to ask")
    for e in config.entry_errors[:10]:
        echo(f"entry {e.entry}" + (f" (id {e.id})" if e.id else "") + f": {redactor.text(e.why)}")
    try:
        await _ask_all(vlm, todo, store, opts.concurrency)
    finally:
        await vlm.aclose()
    answers = _with_missing(config, store.latest(config.items))
    outcome = RunOutcome(0, {}, opts.output_dir, vlm_calls=len(todo))
    timing = {"started_at": started, "vlm_stage_s": round(time.monotonic() - t0, 3)}
    return await _finish(config, opts.output_dir, answers, judge, redactor, outcome, timing, t0)


async def judge_stored(out_dir: Path, judge: JudgeConfig, redactor: Masker) -> RunOutcome:
    """Re-judge the answers stored in ``out_dir`` (cache first) and rewrite its outputs."""
    try:
        config = load_run_config(out_dir)
    except ValueError as e:
        raise PreconditionError(str(e)) from None
    with folder_lease(out_dir):  # it appends verdicts and rewrites the outputs, as a run does
        store = AnswerStore(out_dir, config.vlm_config_hash, redactor, config.answer_keys)
        answers = _with_missing(config, store.latest(config.items))
        outcome = RunOutcome(0, {}, out_dir)
        return await _finish(config, out_dir, answers, judge, redactor, outcome, {"rejudged_at": _now()},
                             time.monotonic())
