"""The protocol functions reproduce the reference library on random inputs."""

from __future__ import annotations

import math
import types

import pytest
from foundation_reference import reference_or_skip
from hypothesis import given, settings
from hypothesis import strategies as st

from benchcheck import protocol as P


@pytest.fixture(scope="module")
def ref() -> types.SimpleNamespace:
    """The live seed reference; the tests that use it skip on a bare clone (golden vectors cover it)."""
    return reference_or_skip()

letters = st.sampled_from([*list(P.LETTERS), "a", "z"])
token = st.one_of(
    st.builds(lambda pre, L, post: pre + L + post, st.sampled_from(["", " ", "(", "[", " (", "  "]), letters,
              st.sampled_from(["", ")", "]", ".", ":", " ", ".\n", "))"])),
    st.text(max_size=4),
)
entry = st.fixed_dictionaries({"token": token, "logprob": st.floats(-30, 0, allow_nan=False)})
opt_text = st.text(alphabet=st.characters(blacklist_categories=["Cs"]), max_size=12)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=40), st.integers(1, 26), st.integers(1, 6), st.integers(0, 10**6))
def test_permutations_match_reference(ref: types.SimpleNamespace, item_id: str, k: int, n_perm: int, seed: int) -> None:
    assert P.permutations_for(item_id, k, n_perm, seed) == ref.permutations_for(item_id, k, n_perm, seed)


def test_permutation_default_seed_is_42(ref: types.SimpleNamespace) -> None:
    assert P.permutations_for("MVBench_17", 4) == ref.permutations_for("MVBench_17", 4)
    assert all(sorted(p) == [0, 1, 2, 3] for p in P.permutations_for("x", 4))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(
    st.builds(lambda L, sep, t: f"{L}{sep}{t}", letters, st.sampled_from([". ", ") ", ": ", "."]), opt_text),
    opt_text), max_size=8))
def test_strip_sequential_prefix_matches_reference(ref: types.SimpleNamespace, opts: list[str]) -> None:
    assert P.strip_sequential_prefix(opts) == tuple(ref.strip_sequential_prefix(opts))


@settings(max_examples=50, deadline=None)
@given(st.integers(1, 8))
def test_strip_sequential_prefix_on_sequences(ref: types.SimpleNamespace, n: int) -> None:
    opts = [f"({chr(65 + i)}) option {i}" for i in range(n)]
    assert P.strip_sequential_prefix(opts) == ([f"option {i}" for i in range(n)], True)
    assert P.strip_sequential_prefix(opts) == tuple(ref.strip_sequential_prefix(opts))


@settings(max_examples=500, deadline=None)
@given(st.lists(entry, max_size=20), st.integers(1, 26))
def test_letter_logprobs_match_reference(ref: types.SimpleNamespace, top: list[dict[str, object]], k: int) -> None:
    ours = P.letter_logprobs(top, k)
    theirs = ref.letter_logprobs(top, k)
    assert ours[0] == theirs[0]
    assert ours[1] == theirs[1]
    assert ours[2] == theirs[2]


def test_letter_variants_merge_by_logsumexp() -> None:
    top = [{"token": "A", "logprob": math.log(0.3)}, {"token": " A", "logprob": math.log(0.2)},
           {"token": "(B", "logprob": math.log(0.1)}, {"token": "hello", "logprob": -0.1}]
    lp, missing, variants = P.letter_logprobs(top, 3)
    assert math.isclose(lp[0], math.log(0.5))
    assert math.isclose(lp[1], math.log(0.1))
    assert lp[2] == P.LP_FLOOR and missing == ["C"]
    assert variants == {"A": ["A", " A"], "B": ["(B"]}


@settings(max_examples=300, deadline=None)
@given(st.lists(st.floats(-20, 0, allow_nan=False), min_size=1, max_size=26), st.data())
def test_margin_and_argmax_match_reference(ref: types.SimpleNamespace, lp: list[float], data: st.DataObject) -> None:
    pos = data.draw(st.integers(0, len(lp) - 1))
    assert P.margin_of(lp, pos) == ref.margin_of(lp, pos)
    assert P.argmax_pos(lp) == ref.argmax_pos(lp)


def test_argmax_takes_first_maximum() -> None:
    assert P.argmax_pos([-1.0, -0.5, -0.5]) == 1


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=30), st.lists(opt_text, max_size=5))
def test_item_text_and_render_match_reference(ref: types.SimpleNamespace, q: str, opts: list[str]) -> None:
    assert P.item_text(q, opts) == ref.item_text(q, opts)
    assert P.render_options(opts) == ref.render_options(opts)


def test_prompts_follow_spec() -> None:
    assert P.build_prompt("Intro.", "Q?", ["x", "y"]) == (
        "Intro.\n\nQuestion: Q?\nOptions:\nA. x\nB. y\nAnswer with the option letter only.")
    assert P.build_prompt_options_only("Intro.", ["x", "y"]) == (
        "Intro.\n\nOptions:\nA. x\nB. y\nAnswer with the option letter only.")
    assert P.build_prompt("I", "{q} {opts}", ["{intro}"]).count("{") == 3  # braces in text are kept


def test_single_forward_decision() -> None:
    lp = [math.log(0.7), math.log(0.1), math.log(0.1), math.log(0.1)]
    d = P.decide_single(lp, 0)
    assert d.correct and d.removed and d.pick == 0
    close = [math.log(0.3), math.log(0.25), math.log(0.25), math.log(0.2)]
    assert P.decide_single(close, 0).correct and not P.decide_single(close, 0).removed
    assert not P.decide_single(lp, 1).correct


def test_step1_needs_three_hits_and_mean_margin() -> None:
    strong = [math.log(0.9), math.log(0.05), math.log(0.03), math.log(0.02)]
    weak_wrong = [math.log(0.2), math.log(0.5), math.log(0.2), math.log(0.1)]
    assert P.decide_permutations([strong] * 3 + [weak_wrong], [0, 0, 0, 0]).removed
    d = P.decide_permutations([strong] * 2 + [weak_wrong] * 2, [0, 0, 0, 0])
    assert d.hits == 2 and not d.removed
    barely = [math.log(0.3), math.log(0.25), math.log(0.25), math.log(0.2)]
    d = P.decide_permutations([barely] * 4, [0, 0, 0, 0])
    assert d.hits == 4 and d.mean_margin < P.LOG2 and not d.removed


def test_gold_position_follows_permutation() -> None:
    perm = [2, 0, 3, 1]  # position j shows original option perm[j]
    assert P.gold_position(perm, 3) == 2
