"""The sweep's conditions as ``RunSpec`` data, made by ladder expanders (SPEC section 5).

A condition is a frame-plan name of :mod:`benchcheck.video.plans` (``v_32_s224``,
``v_fps2_s224``...) or ``v_blind``. A ladder is a named tuple of such names; the expander
:func:`ladder` turns the one base spec into one spec per rung. Adding a ladder is adding a
line to :data:`LADDERS` (or passing ``--conds v_64_s224,...``): no runner code changes.

The rules that depend on the video, each stated once here:

* **NA**: a ``too_short`` video (<= 32 stored frames) gets status ``NA`` for every plan that
  needs more than the 32-frame grid: grids over 32 frames (``v_128_s224``) and fps plans.
* **Reuse**: a video stored at short side 480 or less answers ``v_32_s448`` with its ``v_32``
  row (the stored frames are at most 480 px, so the 448-px copy adds nothing); the row is its
  own row with ``meta.reused_from = "v_32"``.
* **Cap**: fps plans re-sample to ``N_max`` frames (``video.plans``); the budget constants are
  carried in every condition's ``FrameSpec`` so they are hashed.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import Any

from benchcheck.defaults import INTRO_BLIND, INTRO_FRAMES, INTRO_NAME, QWEN3_VL_8B
from benchcheck.protocol import ASSISTANT_PREFIX
from benchcheck.spec import Expander, FrameSpec, GenSettings, ModelRef, PromptSpec, RunSpec, expand
from benchcheck.video.plans import MAX_IMAGES, PROMPT_RESERVE, TOKEN_BUDGET, PlanSpec, parse_plan

BLIND = "v_blind"
MAX_TOKENS = 128
PARSER = "mc-text-v1"
SWEEP_MODEL = QWEN3_VL_8B
REUSE: dict[str, str] = {"v_32_s448": "v_32"}  # condition -> the condition whose answer it reuses
REUSE_MAX_SHORT_SIDE = 480
assert ASSISTANT_PREFIX  # the sweep never prefills it (GenSettings.assistant_prefix=None)

LADDERS: dict[str, tuple[str, ...]] = {
    "base": ("v_blind", "v_1", "v_32", "v_32_s224", "v_32_s448"),
    "resolution": ("v_32_s168", "v_32_s224", "v_32_s336", "v_32_s448", "v_32"),
    "frame_rate": ("v_fps0.25_s224", "v_fps0.5_s224", "v_fps1_s224", "v_fps2_s224"),
    "frame_count": ("v_8_s224", "v_32_s224", "v_128_s224"),
}
# The thirteen conditions in run order: v_32 before v_32_s448 so a run can reuse what it wrote.
CONDITIONS: tuple[str, ...] = (
    "v_blind", "v_1", "v_8_s224", "v_32", "v_32_s168", "v_32_s224", "v_32_s336", "v_32_s448",
    "v_128_s224", "v_fps0.25_s224", "v_fps0.5_s224", "v_fps1_s224", "v_fps2_s224",
)
assert set(CONDITIONS) == {c for rungs in LADDERS.values() for c in rungs}


def plan_of(condition: str) -> PlanSpec | None:
    """The frame plan of a condition (None for ``v_blind``); ``ValueError`` for unknown names."""
    return None if condition == BLIND else parse_plan(condition)


def canonical(condition: str) -> str:
    plan = plan_of(condition.strip())
    return BLIND if plan is None else plan.name


def na_if_too_short(condition: str) -> bool:
    """Conditions a ``too_short`` video cannot fill: grids over 32 frames and fps plans."""
    plan = plan_of(condition)
    return plan is not None and (plan.kind == "fps" or plan.all_if_short)


def reuses(condition: str, stored_width: int, stored_height: int) -> str | None:
    """The condition whose answer this one reuses for a video of this stored size, or None."""
    source = REUSE.get(condition)
    if source is None or min(stored_width, stored_height) > REUSE_MAX_SHORT_SIDE:
        return None
    return source


def frame_spec(condition: str, token_budget: int = TOKEN_BUDGET, max_images: int = MAX_IMAGES) -> FrameSpec:
    plan = plan_of(condition)
    if plan is None:
        return FrameSpec()
    return FrameSpec(plan=plan.name, n_frames=None if plan.kind == "fps" else (1 if plan.kind == "mid" else plan.n),
                     fps=plan.fps, size_mode=plan.size.mode, size_px=plan.size.px, token_budget=token_budget,
                     reserve_tokens=PROMPT_RESERVE, max_images=max_images)


def base_spec(model: ModelRef = SWEEP_MODEL) -> RunSpec:
    """The skeleton every condition shares: greedy text, 128 tokens, no assistant prefill."""
    return RunSpec(name="sweep", kind="generate", model=model,
                   prompt=PromptSpec.for_input("frames", INTRO_FRAMES, INTRO_NAME),
                   gen=GenSettings(temperature=0.0, max_tokens=MAX_TOKENS, assistant_prefix=None, top_logprobs=None,
                                   parser=PARSER))


def ladder(names: Sequence[str], token_budget: int = TOKEN_BUDGET, max_images: int = MAX_IMAGES) -> Expander:
    """An expander: one spec -> one spec per rung (the condition name is the spec name)."""
    rungs = [canonical(n) for n in names]

    def expand_one(spec: RunSpec) -> list[RunSpec]:
        out = []
        for name in rungs:
            prompt = spec.prompt
            if name == BLIND:
                prompt = PromptSpec.for_input("blind", INTRO_BLIND, spec.prompt.intro_name)
            extra: tuple[tuple[str, Any], ...] = (("na_if_too_short", na_if_too_short(name)),)
            if name in REUSE:
                extra += (("reuse", (REUSE[name], REUSE_MAX_SHORT_SIDE)),)
            out.append(replace(spec, name=name, prompt=prompt, frames=frame_spec(name, token_budget, max_images),
                               extra=extra))
        return out

    return expand_one


def parse_conditions(text: str | None) -> list[str]:
    """``--conds``: comma-separated condition or ladder names (default: the thirteen), run order kept;
    a text naming none (only commas or spaces) is an error."""
    if text is None:
        return list(CONDITIONS)
    names: list[str] = []
    for raw in text.split(","):
        raw = raw.strip()
        if not raw:
            continue
        for n in LADDERS.get(raw, (raw,)):
            try:
                c = canonical(n)
            except ValueError as e:
                raise ValueError(f"--conds: {e}, or a ladder: {', '.join(LADDERS)}") from None
            if c not in names:
                names.append(c)
    if not names:  # a run of no condition would report itself finished
        raise ValueError(f"--conds: no condition named in {text!r} (conditions or ladders: {', '.join(LADDERS)})")
    order = {c: i for i, c in enumerate(CONDITIONS)}
    return sorted(names, key=lambda c: order.get(c, len(order)))


def condition_specs(names: Iterable[str] | None = None, model: ModelRef = SWEEP_MODEL,
                    token_budget: int = TOKEN_BUDGET, max_images: int = MAX_IMAGES) -> dict[str, RunSpec]:
    """The RunSpec of each condition, by name, in run order (``--token-budget``, ``--max-images``
    are hashed into every visual condition: rows made under other values are other work)."""
    if token_budget <= PROMPT_RESERVE or max_images < 1:
        raise ValueError(f"--token-budget must exceed the {PROMPT_RESERVE}-token reserve and --max-images be >= 1")
    conds = list(names) if names is not None else list(CONDITIONS)
    return {s.name: s for s in expand([base_spec(model)], [ladder(conds, token_budget, max_images)])}


def source_spec(spec: RunSpec, source: str) -> RunSpec:
    """The spec of the condition whose answer ``spec``'s condition reuses, under the same model and
    budget (the reused answer must be one made under it, not under another spec)."""
    fs = spec.frames
    return condition_specs([source], spec.model, fs.token_budget or TOKEN_BUDGET, fs.max_images or MAX_IMAGES)[source]
