"""Label-error flags find planted wrong golds, on simulated sources and on real result rows."""

from __future__ import annotations

from pathlib import Path

import pytest
from probe_rows import wrong_gold_world

from benchcheck.probe.evidence import Pick
from benchcheck.probe.flags import check_flags, label_flags
from benchcheck.probe.pipeline import probe_pool
from benchcheck.probe.run import ProbeConfig
from benchcheck.probe.synth import flag_sources


def test_flags_need_net_agreement_against_the_gold() -> None:
    golds = {"a": ("B", 0), "b": ("B", 0), "c": ("B", 0), "d": ("B", 0), "e": ("B", 0)}
    s1 = {k: Pick("s1", 2, 2.0) for k in golds}
    s2 = {"a": Pick("s2", 2, 1.0), "b": Pick("s2", 3, 3.0), "c": Pick("s2", 2, 1.5), "d": Pick("s2", 2, 0.5),
          "e": Pick("s2", 2, 1.2)}
    s3 = {"c": Pick("s3", 0, 2.5), "d": Pick("s3", 0, 2.5), "e": Pick("s3", 0, 0.2)}
    s4 = {"c": Pick("s4", 0, 2.5), "e": Pick("s4", 2, 3.0)}
    flags = label_flags(golds, [s1, s2, s3, s4], margin=0.7)
    # a: two agree; b: no agreement; c: two for C, two sure of the gold; d: s2 below the margin and s3
    # sure of the gold; e: three for C, the gold's pick below the margin
    assert [f.item_id for f in flags] == ["e", "a"]
    assert flags[0].agree == 3 and flags[0].against == 0 and flags[1].option == 2
    assert "s1: C 2.00" in flags[1].evidence_text()
    one_against = label_flags({"x": ("B", 1)}, [{"x": Pick(s, 3, 2.0)} for s in ("s1", "s2", "s3")]
                              + [{"x": Pick("probe", 1, 1.5)}])
    assert len(one_against) == 1 and one_against[0].against == 1


def test_flags_precision_and_recall_on_a_planted_world() -> None:
    w = flag_sources(2000, seed=0)
    c = check_flags(label_flags(w.golds, w.sources), w.wrong)
    assert c.planted > 60 and c.recall is not None and c.recall > 0.5
    assert c.precision is not None and c.precision > 0.8


def test_flags_from_recorded_rows(tmp_path: Path) -> None:
    """Steps 3, 5, 6 rows (through the screening's row builder and store) on items of which five
    carry a wrong gold: the sources see the true answer, so the five are flagged with evidence."""
    res = tmp_path / "results"
    items, wrong = wrong_gold_world(res)
    run = probe_pool(items, tmp_path / "probe", ProbeConfig(permutations=0, ibp=False), None, res)
    assert run.flags is not None and run.flag_sources == ["step 3", "step 5", "step 6", "probe"]
    assert {f.item_id for f in run.flags} == wrong
    assert all(f.agree >= 3 for f in run.flags)
    b = run.result.benches[0]
    assert b.blind_items == 40 and b.blind_accuracy is not None and b.blind_gain is not None
    text = (tmp_path / "probe" / "label_flags.csv").read_text()
    assert all(i in text for i in wrong) and "step 3:" in text


@pytest.mark.parametrize("seed", [1, 2])
def test_no_flags_without_wrong_golds(seed: int) -> None:
    w = flag_sources(500, seed=seed, wrong_share=0.0)
    flags = label_flags(w.golds, w.sources)
    assert len(flags) <= 5  # false flags: two guessing sources agreeing by chance, rare
