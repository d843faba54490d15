"""What the fast paths keep for one model instance: one ``ModelState`` object on the model.

The forwards installed on transformers' modules (``model.fused``, ``model.scored``,
``model.vision``) are closures over this object, so nothing else is stored on the modules:
per-MLP packed weights and activations, the scored last layer's unscored forward, the compiled
q/k norm with rotary, the vision tower's rotary functions, its per-forward image lengths and its
grid-derived inputs, and what the checked install did (``model.install``).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from benchcheck.engines.hf.attention.sdpa import PlanMemo
from benchcheck.engines.hf.config import HFConfig
from benchcheck.engines.hf.runtime.launcher import Launcher

ATTRIBUTE = "_bc_state"  # the one attribute the engine sets on a model
TESTED = "5.17.0"  # the transformers release the fast paths were written against (pyproject's pin)


@dataclass(slots=True)
class InstallReport:
    """What ``install_fast_paths`` did: modules changed per fast path, and what fell back, why."""

    transformers: str
    installed: dict[str, int] = field(default_factory=dict)
    fell_back: dict[str, str] = field(default_factory=dict)
    skipped: tuple[str, ...] = ()  # not for this device (CUDA-only paths on the CPU)

    def message(self) -> str | None:
        """The one warning (None: nothing to say): what fell back and why, and a transformers
        other than the tested one."""
        version = ""
        if self.transformers != TESTED:
            version = f"transformers {self.transformers} (the fast paths were tested with {TESTED})"
        if not self.fell_back:
            return f"hf engine: {version}; every fast path passed its checks" if version else None
        why = "; ".join(f"{name}: {reason}" for name, reason in self.fell_back.items())
        where = f" under {version}" if version else ""
        return f"hf engine: {len(self.fell_back)} fast path(s) fell back to transformers' own forward{where}: {why}"


@dataclass(eq=False)
class ModelState:
    """The fast paths' state of one model (modules are keys by identity)."""

    # MLP -> ((weight pointers and versions), packed gate/up weights or None): ``fused.packed_gate_up``
    gate_up: dict[Any, tuple[tuple[int, ...], Any] | None] = field(default_factory=dict)
    # text attentions whose q, k and v weights are row blocks of one tensor (``fused.pack_qkv``; op
    # ``qkv_packed``): taken from the weights at each use, never kept, so that it goes with them
    qkv: set[Any] = field(default_factory=set)
    # MLP -> its fused activation ``silu(gate(x)) * up(x)`` (``fused.use_fused_text_mlp``)
    activation: dict[Any, Callable[[Any], Any]] = field(default_factory=dict)
    # the scored last layer -> the forward of its unscored calls (``scored.use_scored_last_layer``)
    full_forward: dict[Any, Callable[..., Any]] = field(default_factory=dict)
    norm_rope: Callable[..., Any] | None = None  # the compiled q/k norm and rotary (``fused``)
    attention_forward: Callable[..., Any] | None = None  # the fused text attention's forward (``fused``)
    vision_rotary: Callable[..., Any] | None = None  # transformers' apply_rotary_pos_emb_vision or a replacement
    vision_qkv_rotary: Callable[..., Any] | None = None  # projection -> rotated q, k in one pass
    # [cu_seqlens tensor, its lengths on the host]: one device read per vision forward
    vision_lengths: list[Any] = field(default_factory=lambda: [None, []])
    # distinct grid lists -> the vision tower's precomputed inputs (``vision_inputs``)
    vision_inputs: OrderedDict[tuple[int, ...], dict[str, Any]] = field(default_factory=OrderedDict)
    # distinct image shapes (t, h, w) -> their inputs on the device, the lists' parts
    vision_shapes: OrderedDict[tuple[int, int, int], tuple[Any, ...]] = field(default_factory=OrderedDict)
    vision_inputs_ok: bool = True  # transformers takes the precomputed inputs (``install``)
    report: InstallReport | None = None  # what ``install.install_fast_paths`` did
    # SDPA shapes with a cuDNN plan built, and small ones met without (op ``new_shape_flash``)
    plans: PlanMemo = field(default_factory=lambda: PlanMemo(0.0))
    # The one thread that launches the model's device work (op ``launch_thread``), made on first use
    launcher: Launcher | None = None
    # The one thread that stages generation batches' host inputs ahead (op ``stage_ahead``), made on first use
    stager: ThreadPoolExecutor | None = None
    # A decode step is being warmed up and captured as a CUDA graph (``forward.generate.DecodeStep``):
    # with op ``graph_fused`` its small calls take the compiled paths (``fused.plain``).
    graph_step: bool = False
    # The config in force: set under the model's lock by the engine whose forward runs
    # (``HFEngine.active``); the installed forwards read their per-call ops from it.
    config: HFConfig = field(default_factory=HFConfig)


def state_of(model: Any) -> ModelState:
    """``model``'s state, made on first use (in ``__dict__``: never a registered submodule)."""
    state = model.__dict__.get(ATTRIBUTE)
    if state is None:
        state = model.__dict__[ATTRIBUTE] = ModelState()
    assert isinstance(state, ModelState)
    return state
