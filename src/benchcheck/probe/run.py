"""The probe over a pool: per benchmark, features -> k folds by video -> out-of-fold
probabilities -> permutation tests -> Iterative Bias Pruning; beside it, the zero-shot step-1
model's accuracy on the same items (the blind gain).

Benchmarks are worked one at a time and their features built in chunks of items, so memory
grows with the largest benchmark's feature matrix, not with the pool or the embeddings.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from benchcheck.dedup.units import natural_key
from benchcheck.items import Item
from benchcheck.probe.embeddings import EmbeddingCache, EmbedStats, Encode, embed
from benchcheck.probe.evidence import Pick
from benchcheck.probe.features import (
    HAND_NAMES,
    Projection,
    emb_names,
    embedding_features,
    hand_features,
)
from benchcheck.probe.folds import group_folds, n_folds
from benchcheck.probe.ibp import IbpResult, prune
from benchcheck.probe.model import Design, accuracy, chance, oof_probs
from benchcheck.probe.permutation import PermutationTest, permutation_test
from benchcheck.step0.scope import NOT_DEDUPLICATED

CHUNK_ITEMS = 20_000
MIN_ITEMS = 20
MIN_GROUPS = 2
SIGNIFICANCE = 0.05


@dataclass(frozen=True, slots=True)
class ProbeConfig:
    folds: int = 5
    permutations: int = 99
    shuffle_null: bool = True
    seed: int = 0
    min_items: int = MIN_ITEMS
    proj_dims: int = 16
    ibp: bool = True
    ibp_step: float = 0.05
    c: float = 1.0


@dataclass(frozen=True, slots=True)
class ItemProbe:
    item_id: str
    bench: str
    video: str
    gold: int
    fold: int
    probs: tuple[float, ...]
    ibp_round: int | None  # the IBP round that pruned it (None: never pruned)

    @property
    def pick(self) -> int:
        return int(np.argmax(self.probs))

    @property
    def p_gold(self) -> float:
        return self.probs[self.gold]

    @property
    def as_pick(self) -> Pick:
        s = sorted(self.probs, reverse=True)
        margin = float(np.log(max(s[0], 1e-12)) - np.log(max(s[1], 1e-12))) if len(s) > 1 else 0.0
        return Pick("probe", self.pick, margin)


@dataclass(slots=True)
class BenchProbe:
    bench: str
    items: int
    videos: int
    folds: int = 0
    accuracy: float | None = None
    chance: float | None = None
    uniform: PermutationTest | None = None
    shuffle: PermutationTest | None = None
    blind_items: int = 0
    blind_accuracy: float | None = None  # the zero-shot step-1 model on the same items
    probe_on_blind: float | None = None  # the probe's accuracy on those items
    ibp: IbpResult | None = None
    skipped: str | None = None  # why the probe did not run on this benchmark
    step0_removed: int | None = None  # its duplicates step 0 removed, left out (None: no step 0 given)
    # step 0 given, but its dedup run never read this benchmark: nothing was left out because nothing
    # was looked at, which a count of zero would hide (``step0.scope``)
    not_deduplicated: bool = False

    @property
    def blind_gain(self) -> float | None:
        if self.blind_accuracy is None or self.probe_on_blind is None:
            return None
        return self.probe_on_blind - self.blind_accuracy

    @property
    def learnable(self) -> bool:
        return self.uniform is not None and self.uniform.p_value <= SIGNIFICANCE

    @property
    def tested(self) -> bool:
        """Whether the uniform-gold null could call this benchmark learnable: its smallest p-value,
        1/(1 + rounds), must reach the level; with fewer rounds "not learnable" says nothing."""
        return self.uniform is not None and min_p_value(self.uniform.rounds) <= SIGNIFICANCE


def min_p_value(rounds: int) -> float:
    return 1.0 / (1 + rounds)


def rounds_needed() -> int:
    """The fewest permutation rounds whose smallest p-value reaches the level."""
    return next(r for r in range(1, 1_000_000) if min_p_value(r) <= SIGNIFICANCE)


@dataclass(slots=True)
class ProbeResult:
    benches: list[BenchProbe] = field(default_factory=list)
    items: list[ItemProbe] = field(default_factory=list)
    features: tuple[str, ...] = ()
    model: str = "none"
    embed: EmbedStats = field(default_factory=lambda: EmbedStats(0, 0))

    @property
    def probed(self) -> list[BenchProbe]:
        return [b for b in self.benches if b.skipped is None]


@dataclass(frozen=True, slots=True)
class TextEmbedder:
    """What the probe needs of an embedding model: a cache and the encoder behind it."""

    name: str
    cache: EmbeddingCache
    encode: Encode


def video_of(it: Item) -> str:
    return it.video_id or f"item:{it.item_id}"


def design_of(items: Sequence[Item], emb: TextEmbedder | None, proj: Projection | None,
              stats: list[EmbedStats]) -> Design:
    """Features of every option of ``items`` (one benchmark), built in chunks of items."""
    kmax = max(len(it.options) for it in items)
    blocks: list[NDArray[np.float32]] = []
    masks: list[NDArray[np.bool_]] = []
    for start in range(0, len(items), CHUNK_ITEMS):
        chunk = items[start:start + CHUNK_ITEMS]
        vecs: NDArray[np.float32] | None = None
        if emb is not None:
            texts = [t for it in chunk for t in (it.question, *it.options)]
            vecs, st = embed(texts, emb.cache, emb.encode)
            stats.append(st)
        rows = []
        at = 0
        for it in chunk:
            f = hand_features(it.question, it.options)
            if vecs is not None:
                q, opts = vecs[at], vecs[at + 1:at + 1 + len(it.options)]
                f = np.concatenate([f, embedding_features(q, opts, proj)], axis=1)
            at += 1 + len(it.options)
            rows.append(f)
        x = np.zeros((len(chunk), kmax, rows[0].shape[1]), dtype=np.float32)
        m = np.zeros((len(chunk), kmax), dtype=bool)
        for i, f in enumerate(rows):
            x[i, :len(f)] = f
            m[i, :len(f)] = True
        blocks.append(x)
        masks.append(m)
    return Design(np.concatenate(blocks), np.concatenate(masks))


def probe_bench(bench: str, items: Sequence[Item], design: Design, cfg: ProbeConfig,
                blind: Mapping[str, Pick] | None = None) -> tuple[BenchProbe, list[ItemProbe]]:
    """The whole probe on one benchmark's items (pure once the design is built)."""
    groups = [video_of(it) for it in items]
    res = BenchProbe(bench, len(items), len(set(groups)))
    gold = np.array([it.answer for it in items], dtype=np.int64)
    folds = group_folds(groups, cfg.folds, cfg.seed)
    res.folds = n_folds(folds)
    probs = oof_probs(design, gold, folds, cfg.c, cfg.seed)
    res.accuracy = accuracy(probs, gold)
    res.chance = chance(design)
    if cfg.permutations:
        res.uniform = permutation_test(design, gold, folds, res.accuracy, cfg.permutations, "uniform", cfg.seed, cfg.c)
        if cfg.shuffle_null:
            res.shuffle = permutation_test(design, gold, folds, res.accuracy, cfg.permutations, "shuffle", cfg.seed,
                                           cfg.c)
    if blind:
        on = [i for i, it in enumerate(items) if it.item_id in blind]
        if on:
            res.blind_items = len(on)
            res.blind_accuracy = float(np.mean([blind[items[i].item_id].option == gold[i] for i in on]))
            res.probe_on_blind = float(np.mean(probs[on].argmax(axis=1) == gold[on]))
    if cfg.ibp:
        res.ibp = prune(design, gold, groups, cfg.folds, cfg.seed, cfg.ibp_step, min_items=max(cfg.min_items // 2, 4),
                        first=probs)
    pruned = res.ibp.removed_round if res.ibp is not None else {}
    out = [ItemProbe(it.item_id, bench, groups[i], int(gold[i]), int(folds[i]),
                     tuple(round(float(p), 6) for p in probs[i, :len(it.options)]), pruned.get(i))
           for i, it in enumerate(items)]
    return res, out


def step0_kept(items: Sequence[Item], step0: Collection[str]) -> list[Item]:
    """The items step 0 kept: a duplicate it removed (``step0``: their ids, as ``read_step0`` gives
    them) is in no fold, no null and no flag, as it is in no step of the chain (``screen --keep``),
    and the report counts it removed at step 0."""
    return [it for it in items if it.item_id not in step0]


def skip_reason(items: Sequence[Item], cfg: ProbeConfig) -> str | None:
    if len(items) < cfg.min_items:
        return f"{len(items)} items, fewer than --min-items {cfg.min_items}"
    if len({video_of(it) for it in items}) < MIN_GROUPS:
        return "every item shows one video: no fold can leave it out"
    return None


def run_probe(items: Sequence[Item], cfg: ProbeConfig, emb: TextEmbedder | None = None,
              blind: Mapping[str, Pick] | None = None,
              echo: Callable[[str], None] | None = None, step0: Collection[str] | None = None,
              step0_scope: Collection[str] | None = None) -> ProbeResult:
    """Probe every benchmark of ``items`` (multiple-choice items only), one at a time. With
    ``step0`` (the ids step 0 removed), a benchmark is probed on the items step 0 kept, and counts
    the others apart (``step0_removed``); one outside ``step0_scope`` (the benchmarks its dedup run
    read, ``Step0.deduplicated``; None: every one) is probed whole and marked ``not_deduplicated``.

    A benchmark's items are taken in natural item-id order, not file order: the null's redrawn
    golds, IBP's ties and the fits follow the item order, so a file re-exported in another row
    order would otherwise get other p-values (and perhaps another ``learnable``)."""
    by_bench: dict[str, list[Item]] = {}
    for it in items:
        if it.format == "mc" and len(it.options) >= 2:
            by_bench.setdefault(it.bench, []).append(it)
    kept = {b: step0_kept(its, step0 or ()) for b, its in by_bench.items()}
    at0 = {b: len(its) - len(kept[b]) for b, its in by_bench.items()
           if step0_scope is None or b in step0_scope} if step0 is not None else {}
    unread = {b for b in by_bench if b not in at0} if step0 is not None else set()
    by_bench = {b: sorted(its, key=lambda it: natural_key(it.item_id)) for b, its in kept.items()}
    proj = None
    if emb is not None and cfg.proj_dims:
        dim = emb.cache.dim or int(np.asarray(emb.encode(["width"])).shape[1])  # the model's width, once
        proj = Projection.make(dim, cfg.proj_dims, cfg.seed)
    out = ProbeResult(model=emb.name if emb is not None else "none")
    stats: list[EmbedStats] = []
    for bench, its in by_bench.items():
        why = skip_reason(its, cfg)
        if why is not None:
            out.benches.append(BenchProbe(bench, len(its), len({video_of(it) for it in its}), skipped=why,
                                          step0_removed=at0.get(bench), not_deduplicated=bench in unread))
            if echo is not None:
                echo(line(out.benches[-1]))
            continue
        design = design_of(its, emb, proj, stats)
        b, rows = probe_bench(bench, its, design, cfg, blind)
        b.step0_removed = at0.get(bench)
        b.not_deduplicated = bench in unread
        out.benches.append(b)
        out.items += rows
        if echo is not None:
            echo(line(b))
    out.features = HAND_NAMES + (emb_names(proj) if emb is not None else ())
    out.embed = EmbedStats(sum(s.encoded for s in stats), sum(s.reused for s in stats))
    return out


def line(b: BenchProbe) -> str:
    """One printed line per benchmark."""
    at0 = (f" ({NOT_DEDUPLICATED})" if b.not_deduplicated
           else f" ({b.step0_removed} removed at step 0 left out)" if b.step0_removed else "")
    if b.skipped is not None:
        return f"{b.bench}: skipped ({b.skipped}){at0}"
    p = "" if b.uniform is None else f", p={b.uniform.p_value:.3g}"
    ps = "" if b.shuffle is None else f" (positions kept: p={b.shuffle.p_value:.3g})"
    gain = "" if b.blind_gain is None else f", blind gain over step 1 {b.blind_gain:+.2f} on {b.blind_items} items"
    ibp = "" if b.ibp is None else f", IBP keeps {b.ibp.remaining}/{b.items}"
    return (f"{b.bench}: probe accuracy {b.accuracy:.2f} vs chance {b.chance:.2f} over {b.items} items{at0}, "
            f"{b.videos} videos, {b.folds} folds{p}{ps}{gain}{ibp}")
