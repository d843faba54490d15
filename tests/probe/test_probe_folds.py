"""Folds grouped by video: no video's items in two folds."""

from __future__ import annotations

from collections import defaultdict

from benchcheck.probe.folds import group_folds
from benchcheck.probe.run import ProbeConfig, run_probe
from benchcheck.probe.synth import pattern_items


def test_no_group_in_two_folds_and_folds_even() -> None:
    groups = [f"v{i % 37}" for i in range(400)] + [f"big{i % 3}" for i in range(60)]
    folds = group_folds(groups, 5, seed=1)
    seen: dict[str, set[int]] = defaultdict(set)
    for g, f in zip(groups, folds, strict=True):
        seen[g].add(int(f))
    assert all(len(s) == 1 for s in seen.values())
    sizes = [int((folds == f).sum()) for f in range(5)]
    assert max(sizes) - min(sizes) <= 20  # the largest group


def test_fewer_groups_than_folds() -> None:
    folds = group_folds(["a", "a", "b", "b", "b"], 5)
    assert set(folds.tolist()) == {0, 1}


def test_probe_items_keep_their_video_in_one_fold() -> None:
    items = pattern_items("longest", 60, seed=0, per_video=6)
    res = run_probe(items, ProbeConfig(permutations=0, ibp=False))
    fold_of: dict[str, set[int]] = defaultdict(set)
    for it in res.items:
        fold_of[it.video].add(it.fold)
    assert len(fold_of) == 10 and all(len(s) == 1 for s in fold_of.values())


def test_items_without_video_are_their_own_group() -> None:
    items = [it.__class__(it.item_id, it.bench, it.question, it.options, it.answer, video_id=None)
             for it in pattern_items("none", 30, seed=0)]
    res = run_probe(items, ProbeConfig(permutations=0, ibp=False))
    assert res.benches[0].videos == 30 and res.benches[0].folds == 5
