"""The six screening steps as data, the chain, and the prompt intros (docs/PROTOCOL.md, "Steps").

Each step becomes a :class:`benchcheck.spec.RunSpec` (``StepSpec.run_spec``) built from the
single definitions of the constants: the prompt templates, assistant prefix, top log-probs and
seed in ``benchcheck.protocol``, the grid, middle position, frame size and JPEG quality in
``benchcheck.video.plans`` (read when the spec is built, so the hash follows them).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from benchcheck import protocol
from benchcheck.defaults import INTRO_BLIND, INTRO_FRAMES, INTRO_NAME, INTRO_OPTIONS_ONLY, QWEN3_VL_2B, QWEN3_VL_8B
from benchcheck.spec import FrameSpec, GenSettings, InputKind, ModelRef, PromptSpec, RunSpec
from benchcheck.video import plans

FramesPlan = Literal["none", "mid", "v32", "v32_shuffle"]


MODELS: dict[str, ModelRef] = {
    "8b": QWEN3_VL_8B,
    "2b": QWEN3_VL_2B,
}


@dataclass(frozen=True, slots=True)
class StepSpec:
    """One screening step: which model sees what, through which prompt."""

    number: int
    name: str
    model: str  # key of MODELS
    input: InputKind
    frames: FramesPlan
    n_perm: int = 1

    @property
    def visual(self) -> bool:
        return self.frames != "none"

    def frame_spec(self) -> FrameSpec:
        """The frames this step shows, with the numbers (not only the plan's name) that shape them."""
        if self.frames == "none":
            return FrameSpec()
        mid = self.frames == "mid"
        return FrameSpec(plan="mid" if mid else "v32", n_frames=1 if mid else plans.GRID32, size_mode="long",
                         size_px=plans.FRAME_LONG_SIDE, order="shuffled" if self.frames == "v32_shuffle" else "time",
                         jpeg_quality=protocol.JPEG_QUALITY)

    def run_spec(self, intro: IntroSet, model: ModelRef) -> RunSpec:
        """Everything that shapes this step's answers for ``model``; its hash goes into every row."""
        extra: tuple[tuple[str, object], ...] = (("step", self.number),)
        if self.visual:  # the grid the frames come from; a blind step's hash does not depend on it
            extra += (("grid", plans.GRID32),)
        if self.frames == "mid":
            extra += (("grid_position", plans.MID_POSITION),)
        return RunSpec(
            name=self.name, kind="score", model=model,
            prompt=PromptSpec.for_input(self.input, intro.for_step(self), intro.name),
            frames=self.frame_spec(),
            gen=GenSettings(max_tokens=1, assistant_prefix=protocol.ASSISTANT_PREFIX,
                            top_logprobs=protocol.TOP_LOGPROBS),
            n_perm=self.n_perm, seed=protocol.SEED, extra=extra)


STEPS: dict[int, StepSpec] = {
    1: StepSpec(1, "blind", "8b", "blind", "none", n_perm=protocol.N_PERM),
    2: StepSpec(2, "single_frame", "8b", "frames", "mid"),
    3: StepSpec(3, "v32_2b", "2b", "frames", "v32"),
    4: StepSpec(4, "opt_only", "8b", "options_only", "none"),
    5: StepSpec(5, "v32_2b_shuffle", "2b", "frames", "v32_shuffle"),
    6: StepSpec(6, "v32_8b", "8b", "frames", "v32"),
}
DEFAULT_CHAIN: tuple[int, ...] = (1, 2, 3, 4, 5, 6)


@dataclass(frozen=True, slots=True)
class IntroSet:
    """The per-input-kind intro sentence of the prompt; its name is versioned and hashed into rows.

    The intro strings of the original runs are not published; the default set follows the
    common lmms-eval wording for Qwen-VL multiple choice (docs/PROTOCOL.md, "Prompts").
    """

    name: str
    blind: str
    options_only: str
    frames: str

    def for_step(self, spec: StepSpec) -> str:
        return {"blind": self.blind, "options_only": self.options_only, "frames": self.frames}[spec.input]


INTROS: dict[str, IntroSet] = {
    INTRO_NAME: IntroSet(name=INTRO_NAME, blind=INTRO_BLIND, options_only=INTRO_OPTIONS_ONLY, frames=INTRO_FRAMES),
}
DEFAULT_INTRO = INTRO_NAME


def parse_chain(text: str | Sequence[int]) -> tuple[int, ...]:
    """``"1,2,3"`` -> (1, 2, 3); every step must exist and appear once."""
    try:
        steps = tuple(int(s) for s in text.split(",")) if isinstance(text, str) else tuple(text)
    except ValueError:  # int()'s own message names neither the option nor the chain
        raise ValueError(f"chain {text!r}: expected step numbers separated by commas, e.g. 1,2,3") from None
    if not steps or len(set(steps)) != len(steps) or any(s not in STEPS for s in steps):
        raise ValueError(f"chain {text!r}: expected distinct steps among {sorted(STEPS)}")
    return steps


def default_run_spec(step: int, model: ModelRef | None = None, intro: str = DEFAULT_INTRO) -> RunSpec:
    """Step ``step``'s RunSpec under the named intro, for the step's pinned model unless one is
    given (scripts and benchmarks that build requests without a results folder)."""
    spec = STEPS[step]
    return spec.run_spec(INTROS[intro], model or MODELS[spec.model])
