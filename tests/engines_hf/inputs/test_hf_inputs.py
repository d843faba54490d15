"""Rendering, tokenization, image preprocessing and batching of the hf engine."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from hf_helpers import make_jpeg
from hypothesis import given, settings
from hypothesis import strategies as st

from benchcheck.engines.hf.attention.cache import reserved_slots
from benchcheck.engines.hf.engine import HFEngine
from benchcheck.engines.hf.forward.batch import collate, padded_width, position_ids
from benchcheck.engines.hf.forward.packed import Family
from benchcheck.engines.hf.forward.pixels import patchify
from benchcheck.engines.hf.inputs.decode import BadInput, load_image
from benchcheck.engines.hf.inputs.encoder import EncodedPrompt
from benchcheck.engines.hf.inputs.frame_memo import images_key
from benchcheck.engines.hf.schedule.batches import balanced, batch_tokens, plan_batches
from benchcheck.engines.hf.schedule.families import plan_family_batches
from benchcheck.engines.hf.schedule.pipeline import row_slots

PROMPT = "Look.\n\nQuestion: what?\nOptions:\nA. a\nB. b\nAnswer with the option letter only."


def test_chat_rendering_matches_the_vllm_messages(hf_engine: HFEngine) -> None:
    enc = hf_engine.encoder
    text = enc.render(PROMPT, 2, "Answer:")
    assert text == (
        "<|im_start|>user\n"
        "<|vision_start|><|image_pad|><|vision_end|><|vision_start|><|image_pad|><|vision_end|>"
        f"{PROMPT}<|im_end|>\n<|im_start|>assistant\nAnswer:"
    )
    assert enc.render("hi", 0, None, system="Be brief.") == (
        "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    )


def test_spliced_rendering_equals_the_template(hf_engine: HFEngine) -> None:
    enc = hf_engine.encoder
    prompts = [PROMPT, "Question: why?\nOptions:\nA. {x}\nB. %s", "  padded  ", "<think>tag</think> q", "x" * 500]
    layouts = [(0, "Answer:", None), (3, "Answer:", None), (1, None, "Be brief."), (0, None, None)]
    for n_images, prefix, system in layouts:
        for p in prompts:
            assert enc.render(p, n_images, prefix, system) == enc._render(p, n_images, prefix, system), (p, n_images)
    assert all(enc._layouts.values())  # every layout spliced (the tiny model's template is Qwen's)


def test_token_sequence_user_images_then_text_then_answer_continued(hf_engine: HFEngine) -> None:
    tok = hf_engine.tokenizer
    e = hf_engine.encoder.encode(PROMPT, (make_jpeg(1),), "Answer:")
    ids = e.input_ids.tolist()

    def t(s: str) -> list[int]:
        return list(tok(s, add_special_tokens=False)["input_ids"])

    image = hf_engine.model.config.image_token_id
    expected = (
        t("<|im_start|>user\n<|vision_start|>")
        + [image] * 112
        + t("<|vision_end|>" + PROMPT + "<|im_end|>\n<|im_start|>assistant\nAnswer:")
    )
    assert ids == expected
    assert e.mm_token_type_ids.tolist() == [1 if i == image else 0 for i in ids]
    assert ids[-len(t("Answer:")) :] == t("Answer:")  # no generation prompt after the prefill


@pytest.mark.parametrize(("w", "h"), [(448, 256), (448, 252), (256, 448)])
def test_a_448_frame_costs_112_tokens(hf_engine: HFEngine, w: int, h: int) -> None:
    frames, grid = hf_engine.encoder.frames([make_jpeg(2, w, h)])
    assert hf_engine.encoder.tokens_per_image(grid).tolist() == [112]
    assert frames[0].shape[0] % 32 == 0 and frames[0].shape[1] % 32 == 0


def test_pixel_values_equal_the_image_processor_output(hf_engine: HFEngine) -> None:
    enc = hf_engine.encoder
    images = [make_jpeg(s, w, h) for s, (w, h) in enumerate([(448, 256), (448, 252), (300, 200), (17, 900)])]
    ref = enc.image_processor(images=[load_image(b, 0) for b in images], return_tensors=None)
    frames, grid = enc.frames(images)
    mine = patchify(frames, hf_engine.pixels).numpy()
    assert grid.tolist() == np.asarray(ref["image_grid_thw"]).tolist()
    assert mine.dtype == np.float32
    assert np.array_equal(mine, ref["pixel_values"])  # bit for bit


def test_bad_inputs_raise_one_line_errors(hf_engine: HFEngine, tmp_path: object) -> None:
    with pytest.raises(BadInput, match=r"image 1 \(9 bytes\): not a readable image"):
        hf_engine.encoder.encode("q", (make_jpeg(1), b"not a jpg"), "Answer:")
    with pytest.raises(BadInput, match="placeholder"):
        hf_engine.encoder.encode("look <|image_pad|> here", (), "Answer:")


def test_positions_ignore_left_padding(hf_engine: HFEngine) -> None:
    enc = hf_engine.encoder
    a = enc.encode("short", (make_jpeg(3),), "Answer:")
    b = enc.encode("a much longer prompt " * 8, (make_jpeg(4),), "Answer:")
    batch = collate([a, b], hf_engine.pad_id, hf_engine.pixels, torch.float32)
    alone = collate([a], hf_engine.pad_id, hf_engine.pixels, torch.float32)
    pos, pos_alone = position_ids(batch), position_ids(alone)
    pad = batch.input_ids.shape[1] - a.n_tokens
    assert torch.equal(pos[:, 0, pad:], pos_alone[:, 0])
    assert int(batch.attention_mask[0, :pad].sum()) == 0
    # After the image, M-RoPE positions continue from the image's largest position + 1.
    assert int(pos_alone[1:, 0].max()) < a.n_tokens


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.integers(1, 500), max_size=60),
    st.integers(1, 16),
    st.integers(1, 2000),
)
def test_plan_batches_covers_each_request_once_within_bounds(lengths: list[int], bs: int, tokens: int) -> None:
    batches = plan_batches(lengths, bs, tokens)
    flat = sorted(i for b in batches for i in b)
    assert flat == list(range(len(lengths)))
    for b in batches:
        assert len(b) <= bs
        assert len(b) == 1 or max(lengths[i] for i in b) * len(b) <= tokens


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 3000), st.integers(1, 3000)), max_size=40), st.integers(1, 16),
       st.integers(1, 20_000))
def test_plan_batches_counts_a_generation_row_by_the_batch_maxima(requests: list[tuple[int, int]], bs: int,
                                                                 budget: int) -> None:
    """A generation batch's rows each reserve its longest prompt plus its most new tokens
    (``row_slots``), whichever rows the two come from: within the budget, each request once."""
    lengths, new = [p for p, _ in requests], [n for _, n in requests]
    batches = plan_batches(lengths, bs, budget, new=new, row=row_slots)
    assert sorted(i for b in batches for i in b) == list(range(len(requests)))
    for b in batches:
        longest, most = max(lengths[i] for i in b), max(new[i] for i in b)
        reserved = reserved_slots(padded_width(longest) + most - 1) if most > 1 else longest
        assert len(b) <= bs and (len(b) == 1 or reserved * len(b) <= budget)
        assert batch_tokens(lengths, b, new, row_slots) == reserved * len(b)


@given(st.lists(st.integers(1, 300), min_size=1, max_size=200), st.integers(1, 64), st.integers(1, 4000))
def test_balanced_batches_are_as_many_as_greedy_and_as_even(lengths: list[int], bs: int, tokens: int) -> None:
    """``balanced``: the same number of batches as greedy planning at the cap, each request once,
    within the bounds, and no batch larger than greedy's largest (a remainder no longer tiny)."""
    greedy = plan_batches(lengths, bs, tokens)
    even = balanced(lambda cap: plan_batches(lengths, cap, tokens), bs)
    assert len(even) == len(greedy)
    assert sorted(i for b in even for i in b) == list(range(len(lengths)))
    assert max(len(b) for b in even) <= max(len(b) for b in greedy)
    for b in even:
        assert len(b) <= bs and (len(b) == 1 or max(lengths[i] for i in b) * len(b) <= tokens)


