"""Conditions as RunSpecs, and the cap / NA / capped / reuse rules on generated videos."""

from __future__ import annotations

from pathlib import Path

import pytest
from sweep_helpers import item

from benchcheck.items import Item
from benchcheck.sweep.conditions import CONDITIONS, LADDERS, condition_specs, parse_conditions
from benchcheck.sweep.plan import MetaCache, decide
from benchcheck.video.meta import read_meta
from benchcheck.video.plans import n_max, plan_frames, tokens_per_frame


def _item(vid: str | None) -> Item:
    d = item("B", 0, vid)
    return Item(d["item_id"], d["bench"], d["question"], tuple(d["options"]), d["answer"], d["video_id"])


def test_thirteen_conditions_are_generate_specs_with_the_sweep_settings() -> None:
    specs = condition_specs()
    assert list(specs) == list(CONDITIONS) and len(specs) == 13
    for s in specs.values():
        assert s.kind == "generate" and s.gen.temperature == 0 and s.gen.max_tokens == 128
        assert s.gen.assistant_prefix is None and s.gen.parser == "mc-text-v1"
    assert len({s.config_hash for s in specs.values()}) == 13
    assert specs["v_blind"].frames.plan == "none" and specs["v_blind"].prompt.input == "blind"
    assert specs["v_fps2_s224"].frames.fps == 2.0 and specs["v_fps2_s224"].frames.token_budget == 58000
    assert specs["v_32_s336"].frames.size_px == 336 and specs["v_32"].frames.size_mode == "storage"


def test_a_new_ladder_is_data() -> None:
    specs = condition_specs(["v_64_s224", "v_fps4_s224"])
    assert specs["v_64_s224"].frames.n_frames == 64 and specs["v_fps4_s224"].frames.fps == 4.0
    assert parse_conditions("frame_rate") == list(LADDERS["frame_rate"])
    assert parse_conditions("v_32_s448,v_32") == ["v_32", "v_32_s448"]  # run order: the reuse source first
    with pytest.raises(ValueError, match="--conds"):
        parse_conditions("v_bogus")
    # a mistyped ladder name was answered with frame plans only (try v32, mid, ...), never the ladders
    with pytest.raises(ValueError, match=r"'resolutoin'.*a ladder: base, resolution, frame_rate, frame_count"):
        parse_conditions("resolutoin")


def test_16x9_at_224_is_97_tokens_per_frame_and_582_frames() -> None:
    assert tokens_per_frame(398, 224) == 97
    assert n_max(398, 224) == 582
    assert n_max(400, 224) == 582


def test_long_video_is_capped_at_fps2_but_not_at_fps025(store: Path) -> None:
    meta = read_meta(store, "long16x9")
    fps2 = plan_frames("v_fps2_s224", meta.timestamps, meta.width, meta.height)
    assert fps2.extra["capped_ctx"] is True and fps2.extra["n_grid"] == 640
    assert fps2.extra["n_max"] == 582 and fps2.extra["n_frames_used"] == 582 == len(fps2.indices)
    assert fps2.extra["tokens_per_frame"] == 97
    slow = plan_frames("v_fps0.25_s224", meta.timestamps, meta.width, meta.height)
    assert slow.extra["capped_ctx"] is False and slow.extra["n_frames_used"] == slow.extra["n_grid"] == 80


def test_too_short_video_is_na_for_fps_and_128(store: Path) -> None:
    metas = MetaCache(store)
    specs = condition_specs()
    kinds = {c: decide(_item("short20"), s, metas).kind for c, s in specs.items()}
    na = {c for c, k in kinds.items() if k == "na"}
    assert na == {"v_128_s224", "v_fps0.25_s224", "v_fps0.5_s224", "v_fps1_s224", "v_fps2_s224"}
    assert kinds["v_32_s448"] == "reuse"  # stored at 180 px: the 448-px copy is the stored one
    assert all(k == "todo" for c, k in kinds.items() if c not in na | {"v_32_s448"})


def test_fewer_than_128_frames_sends_all_with_capped(store: Path) -> None:
    cell = decide(_item("mid100"), condition_specs(["v_128_s224"])["v_128_s224"], MetaCache(store))
    assert cell.kind == "todo" and cell.plan is not None
    assert cell.plan.indices == tuple(range(100)) and cell.plan.extra["capped"] is True


def test_stored_at_480_reuses_v32_for_s448_only(store: Path) -> None:
    metas = MetaCache(store)
    specs = condition_specs()
    cell = decide(_item("s480"), specs["v_32_s448"], metas)
    assert cell.kind == "reuse" and cell.reuse_from == "v_32"
    assert decide(_item("s480"), specs["v_32_s336"], metas).kind == "todo"
    assert decide(_item("long16x9"), specs["v_32_s448"], metas).kind == "reuse"  # 224 stored: s448 == v_32
    assert decide(_item("s720"), specs["v_32_s448"], metas).kind == "todo"


def test_items_without_a_normalized_video_are_failures_except_blind(store: Path) -> None:
    metas = MetaCache(store)
    specs = condition_specs(["v_blind", "v_1"])
    for vid in (None, "k:0123456789abcdef", "missing"):
        assert decide(_item(vid), specs["v_1"], metas).kind == "failure"
        assert decide(_item(vid), specs["v_blind"], metas).kind == "todo"


def test_token_budget_and_max_images_are_hashed_and_cap_the_plan(store: Path) -> None:
    default = condition_specs(["v_fps2_s224"])["v_fps2_s224"]
    small = condition_specs(["v_fps2_s224"], token_budget=30000)["v_fps2_s224"]
    assert small.config_hash != default.config_hash
    cell = decide(_item("long16x9"), small, MetaCache(store))
    assert cell.plan is not None and cell.plan.extra["n_max"] == (30000 - 1500) // 97 == len(cell.plan.indices)
    few = condition_specs(["v_fps2_s224"], max_images=100)["v_fps2_s224"]
    assert len(decide(_item("long16x9"), few, MetaCache(store)).plan.indices) == 100  # type: ignore[union-attr]
    with pytest.raises(ValueError, match="--token-budget"):
        condition_specs(token_budget=1000)
