"""A plan has one canonical name however its numbers are spelled: ``v_4_s0224`` kept ``0224``,
so the same plan had two frame-cache names (``v_4_s224`` and ``v_4_s0224``); likewise for the
fps of an fps plan (``fps01``, ``fps1.0``)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from benchcheck.video.plans import MAX_PLAN_FPS, SizeTarget, parse_plan


@pytest.mark.parametrize(("name", "canonical"), [
    ("v_4_s0224", "v_4_s224"),
    ("004_s00224", "v_4_s224"),
    ("v_032", "v_32"),
    ("v_01_s0448", "v_1_s448"),
    ("v_fps01_s0224", "v_fps1_s224"),
    ("v_fps1.0_s224", "v_fps1_s224"),
    ("fps001.000", "v_fps1"),
    ("v_fps00.50_s224", "v_fps0.5_s224"),
    ("v_fps0.5", "v_fps0.5"),
    ("v_fps0.25_s224", "v_fps0.25_s224"),
    ("v_fps10_s224", "v_fps10_s224"),
    ("v_fps0.00001", "v_fps0.00001"),
])
def test_canonical_name_spells_numbers_one_way(name: str, canonical: str) -> None:
    spec, again = parse_plan(name), parse_plan(canonical)
    assert spec.name == canonical
    assert (again.name, again.kind, again.n, again.fps, again.size) == (canonical, spec.kind, spec.n, spec.fps,
                                                                          spec.size)


def test_short_side_keeps_its_value() -> None:
    assert parse_plan("v_4_s0224").size == SizeTarget("short", 224)


@given(st.floats(min_value=1e-6, max_value=MAX_PLAN_FPS, allow_nan=False, allow_infinity=False),
       st.integers(0, 3), st.integers(0, 3))
def test_fps_spellings_share_the_name_and_the_name_keeps_the_fps(fps: float, lead: int, trail: int) -> None:
    text = format(fps, ".12f")
    spelled = "0" * lead + text + "0" * trail
    spec = parse_plan(f"v_fps{spelled}_s224")
    assert spec.name == parse_plan(f"v_fps{text}_s224").name
    assert parse_plan(spec.name).fps == spec.fps
