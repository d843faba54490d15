"""The probe and the label flags over one pool and (optionally) its screening results: what
``benchcheck probe``, the audit and the demo call."""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from benchcheck.items import Item, fingerprints
from benchcheck.probe.evidence import FLAG_STEPS, Pick, step_picks
from benchcheck.probe.flags import FLAG_AGREE, FLAG_MARGIN, LabelFlag, label_flags, sources_needed
from benchcheck.probe.outputs import write_probe
from benchcheck.probe.run import ProbeConfig, ProbeResult, TextEmbedder, run_probe, step0_kept
from benchcheck.step0.probe_stamp import left_out

BLIND_STEP = 1


@dataclass(slots=True)
class ProbeRun:
    result: ProbeResult
    flags: list[LabelFlag] | None = None  # None: fewer than two sources, no flag possible
    flag_sources: list[str] = field(default_factory=list)
    paths: list[Path] = field(default_factory=list)


def probe_pool(items: Sequence[Item], out: str | Path, cfg: ProbeConfig, emb: TextEmbedder | None = None,
               results: str | Path | None = None, flag_margin: float = FLAG_MARGIN, flag_agree: int = FLAG_AGREE,
               echo: Callable[[str], None] | None = None, step0: Collection[str] | None = None,
               step0_source: str | None = None, step0_scope: Collection[str] | None = None) -> ProbeRun:
    """Probe every benchmark; with ``results``, the blind gain over step 1 and the label flags
    from steps 3, 5, 6 and the probe; write everything under ``out``. With ``step0`` (the ids step 0
    removed, ``report.source.read_step0``), its duplicates are neither probed nor flagged, and each
    benchmark counts them apart; the outputs record which items were left out and the
    ``--step0`` they came from (``step0_source``), so a reader can tell another step 0's probe. A
    benchmark outside ``step0_scope`` (the benchmarks the dedup run read, ``Step0.deduplicated``;
    None: every one) is probed whole and said to be not deduplicated."""
    every = [it for it in items if it.format == "mc"]
    mc = step0_kept(every, step0 or ())
    ids = {it.item_id for it in mc}
    picks = step_picks(results, ids, (BLIND_STEP, *FLAG_STEPS), fingerprints(mc)) if results is not None else {}
    res = run_probe(every, cfg, emb, picks.get(BLIND_STEP), echo, step0, step0_scope)
    sources: list[dict[str, Pick]] = [picks[s] for s in FLAG_STEPS if s in picks]
    names = [f"step {s}" for s in FLAG_STEPS if s in picks]
    if res.items:
        sources.append({i.item_id: i.as_pick for i in res.items})
        names.append("probe")
    flags = None
    if len(sources) >= sources_needed(flag_agree):
        golds = {it.item_id: (it.bench, it.answer) for it in mc}
        flags = label_flags(golds, sources, flag_margin, flag_agree)
    run = ProbeRun(res, flags, names)
    run.paths = write_probe(res, out, flags, names, left_out(every, step0),
                            step0_source if step0 is not None else None)
    return run
