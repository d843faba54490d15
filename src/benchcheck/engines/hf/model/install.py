"""The one install step of the fast paths: check first, then patch, and say what fell back.

Every fast path rebinds ``forward`` on instances of transformers' Qwen3-VL classes (or registers
an attention function), so it depends on names and attributes transformers may change in any
release. Before anything is patched, this checks the transformers version against the one the
fast paths were written and tested for (``TESTED``), and, for each fast path, that every class
it patches still exists under its name in ``modeling_qwen3_vl``, that the model holds instances
of it, that those instances have the attributes the new forward reads, and that the functions it
calls exist. A fast path that fails a check is not installed (transformers' own forward runs,
which gives the same results, only slower); an installer that changes fewer modules than the
model has is counted the same way. What fell back is said once, in one warning naming each fast
path and why, or raised (``FastPathMismatch``) when the caller asked for ``strict``. Never a
silent slow path: the report is kept on the model's state (``ModelState.report``) and the engine
exposes it (``HFEngine.fast_paths``).
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from benchcheck.engines.hf.attention.varlen import use_tree_attention
from benchcheck.engines.hf.model import fused, scored, vision, vision_block, visual_reads
from benchcheck.engines.hf.model.state import InstallReport, state_of

log = logging.getLogger("benchcheck.engines.hf")

QWEN3_VL = "transformers.models.qwen3_vl.modeling_qwen3_vl"


class FastPathMismatch(RuntimeError):
    """A fast path could not be installed and the caller asked for ``strict``."""


@dataclass(frozen=True, slots=True)
class FastPath:
    """One fast path: what it patches, what it needs, and how it is installed."""

    name: str
    classes: dict[str, tuple[str, ...]]  # class name in modeling_qwen3_vl -> attributes each instance must have
    functions: tuple[str, ...]  # "module:attribute" it calls
    install: Callable[[Any], int]  # the installer (model -> modules changed)
    cuda_only: bool = False  # only where ``fused.compile_enabled`` (CUDA with Triton)
    one: bool = False  # changes one instance (the last), not all
    fall_back: Callable[[Any], None] | None = None  # turns off what the path's callers would use


def fast_paths(qkv_rotary: Callable[..., Any] | None = None) -> list[FastPath]:
    """The fast paths in install order (the fused layers after the fused MLP, the scored last
    layer last: it keeps the layer forward installed before it for its unscored calls)."""
    text_attn = ("q_proj", "k_proj", "v_proj", "o_proj", "q_norm", "k_norm", "head_dim", "scaling", "layer_idx",
                 "config")
    layer = ("self_attn", "mlp", "input_layernorm", "post_attention_layernorm")
    return [
        FastPath("grouped_vision_attention", {"Qwen3VLVisionAttention": ("qkv", "proj", "num_heads", "scaling")},
                 (f"{QWEN3_VL}:apply_rotary_pos_emb_vision",),
                 lambda m: vision.use_grouped_vision_attention(m, qkv_rotary=qkv_rotary)),
        FastPath("linear_patch_embed", {"Qwen3VLVisionPatchEmbed": ("proj",)}, (),
                 lambda m: int(vision.use_linear_patch_embed(m))),
        # Installed everywhere: op ``vision_block`` is read at each call (off: the class's forward).
        FastPath("fused_vision_blocks", {"Qwen3VLVisionBlock": ("norm1", "norm2", "attn", "mlp"),
                                         "Qwen3VLVisionMLP": ("linear_fc1", "linear_fc2", "act_fn")},
                 ("torch:_addmm_activation",), vision_block.use_fused_vision_blocks),
        FastPath("fused_norms", {"Qwen3VLTextRMSNorm": ("weight", "variance_epsilon")}, (),
                 fused.use_fused_text_norms, cuda_only=True),
        FastPath("fused_mlp", {"Qwen3VLTextMLP": ("gate_proj", "up_proj", "down_proj", "config")}, (),
                 fused.use_fused_text_mlp, cuda_only=True),
        FastPath("fused_layers", {"Qwen3VLTextDecoderLayer": layer}, (), fused.use_fused_text_layers, cuda_only=True),
        FastPath("fused_attention", {"Qwen3VLTextAttention": text_attn},
                 ("transformers.modeling_utils:ALL_ATTENTION_FUNCTIONS", f"{QWEN3_VL}:eager_attention_forward"),
                 fused.use_fused_text_attention, cuda_only=True),
        FastPath("scored_last_layer", {"Qwen3VLTextDecoderLayer": layer, "Qwen3VLTextAttention": text_attn}, (),
                 lambda m: int(scored.use_scored_last_layer(m)), one=True),
        FastPath("tree_attention", {},
                 ("transformers.modeling_utils:AttentionInterface", "transformers.masking_utils:AttentionMaskInterface",
                  "transformers.masking_utils:sdpa_mask",
                  "transformers.integrations.sdpa_attention:sdpa_attention_forward"),
                 lambda m: int(use_tree_attention(m))),
        # Installed everywhere: op ``visual_no_reads`` is read at each call (off: transformers' methods).
        FastPath("visual_no_reads", {"Qwen3VLModel": ("get_placeholder_mask", "config", "language_model"),
                                     "Qwen3VLTextModel": ("_deepstack_process",)}, (),
                 visual_reads.use_visual_without_reads),
        FastPath("precomputed_vision_inputs", {},
                 tuple(f"transformers.vision_utils:{f}" for f in (
                     "get_vision_cu_seqlens", "get_vision_interpolation_indices_and_weights",
                     "get_vision_position_ids")),
                 lambda m: 1, fall_back=_no_vision_inputs),
    ]


def _no_vision_inputs(model: Any) -> None:
    state_of(model).vision_inputs_ok = False


def _missing_function(ref: str) -> str | None:
    module, _, name = ref.partition(":")
    try:
        found = hasattr(importlib.import_module(module), name)
    except ImportError:
        found = False
    return None if found else f"no {module}.{name}"


def check(model: Any, path: FastPath) -> tuple[str | None, int]:
    """Why ``path`` cannot be installed on ``model`` (None: it can), and how many modules it
    should change (instances of its classes; the first class of a path with several)."""
    qwen = importlib.import_module(QWEN3_VL)
    expected = 0
    for k, (name, attrs) in enumerate(path.classes.items()):
        cls = getattr(qwen, name, None)
        if not isinstance(cls, type):
            return f"transformers has no class {name}", 0
        found = [m for m in model.modules() if type(m) is cls]
        if not found:
            present = sorted({type(m).__name__ for m in model.modules() if type(m).__module__ == QWEN3_VL})
            return f"the model has no {name} (its Qwen3-VL modules: {', '.join(present) or 'none'})", 0
        lacking = [a for a in attrs if not hasattr(found[0], a)]
        if lacking:
            return f"{name} has no {', '.join(lacking)}", 0
        if k == 0:
            expected = 1 if path.one else len(found)
    for ref in path.functions:
        if (why := _missing_function(ref)) is not None:
            return why, 0
    return None, expected


def install_fast_paths(model: Any, *, fuse: bool, strict: bool = False,
                       qkv_rotary: Callable[..., Any] | None = None,
                       paths: list[FastPath] | None = None) -> InstallReport:
    """Check, then install, every fast path on ``model`` (``fuse``: the CUDA-only ones too);
    returns the report (also ``state_of(model).report``). A path that fails its check or
    changes fewer modules than expected falls back; with ``strict`` that raises
    ``FastPathMismatch`` before anything else is installed, else one warning names them all."""
    import transformers

    report = InstallReport(str(transformers.__version__))
    todo = paths if paths is not None else fast_paths(qkv_rotary)
    checked: list[tuple[FastPath, int]] = []
    for path in todo:
        if path.cuda_only and not fuse:
            report.skipped += (path.name,)
            continue
        why, expected = check(model, path)
        if why is not None:
            report.fell_back[path.name] = why
        else:
            checked.append((path, expected))
    if strict and report.fell_back:
        raise FastPathMismatch(str(report.message()))
    for path in todo:
        if path.name in report.fell_back and path.fall_back is not None:
            path.fall_back(model)
    for path, expected in checked:
        n = path.install(model)
        report.installed[path.name] = n
        # grouped vision attention under another attention kernel changes nothing by design
        not_applicable = path.name == "grouped_vision_attention" and _vision_attention(model) != "sdpa"
        if n < expected and not not_applicable:
            report.fell_back[path.name] = f"{n} of {expected} modules changed"
    if strict and report.fell_back:
        raise FastPathMismatch(str(report.message()))
    if (message := report.message()) is not None:
        log.warning("%s", message)
    state_of(model).report = report
    return report


def _vision_attention(model: Any) -> str | None:
    return getattr(model.model.visual.config, "_attn_implementation", None)
