"""RunSpec: everything that shapes an answer, in one frozen record, and its hash.

A screening step and a sweep condition are both a ``RunSpec``. ``config_hash`` is the hash of
the whole record, so a change to any constant that reaches the model (the frame size, the JPEG
quality, the prompt template, the assistant prefix, the generation settings, the model
revision) changes the hash, and rows written under the old one are stale, never done.

The fields hold values, not names of values: a spec is built from the single definitions of
the constants (``protocol``, and the frame plans' numbers of ``video.plans``), and nothing else
is hashed. Ladders of specs are made by expanders (HELM's ``RunExpander`` shape): a function
from one spec to several, so a new ladder is data (a tuple of values), not a new runner.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from benchcheck.protocol import ASSISTANT_PREFIX, JPEG_QUALITY, PROMPT, PROMPT_OPT_ONLY, SEED, TOP_LOGPROBS

SPEC_VERSION = 1
RequestKind = Literal["score", "generate"]
InputKind = Literal["blind", "options_only", "frames"]
FrameOrder = Literal["time", "shuffled"]
SizeMode = Literal["long", "short", "storage"]


@dataclass(frozen=True, slots=True)
class ModelRef:
    """A hub model at a pinned revision; served under its hub name."""

    name: str
    revision: str | None


@dataclass(frozen=True, slots=True)
class PromptSpec:
    """The user turn's text: the template, the intro sentence, what the model is shown."""

    input: InputKind
    intro: str
    intro_name: str
    template: str

    @staticmethod
    def for_input(input_kind: InputKind, intro: str, intro_name: str) -> PromptSpec:
        template = PROMPT_OPT_ONLY if input_kind == "options_only" else PROMPT
        return PromptSpec(input_kind, intro, intro_name, template)


@dataclass(frozen=True, slots=True)
class FrameSpec:
    """Which frames, at what size, in what order, encoded how.

    ``plan`` is a frame-plan name of ``benchcheck.video.plans`` (``"v32"``, ``"mid"``,
    ``"v_32_s224"``, ``"v_fps2_s224"``, ...) or ``"none"``; the size fields repeat what the plan
    name implies so that the hash carries the numbers, not only the name.
    """

    plan: str = "none"
    n_frames: int | None = None
    fps: float | None = None
    size_mode: SizeMode = "storage"
    size_px: int | None = None
    order: FrameOrder = "time"
    jpeg_quality: int = JPEG_QUALITY
    token_budget: int | None = None
    reserve_tokens: int | None = None
    max_images: int | None = None

    @property
    def visual(self) -> bool:
        return self.plan != "none"


NO_FRAMES = FrameSpec()


@dataclass(frozen=True, slots=True)
class GenSettings:
    """How the answer is produced: letters' log-probs of the first token, or greedy text."""

    temperature: float = 0.0
    max_tokens: int = 1
    assistant_prefix: str | None = ASSISTANT_PREFIX
    top_logprobs: int | None = TOP_LOGPROBS
    parser: str | None = None  # generate only: a named answer parser


@dataclass(frozen=True, slots=True)
class RunSpec:
    """One step or condition: the unit of "the same question asked the same way"."""

    name: str
    kind: RequestKind
    model: ModelRef
    prompt: PromptSpec
    frames: FrameSpec = NO_FRAMES
    gen: GenSettings = field(default_factory=GenSettings)
    n_perm: int = 1
    seed: int = SEED
    extra: tuple[tuple[str, Any], ...] = ()  # further settings that shape answers, as pairs

    def to_dict(self) -> dict[str, Any]:
        return {"spec_version": SPEC_VERSION, **asdict(self)}

    @property
    def config_hash(self) -> str:
        return config_hash(self)

    def with_model(self, model: ModelRef) -> RunSpec:
        return replace(self, model=model)


def config_hash(spec: RunSpec) -> str:
    """sha256 (first 16 hex) of the canonical JSON of the whole spec."""
    blob = json.dumps(spec.to_dict(), sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def write_run_spec(spec: RunSpec, folder: Path) -> Path:
    """``run_spec.json`` beside a step's or condition's rows (atomic; rewritten when it changes)."""
    from benchcheck.atomic import write_json_atomic

    path = folder / "run_spec.json"
    payload = {**spec.to_dict(), "config_hash": spec.config_hash}
    write_json_atomic(path, payload)
    return path


# An expander turns one spec into several (a ladder); HELM's RunExpander.expand(spec) shape.
Expander = Callable[[RunSpec], list[RunSpec]]


def expand(base: Iterable[RunSpec], expanders: Sequence[Expander]) -> list[RunSpec]:
    """Apply each expander in turn to every spec; names stay unique."""
    specs = list(base)
    for ex in expanders:
        specs = [out for s in specs for out in ex(s)]
    names = [s.name for s in specs]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ValueError(f"expanded specs repeat names: {', '.join(dupes)}")
    return specs
