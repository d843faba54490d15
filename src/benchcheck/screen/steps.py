"""The six screening steps as data, the chain, and the prompt intros (SPEC section 3)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Literal

InputKind = Literal["blind", "options_only", "frames"]
FramesPlan = Literal["none", "mid", "v32", "v32_shuffle"]


@dataclass(frozen=True, slots=True)
class ModelRef:
    """A hub model at a pinned revision; served under its hub name."""

    name: str
    revision: str


MODELS: dict[str, ModelRef] = {
    "8b": ModelRef("Qwen/Qwen3-VL-8B-Instruct", "0c351dd01ed87e9c1b53cbc748cba10e6187ff3b"),
    "2b": ModelRef("Qwen/Qwen3-VL-2B-Instruct", "89644892e4d85e24eaac8bacfd4f463576704203"),
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


STEPS: dict[int, StepSpec] = {
    1: StepSpec(1, "blind", "8b", "blind", "none", n_perm=4),
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

    The origin reused intro strings that are not in the seeds; the default set follows the
    common lmms-eval wording for Qwen-VL multiple choice.
    """

    name: str
    blind: str
    options_only: str
    frames: str

    def for_step(self, spec: StepSpec) -> str:
        return {"blind": self.blind, "options_only": self.options_only, "frames": self.frames}[spec.input]


INTROS: dict[str, IntroSet] = {
    "lmms-v1": IntroSet(
        name="lmms-v1",
        blind="Select the best answer to the following multiple-choice question.",
        options_only="Select the option that is most likely to be the correct answer.",
        frames="Select the best answer to the following multiple-choice question based on the video.",
    ),
}
DEFAULT_INTRO = "lmms-v1"


def parse_chain(text: str | Sequence[int]) -> tuple[int, ...]:
    """``"1,2,3"`` -> (1, 2, 3); every step must exist and appear once."""
    steps = tuple(int(s) for s in text.split(",")) if isinstance(text, str) else tuple(text)
    if not steps or len(set(steps)) != len(steps) or any(s not in STEPS for s in steps):
        raise ValueError(f"chain {text!r}: expected distinct steps among {sorted(STEPS)}")
    return steps


def config_hash(spec: StepSpec, intro: IntroSet, model_name: str, revision: str | None) -> str:
    """Hash of everything that shapes a step's answer; written into every row."""
    blob = json.dumps(
        {"step": asdict(spec), "intro": asdict(intro), "model": model_name, "revision": revision,
         "prefix": "Answer:", "top_logprobs": 20, "jpeg_quality": 85, "long_side": 448},
        sort_keys=True,
    )
    return hashlib.sha256(blob.encode()).hexdigest()[:16]
