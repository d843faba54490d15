"""docs/sweep.md's "What the model is given at the low rungs", as written: the plan's frame size,
the size Qwen3-VL's processor (the test model's settings: 32-pixel tokens, at least 65,536
pixels) makes of it, and the budget's count (the seed's, or the processor's tokens for a frame it
enlarges)."""

from __future__ import annotations

import pytest

from benchcheck.engines.hf.inputs.decode import ResizeRule
from benchcheck.testing.config import PREPROCESSOR_CONFIG
from benchcheck.video.plans import plan_frames, tokens_per_frame

TIMESTAMPS = [i * 0.5 for i in range(100)]


def processor_rule() -> ResizeRule:
    size = PREPROCESSOR_CONFIG["size"]
    return ResizeRule(32, int(size["shortest_edge"]), int(size["longest_edge"]))


@pytest.mark.parametrize(("cond", "source", "sent", "model", "budget"), [
    ("v_32_s168", (640, 360), (299, 168), (352, 192), 66),  # the seed's count: 60
    ("v_32_s168", (640, 480), (224, 168), (320, 224), 70),  # the seed's count: 42
    ("v_32_s224", (640, 480), (299, 224), (320, 224), 70),
    ("v_32_s224", (640, 360), (398, 224), (384, 224), 91),  # the seed's count, above the processor's 84
])
def test_rung_as_the_model_sees_it(cond: str, source: tuple[int, int], sent: tuple[int, int],
                                   model: tuple[int, int], budget: int) -> None:
    plan = plan_frames(cond, TIMESTAMPS, *source)
    assert (plan.width, plan.height) == sent
    assert tokens_per_frame(plan.width, plan.height) == budget + 6
    h, w = processor_rule().size(plan.height, plan.width)
    assert (w, h) == model


def test_s168_on_4_3_costs_what_s224_costs() -> None:
    rule = processor_rule()
    sizes = [rule.size(p.height, p.width) for p in
             (plan_frames(c, TIMESTAMPS, 640, 480) for c in ("v_32_s168", "v_32_s224"))]
    assert sizes[0] == sizes[1]