@given(st.lists(st.tuples(st.integers(1, 16), st.integers(2, 40)), min_size=1, max_size=60), st.integers(1, 32),
       st.integers(40, 3000))
def test_balanced_family_batches_keep_the_cap(fams: list[tuple[int, int]], cap: int, tokens: int) -> None:
    """Over families (a family larger than the cap goes alone): as many batches as greedy, every
    family once, and a batch above the cap only as a single family."""
    prompts: list[EncodedPrompt] = []
    families: list[Family] = []
    for members, length in fams:
        ids = np.arange(length, dtype=np.int64)
        families.append(Family(tuple(range(len(prompts), len(prompts) + members)), length - 1))
        prompts += [EncodedPrompt(np.r_[ids, 9000 + m], np.zeros(length + 1, np.int64), (), None, None)
                    for m in range(members)]
    greedy = plan_family_batches(prompts, families, cap, tokens)
    even = balanced(lambda c: plan_family_batches(prompts, families, c, tokens), cap)
    assert len(even) == len(greedy)
    assert sorted(f.members for b in even for f in b) == sorted(f.members for f in families)
    for b in even:
        assert sum(len(f.members) for f in b) <= cap or len(b) == 1


def test_balanced_never_raises_the_cap_for_a_large_family() -> None:
    """A family of 8 among 6 lone prompts under a cap of 4: greedy's [4, 2] + [8] stays within the
    cap ([3, 3] + [8]), never [5, 1] + [8]."""
    prompts = [EncodedPrompt(np.r_[np.arange(30), 900 + m], np.zeros(31, np.int64), (), None, None) for m in range(8)]
    prompts += [EncodedPrompt(np.arange(100 * k, 100 * k + 5), np.zeros(5, np.int64), (), None, None)
                for k in range(1, 7)]
    families = [Family(tuple(range(8)), 30), *(Family((8 + k,), 4) for k in range(6))]
    even = balanced(lambda c: plan_family_batches(prompts, families, c, 1 << 20), 4)
    assert sorted(sum(len(f.members) for f in b) for b in even) == [3, 3, 8]


def test_balanced_leaves_no_small_remainder() -> None:
    """270 one-frame-like requests under a cap of 256: two batches of 135, not 256 + 14."""
    lengths = [254] * 270
    assert [len(b) for b in plan_batches(lengths, 256, 1 << 20)] == [256, 14]
    assert [len(b) for b in balanced(lambda cap: plan_batches(lengths, cap, 1 << 20), 256)] == [135, 135]


def test_images_key_names_the_images_in_order(tmp_path: Path) -> None:
    a, b = b"\xff\xd8 one jpeg", b"\xff\xd8 another"
    assert images_key([a, b]) == images_key([bytes(a), bytes(b)])
    assert images_key([a, b]) != images_key([b, a])
    assert images_key([a]) != images_key([a, a])
    assert images_key([tmp_path / "f.jpg"]) == images_key([tmp_path / "f.jpg"])
    assert images_key([tmp_path / "f.jpg"]) != images_key([tmp_path / "g.jpg"])
    assert images_key([]) != images_key([a]) and len(images_key([a])) == 16
