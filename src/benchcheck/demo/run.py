"""The README's first command: the pipeline end to end on benchmarks whose answers are known.

Synthetic clips of coloured shapes give items of known kinds (``demo.kinds``); the rule-based
``reference`` engine (a deterministic program, not a model) screens them through step 0 and steps
1-6, so every removal can be checked against the construction: the demo prints the funnel per
kind, observed next to predicted. The ``reference-prior`` engine (the same rules plus a planted
letter prior, guesses and noise) screens the same chain, so false and prior-driven removals exist
and are known; a tiny random-weight transformer runs steps 1 and 4 through the real ``hf``
engine path (its decisions are noise, and its rows say so); each run is audited, and the audits
are checked against the ground truth (``demo.audit_truth``). ``qa run`` asks a few items of the
reference engine behind ``benchcheck serve``, scored by the scripted judge. Running it again
resumes (nothing left to do) and rebuilds the assembled outputs.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchcheck.atomic import write_json_atomic, write_text_atomic
from benchcheck.demo import funnel as fn
from benchcheck.demo.audit_truth import Planted, TruthCheck, zero_prior
from benchcheck.demo.benchmarks import DemoItem, build_items, scenes_needed, write_benchmarks
from benchcheck.demo.kind_videos import make_scene_videos, normalize_scenes
from benchcheck.demo.kinds import STORAGE_SHORT, View, answerable, expected_verdicts
from benchcheck.demo.scenes import make_scenes
from benchcheck.engines.base import Engine
from benchcheck.engines.options import EngineOptions
from benchcheck.engines.registry import from_options
from benchcheck.engines.rules.reference import DEFAULT_NAME as REFERENCE_NAME
from benchcheck.engines.rules.reference_prior import planted_prior
from benchcheck.items import Item, load_items
from benchcheck.report.site import demo_report
from benchcheck.screen.assemble import assemble
from benchcheck.screen.context import ScreenContext, make_context
from benchcheck.screen.frames import CacheFrames
from benchcheck.screen.runner import RunConfig, append_run_log, run_step
from benchcheck.screen.steps import DEFAULT_CHAIN, DEFAULT_INTRO, INTROS, STEPS
from benchcheck.sweep.analysis import Interval
from benchcheck.sweep.demo import DEMO_CONDS, DemoSweep, run_demo_sweep
from benchcheck.sweep.engine import SweepEngine

Echo = Callable[[str], None]
TINY_LABEL = "tiny-qwen3-vl-8b-random-weights"  # the tiny model's rows name it as what it is
TINY_CHAIN = (1, 4)  # the steps with no frames: the tiny model answers every item in about a second
PRIOR_ENGINE = "reference-prior"  # the reference engine with a planted letter prior, guesses and noise


@dataclass(frozen=True, slots=True)
class DemoResult:
    results: Path
    funnel_match: bool
    funnel_path: Path
    truth_path: Path
    wall_s: float
    sweep_match: bool | None = None  # every benchmark's sweep verdict is the expected one (None: not run)
    audit_match: bool | None = None  # every ground-truth check of the audit holds (None: not run)
    probe_match: bool | None = None  # the probe finds the planted pattern and the flags the wrong golds
    qa_ok: bool | None = None  # the QA run scored every item with no item error (None: not run)


def build_tiny(root: Path) -> Path:
    from benchcheck.testing import build_tiny_model

    d = root / "tiny-qwen3-vl-8b"
    if not (d / "config.json").is_file():
        build_tiny_model(d, seed=0)
    return d


def _minilm(echo: Echo) -> Any:
    """The packaged MiniLM, loaded once for step 0 and the probe; None (and a note) where
    sentence-transformers is not installed."""
    from benchcheck.dedup import DedupError, SentenceEmbedder, resolve_model

    try:
        return SentenceEmbedder(resolve_model("minilm"), device="cpu")
    except (DedupError, ImportError, OSError) as e:
        echo(f"  MiniLM not available: {e}")
        return None


def _step0(items: Sequence[Item], out: Path, echo: Echo, progress: bool, embedder: Any = None) -> Path | None:
    """Step-0 dedup with the packaged MiniLM; None (and a note) where it is not installed."""
    from benchcheck.dedup import DedupError, dedup_items, default_threshold
    from benchcheck.dedup.outputs import write_outputs

    if embedder is None:
        echo("  step 0 skipped: sentence-transformers is not installed")
        return None
    try:
        result = dedup_items(items, embedder, default_threshold(embedder.ref),
                             out / "pool_embeddings", progress=progress)
        write_outputs(result, out)
    except (DedupError, ImportError, OSError) as e:
        echo(f"  step 0 skipped: {e}")
        return None
    verdicts = [v.verdict for v in result.verdicts]
    echo(f"  step 0: {len(verdicts)} items, {verdicts.count('kept')} kept, "
         f"{len(verdicts) - verdicts.count('kept')} duplicates removed")
    return out / "step0_kept.parquet"


async def _screen(ctx: ScreenContext, engine: Engine, echo: Echo, progress: bool, batch_items: int) -> None:
    for step in ctx.chain:
        cfg = RunConfig(step=step, intro=INTROS[DEFAULT_INTRO], workers=1, batch_items=batch_items,
                        progress=progress)
        started = time.time()
        summary = await run_step(ctx, engine, cfg, echo)
        append_run_log(ctx.results, summary, cfg, engine, [], started)
        plan = ctx.plan(step)
        echo(f"  step {step} {STEPS[step].name}: {summary.ok} screened now, {summary.removed} removed, "
             f"{summary.error_rows} error rows; REMAINING_TOTAL={plan.remaining}")


async def _tiny_run(items: Sequence[Item], out: Path, results: Path, keep: Path | None, echo: Echo,
                    progress: bool) -> None:
    ctx = make_context(items, results, TINY_CHAIN, None, keep)
    engine = from_options("hf", EngineOptions(model=str(build_tiny(out / "models")), device="cpu",
                                              served_name=TINY_LABEL))
    try:
        await _screen(ctx, engine, echo, progress, 16)
    finally:
        await engine.aclose()


async def _prior_run(ctx: ScreenContext, echo: Echo, progress: bool) -> None:
    engine = from_options(PRIOR_ENGINE, EngineOptions())
    try:
        await _screen(ctx, engine, echo, progress, 8)
    finally:
        await engine.aclose()


def _sweep(bundle: Benchmarks, out: Path, echo: Echo) -> DemoSweep:
    """The frames x pixels sweep on every demo item through the reference engine, then its verdict
    per benchmark next to the one the construction gives (``expected_verdicts``)."""
    echo(f"7/9 sweep: conditions {DEMO_CONDS} on every item, reference engine, then the analysis")
    result = run_demo_sweep(bundle.paths, out / "store", out / "sweep",
                            SweepEngine("reference", model=REFERENCE_NAME), echo=lambda _: None)
    echo("8/9 sweep verdict per benchmark: observed vs expected (pixels: acc 32f s448 - s168; "
         "frames: acc 128f - 8f at s224; 95% video-clustered intervals)")
    for bench, want in expected_verdicts().items():
        v = result.verdicts.get(bench)
        got = v.verdict if v else "missing"

        def fmt(i: Interval | None) -> str:
            return "-" if i is None else f"{i.est:+.2f} [{i.lo:+.2f}, {i.hi:+.2f}]"

        effects = f"pixels {fmt(v.pixels)}  frames {fmt(v.frames)}" if v else ""
        echo(f"  {bench:<12} {got:<12} expected {want:<8} {'ok' if got == want else 'DIFFERS'}  {effects}")
    record = {b: {"observed": v.verdict, "expected": expected_verdicts().get(b)} for b, v in result.verdicts.items()}
    write_json_atomic(out / "sweep_verdicts.json", record, indent=1)
    return result


def _audit(results: Path, items: Sequence[Item], out: Path, echo: Echo, chain: Sequence[int],
           truth: Path | None = None, planted: Planted | None = None, title: str = "",
           probe_dir: Path | None = None, step0: Collection[str] | None = None,
           step0_scope: Collection[str] | None = None) -> TruthCheck | None:
    """``benchcheck audit`` on a run's rows (no new forwards) into ``out``; with ``truth``, the
    audit checked against the ground truth (``audit_truth.csv``/``.md`` beside it). ``step0``: the
    ids step 0 removed, left out as ``audit --step0`` leaves them out (the chain ran with --keep);
    ``step0_scope``: the benchmarks its dedup run read."""
    from benchcheck.audit import count_step0, read_forwards, run_audit
    from benchcheck.audit.write import headline, write_audit
    from benchcheck.demo.audit_truth import check_truth, load_truth, write_truth_check
    from benchcheck.step0.probe_stamp import left_out

    ids = [it.item_id for it in items if it.format == "mc" and it.item_id not in (step0 or ())]
    res = run_audit(results, ids, chain=chain)
    if not res.steps:
        echo(f"  audit of {results.name} skipped: no ok rows with letter log-probs")
        return None
    count_step0(res, items, step0, step0_scope)
    write_audit(res, out, probe_dir, left_out(items, step0))
    echo(f"  {results.name}: {headline(res)}  ({out / 'audit.md'})")
    if truth is None:
        return None
    tc = check_truth(read_forwards(results, set(ids)), res, load_truth(truth), planted)
    write_truth_check(tc, out, title)
    overall = next(c for c in tc.null if c.step is None)
    auc = next(a for a in tc.auc if a.step is None)
    prior = ("no planted prior" if tc.prior_ok is None else
             f"{len(tc.flagged)} flagged, {len(tc.prior_driven)} prior-driven by construction, "
             f"{'the same items' if tc.prior_ok else 'DIFFERENT items'}")
    echo(f"    ground truth: false removals {overall.false_removals} of {overall.removed}, null's chance-removal "
         f"estimate {overall.est:.1f} [{overall.lo:.1f}, {overall.hi:.1f}] "
         f"({'brackets it at every step' if tc.null_ok else 'DOES NOT BRACKET IT'}); prior: {prior}; "
         f"confidence AUC true vs false removals {'n/a' if auc.auc is None else f'{auc.auc:.3f}'}; "
         f"{'ok' if tc.ok else 'CHECK FAILS'}  ({out / 'audit_truth.md'})")
    return tc


DEMO_PERMUTATIONS = 39  # rounds of the probe's null in the demo (p >= 1/40): enough to call p <= 0.05, fast


def _step0_removed(items: Sequence[Item], keep: Path | None) -> dict[str, Any] | None:
    """The ids step 0 removed, read from the kept list the chain screened with (``keep``), as
    report, probe and audit read a ``--step0``."""
    from benchcheck.report.source import read_step0

    return dict(read_step0(keep).removed(items)) if keep is not None else None


def _step0_scope(items: Sequence[Item], keep: Path | None) -> set[str] | None:
    """The benchmarks of ``items`` the dedup run behind ``keep`` read, as ``audit --step0`` reads them."""
    from benchcheck.report.source import read_step0

    return read_step0(keep).deduplicated(items) if keep is not None else None


def _probe(items: Sequence[Item], results: Path, out: Path, minilm: Any, echo: Echo, chain: Sequence[int],
           keep: Path | None) -> bool:
    """The text-only probe and the label flags on the reference run (``results/probe``), checked
    against ``truth/probe_truth.json``: the planted pattern and the wrong golds. Step 0's duplicates
    are left out, as ``probe --step0`` leaves them out, since the chain never saw them."""
    from benchcheck.demo.benchmarks import PROBE_TRUTH
    from benchcheck.demo.probe_check import check_probe
    from benchcheck.probe import ProbeConfig, probe_pool
    from benchcheck.probe.embedder import text_embedder

    t0 = time.time()
    dups = _step0_removed(items, keep)
    emb = text_embedder("minilm", out / "probe_embeddings", loaded=minilm) if minilm is not None else None
    echo(f"  + text-only probe ({'MiniLM + ' if emb else ''}text features, 5 folds by video, {DEMO_PERMUTATIONS} "
         "permutations) and label flags (steps 3, 5, 6 + the probe) -> results/probe/")
    run = probe_pool(items, results / "probe", ProbeConfig(permutations=DEMO_PERMUTATIONS, shuffle_null=False),
                     emb, results, echo=lambda line: echo(f"    {line}"), step0=dups,
                     step0_source=str(keep) if keep is not None else None, step0_scope=_step0_scope(items, keep))
    check = check_probe(run, out / "truth" / PROBE_TRUTH, chain)
    for line in check.lines:
        echo(line)
    echo(f"  probe and flags {'match' if check.ok else 'DIFFER FROM'} the construction ({time.time() - t0:.1f} s)")
    return check.ok


@dataclass(frozen=True, slots=True)
class Benchmarks:
    """Where ``prepare_benchmarks`` put things."""

    paths: list[Path]
    items: list[DemoItem]
    video_ids: list[str]
    frames: Path
    truth: Path
    n_scenes: int


def prepare_benchmarks(out: str | Path, chain: Sequence[int] = DEFAULT_CHAIN) -> Benchmarks:
    """Clips (``videos/``), the normalized store (``store/``), the 32-frame cache
    (``frames/pool_frames/``), the benchmarks (``items/``) and their ground truth (``truth/``)
    under ``out``; idempotent."""
    out = Path(out)
    scenes = make_scenes(scenes_needed())
    frames_root = out / "frames" / "pool_frames"
    video_ids = normalize_scenes(make_scene_videos(scenes, out / "videos"), out / "store", frames_root)
    items = build_items(scenes)
    paths = write_benchmarks(out / "items", items, video_ids, chain, truth_dir=out / "truth")
    return Benchmarks(paths, items, video_ids, frames_root, out / "truth", len(scenes))


def run_demo(out: str | Path, echo: Echo = print, progress: bool = True,
             chain: tuple[int, ...] = DEFAULT_CHAIN, tiny: bool = True, qa: bool = True,
             sweep_on: bool = True) -> DemoResult:
    """Run everything under ``out``; returns where the results are and whether the funnel matched."""
    t0 = time.time()
    out = Path(out)
    echo("1/9 scenes -> clips -> normalized store -> 32-frame cache; benchmarks with known item kinds")
    bundle = prepare_benchmarks(out, chain)
    frames_root = bundle.frames
    loaded = load_items(bundle.paths)
    if loaded.errors:
        raise RuntimeError(f"demo items failed to load: {loaded.errors[:3]}")
    kind_of = {it.item_id: it.kind for it in bundle.items}
    echo(f"  {bundle.n_scenes} clips of 40 frames at 896x448; {len(loaded.items)} items in {len(bundle.paths)} "
         f"benchmarks; ground truth: {bundle.truth}")
    echo("2/9 step 0: duplicates (sentence embeddings)")
    minilm = _minilm(echo)
    keep = _step0(loaded.items, out / "step0", echo, progress, minilm)
    results = out / "results"
    frames = CacheFrames(frames_root)
    ctx = make_context(loaded.items, results, chain, frames, keep)
    engine = from_options("reference", EngineOptions())
    echo(f"3/9 steps {','.join(map(str, chain))} with the reference engine ({engine.model_name}: "
         "a deterministic rule-based program, not a model)")
    asyncio.run(_screen(ctx, engine, echo, progress, 8))
    prior_ctx = make_context(loaded.items, out / "results_prior", chain, frames, keep)
    echo(f"  + the same chain with {PRIOR_ENGINE} (the reference rules plus a planted letter prior on A, "
         "guesses where they see nothing, and noise: false removals known by construction) -> results_prior/")
    asyncio.run(_prior_run(prior_ctx, echo, progress))
    if tiny:
        echo(f"  + steps {','.join(map(str, TINY_CHAIN))} with a tiny RANDOM-WEIGHT transformer ({TINY_LABEL}, "
             "real hf engine path; its decisions are noise) -> results_tiny_random/")
        asyncio.run(_tiny_run(loaded.items, out, out / "results_tiny_random", keep, echo, progress))
    probe_ok = _probe(loaded.items, results, out, minilm, echo, chain, keep)
    echo("4/9 assemble")
    assembled = assemble(ctx)
    for flag in assembled.flags:
        echo(f"  FLAG: {flag}")
    qa_ok = None
    if qa:
        echo("5/9 QA benchmark: qa run -> serve --engine reference, scored by the scripted judge")
        from benchcheck.demo.qa_demo import QA_FRAMES, qa_dataset, run_qa_demo

        summary = run_qa_demo(out, bundle.items)
        view = View(n_frames=QA_FRAMES, short_side=STORAGE_SHORT)
        kinds = [kind_of[str(d["id"])] for d in qa_dataset(bundle.items)]
        expect = sum(answerable(k, view) for k in kinds) / len(kinds)
        echo(f"  accuracy {summary.get('accuracy')} (predicted {expect:.2f}: {QA_FRAMES} frames at full size show "
             f"every kind), {summary.get('counts', {}).get('errors')} errors, exit {summary['exit_code']}; "
             f"model served {summary.get('model_served')}, judge {summary.get('judge_model')}; "
             f"{summary['output_dir']}")
        # An item error in the demo's own QA run is a defect of the demo (its inputs are known):
        # the run says so at the end and exits non-zero, as `qa run` would.
        qa_ok = summary.get("exit_code") == 0 and not summary.get("counts", {}).get("errors")
    echo("6/9 funnel per kind: observed/predicted items (predicted from the kinds and the chain)")
    step0_kept = None
    if keep is not None:
        from benchcheck.screen.plan import load_keep

        step0_kept = load_keep(keep).kept_ids(loaded.items)
    cols = fn.columns(chain, keep is not None)
    observed = fn.tabulate(fn.observed_fates(ctx, step0_kept), kind_of)
    expected = fn.predicted(loaded.items, kind_of, chain, keep is not None)
    table = fn.render(observed, expected, cols)
    echo(table)
    match = observed == expected
    echo("  funnel matches the construction" if match else "  FUNNEL DIFFERS from the construction (cells with !)")
    record = fn.funnel_record(observed, expected, cols, chain, engine.model_name)
    write_json_atomic(out / "funnel.json", record, indent=1)
    write_text_atomic(out / "funnel.txt", table + "\n")
    sweep = _sweep(bundle, out, echo) if sweep_on else None
    echo("9/9 audit of the removals (permutation null, letter prior, confidence) checked against the ground "
         "truth, then the HTML report (funnel, benchmarks, sweep, QA, audit, provenance with the engines' labels)")
    truth = out / "truth" / "ground_truth.jsonl"
    dups, scope = _step0_removed(loaded.items, keep), _step0_scope(loaded.items, keep)
    checks = [_audit(results, loaded.items, out / "audit", echo, chain, truth, zero_prior,
                     "The reference engine's audit against the ground truth", results / "probe", dups, scope),
              _audit(prior_ctx.results, loaded.items, out / "audit_prior", echo, chain, truth, planted_prior,
                     f"The audit of {PRIOR_ENGINE} (planted letter prior) against the ground truth", step0=dups,
                     step0_scope=scope)]
    side_audits = [out / "audit_prior"]
    if tiny:
        _audit(out / "results_tiny_random", loaded.items, out / "audit_tiny", echo, TINY_CHAIN)
        side_audits.append(out / "audit_tiny")
    audit_match = all(c is not None and c.ok for c in checks)
    side = [prior_ctx.results, *([out / "results_tiny_random"] if tiny else [])]
    report = demo_report(results, out / "items", frames_root, sweep=out / "sweep" if sweep_on else None,
                         qa=out / "qa" / "run" if qa else None, side_results=side, audit=out / "audit",
                         side_audits=[p for p in side_audits if (p / "audit.md").is_file()],
                         step0=keep.parent if keep is not None else None)
    echo("outputs:")
    for name, path in assembled.paths.items():
        echo(f"  {name}: {path}")
    echo(f"  funnel: {out / 'funnel.json'}   ground truth: {out / 'truth' / 'ground_truth.jsonl'}")
    if sweep is not None:
        echo(f"  sweep: {sweep.files['markdown']}")
    echo(f"  report (open in a browser): {report}")
    wall = time.time() - t0
    echo(f"demo done in {wall:.1f} s")
    write_json_atomic(out / "demo_timing.json", {"wall_s": round(wall, 2)})
    sweep_match = None if sweep is None else all(
        (v := sweep.verdicts.get(b)) is not None and v.verdict == want for b, want in expected_verdicts().items())
    return DemoResult(results, match, out / "funnel.json", out / "truth" / "ground_truth.jsonl", wall, sweep_match,
                      audit_match, qa_ok, probe_ok)
