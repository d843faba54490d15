"""Fused operations of the Qwen3-VL language model on CUDA: norms, SiLU-times-up, q/k norm with
rotary, and the MLP's residual in the down projection's product.

transformers runs each text RMSNorm as about seven separate element-wise kernels in float32
(cast, square, mean, rsqrt, two multiplies, cast back), and the 8B model has 145 of them per
forward (two per layer plus the per-head q/k norms). On an H200 that unfused work was about 30 %
of a text-only scoring forward. ``torch.compile`` fuses each norm into one kernel computing the
same operations in the same order (only the reduction order inside the mean can differ): the
8B blind workload went from 177 to 198 items/s through the engine, 196 to 227 forward-only
(decision 001). Only CUDA uses it: on the CPU the compile costs more than it saves.
``HFConfig`` op ``rms_norm`` off turns it off. The other fusions below follow the same rule:
the same function as transformers' modules, fewer passes over the activations.
"""

from __future__ import annotations

import types
from collections.abc import Callable
from typing import Any

import torch
from torch.nn.modules import module as torch_module

from benchcheck.engines.hf.attention.cache import ReservedCache
from benchcheck.engines.hf.attention.decode import decode_attention
from benchcheck.engines.hf.kernels import refuse, refused, triton_available
from benchcheck.engines.hf.kernels import silu as silu_contract
from benchcheck.engines.hf.kernels import swiglu as swiglu_contract
from benchcheck.engines.hf.kernels.silu import silu_mul
from benchcheck.engines.hf.model.state import ModelState, state_of

NORM_CLASS = "Qwen3VLTextRMSNorm"
MLP_CLASS = "Qwen3VLTextMLP"
LAYER_CLASS = "Qwen3VLTextDecoderLayer"
# Below this many rows (generation's decode steps: one token per sequence) the fused functions
# run eagerly: there the cost is the host's, and a compiled call (guards, cache lookup) costs the
# host more than the few small kernels it saves (H200 profile of 582-frame generation). A step
# captured as a CUDA graph is the exception (``plain``).
EAGER_ROWS = 256


def plain(rows: int, state: ModelState) -> bool:
    """Whether a call of ``rows`` rows runs the plain (uncompiled) function: below ``EAGER_ROWS``,
    unless it is a decode step being captured as a CUDA graph with op ``graph_fused`` on. A replay
    runs no Python, so the compiled call's host cost is paid once, at the capture, and its fewer
    kernels save device time at every replay."""
    return rows < EAGER_ROWS and not (state.graph_step and state.config.op("graph_fused"))


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """transformers' Qwen3-VL text RMSNorm, operation for operation."""
    dtype = x.dtype
    h = x.to(torch.float32)
    h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)
    return weight * h.to(dtype)


def compile_enabled(device: torch.device) -> bool:
    """CUDA with Triton available (torch.compile's GPU backend; the ops that need it: ``HFConfig``)."""
    if device.type != "cuda":
        return False
    return triton_available()


def use_fused_text_norms(model: Any, compiler: Callable[..., Any] | None = None) -> int:
    """Replace the ``forward`` of every text RMSNorm of this model instance by one fused kernel;
    returns how many were replaced. ``compiler`` defaults to ``torch.compile(dynamic=True)``
    (batch and length vary from call to call)."""
    fn = (compiler or (lambda f: torch.compile(f, dynamic=True)))(rms_norm)
    state = state_of(model)

    def forward(self: Any, x: torch.Tensor) -> torch.Tensor:
        # Always one 2-D shape (rows, width): the layer norms see (batch, length, hidden) and the
        # q/k norms (batch, length, heads, head_dim); each new rank or a dimension of 1 would
        # cost a recompile (seconds) in the middle of a run, and after 8 a silent fall-back.
        rows = x.reshape(-1, x.shape[-1])
        if plain(rows.shape[0], state):  # an eager decode step: the compiled call's overhead would dominate
            return rms_norm(x, self.weight, self.variance_epsilon)
        return fn(rows, self.weight, self.variance_epsilon).view(x.shape)  # type: ignore[no-any-return]

    return _install(model, forward, lambda m: type(m).__name__ == NORM_CLASS)


def packed_gate_up(mlp: Any, cache: dict[Any, Any] | None = None) -> torch.Tensor | None:
    """``mlp``'s gate and up weights packed for ``kernels.swiglu`` (made at the first call and kept
    in ``cache``, the model's ``ModelState.gate_up``, while the weights stay the same tensors);
    None where the kernel does not take them: projections other than plain bias-free nn.Linear,
    no Triton, shapes or a device the kernel cannot read."""
    cache = {} if cache is None else cache
    gate, up = mlp.gate_proj, mlp.up_proj
    if not all(type(p) is torch.nn.Linear and p.bias is None for p in (gate, up)):
        return None
    if refused("swiglu", gate.weight.device):
        cache[mlp] = None  # the packed copy's memory back
        return None
    source = (gate.weight.data_ptr(), up.weight.data_ptr(), gate.weight._version, up.weight._version)
    cached = cache.get(mlp)
    if cached is not None and cached[0] == source:
        return cached[1]  # type: ignore[no-any-return]

    packed = None
    if gate.weight.shape == up.weight.shape and gate.weight.shape[0] % swiglu_contract.HALF == 0 and triton_available():
        with torch.no_grad():
            packed = swiglu_contract.pack_gate_up(gate.weight, up.weight)
        if not swiglu_contract.supported(packed[:1], packed):
            packed = None
    cache[mlp] = (source, packed)
    return packed


def use_fused_text_mlp(model: Any, compiler: Callable[..., Any] | None = None) -> int:
    """Run each text MLP's SiLU and product as one kernel (two passes over the largest
    activations, gate and up, instead of three); returns how many MLPs changed. Only MLPs whose
    activation is SiLU change. Each changed MLP also takes its residual into the down
    projection's product (``mlp_residual``). Ops ``swiglu`` and ``silu_kernel`` are read at each
    call from the config in force on the model (``ModelState.config``; decisions 028, 024)."""
    fn = (compiler or (lambda f: torch.compile(f, dynamic=True)))(silu_mul)
    state = state_of(model)

    def activation(self: Any, x: torch.Tensor) -> torch.Tensor:
        """``silu(gate(x)) * up(x)`` as (rows, intermediate)."""
        if state.config.op("swiglu") and x.is_cuda and x.numel() >= EAGER_ROWS * x.shape[-1]:
            packed = packed_gate_up(self, state.gate_up)
            rows = x.reshape(-1, x.shape[-1])
            if packed is not None:
                from triton.runtime.errors import OutOfResources

                from benchcheck.engines.hf.kernels.swiglu_triton import swiglu_packed

                if swiglu_contract.supported(rows, packed):
                    try:
                        return swiglu_packed(rows, packed)
                    except OutOfResources as err:  # TMA, but less shared memory than its tiles need
                        refuse("swiglu", rows.device, err, "cuBLAS for the gate/up products")
        gate, up = self.gate_proj(x), self.up_proj(x)
        gate, up = gate.reshape(-1, gate.shape[-1]), up.reshape(-1, up.shape[-1])  # one rank always
        if plain(gate.shape[0], state):
            return silu_mul(gate, up)
        if state.config.op("silu_kernel") and gate.is_cuda and silu_contract.supported(gate, up):
            from benchcheck.engines.hf.kernels.silu_triton import silu_mul_kernel

            return silu_mul_kernel(gate, up)
        return fn(gate, up)  # type: ignore[no-any-return]

    def forward(self: Any, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(state.activation[self](x)).view(*x.shape[:-1], -1)  # type: ignore[no-any-return]

    def wanted(m: Any) -> bool:
        return type(m).__name__ == MLP_CLASS and getattr(m.config, "hidden_act", None) == "silu"

    for module in model.modules():
        if wanted(module):
            state.activation[module] = types.MethodType(activation, module)
    return _install(model, forward, wanted)


def mlp_residual(mlp: Any, x: torch.Tensor, residual: torch.Tensor, state: ModelState | None = None) -> torch.Tensor:
    """``residual + mlp(x)``; through the fused MLP (``use_fused_text_mlp``, its activation in
    ``state``) with a plain bias-free down projection and op ``residual_epilogue`` in force
    (decision 020), the residual is added in the down projection's product."""
    # The fused MLP's activation, only while its forward is installed (a restore that removes
    # the instance forward, as gpu_screen's plain rows do, gets transformers' sum back).
    act = state.activation.get(mlp) if state is not None and "forward" in vars(mlp) else None
    down = mlp.down_proj
    if act is None or state is None or not state.config.op("residual_epilogue"):
        return residual + mlp(x)  # type: ignore[no-any-return]
    if type(down) is not torch.nn.Linear or down.bias is not None:
        return residual + mlp(x)  # type: ignore[no-any-return]
    out = torch.addmm(residual.reshape(-1, residual.shape[-1]), act(x), down.weight.t())
    return out.view(residual.shape)


def use_fused_text_layers(model: Any) -> int:
    """Run each text decoder layer as transformers does, but its MLP and second residual through
    ``mlp_residual``; returns how many layers changed. (Install after ``use_fused_text_mlp``:
    until then ``mlp_residual`` is transformers' own sum. A scored last layer, ``model.scored``,
    keeps its forward and takes this one for its unscored calls.)"""
    state = state_of(model)

    def forward(self: Any, hidden_states: torch.Tensor, position_embeddings: tuple[torch.Tensor, torch.Tensor],
                attention_mask: torch.Tensor | None = None, position_ids: torch.Tensor | None = None,
                past_key_values: Any = None, use_cache: bool | None = False, **kwargs: Any) -> torch.Tensor:
        # The attention's own residual in its output projection's product (op ``attention_residual``),
        # where the attention is the fused one, which takes it.
        into = state.config.op("attention_residual") and takes_residual(self.self_attn, state)
        if into:
            kwargs[RESIDUAL] = hidden_states
        attended, _ = self.self_attn(hidden_states=self.input_layernorm(hidden_states), attention_mask=attention_mask,
                                     position_ids=position_ids, past_key_values=past_key_values, use_cache=use_cache,
                                     position_embeddings=position_embeddings, **kwargs)
        h = attended if into else hidden_states + attended
        return mlp_residual(self.mlp, self.post_attention_layernorm(h), h, state)

    n = 0
    for module in model.modules():
        if type(module).__name__ != LAYER_CLASS:
            continue
        if module in state.full_forward:  # the scored last layer (model.scored): its unscored calls
            state.full_forward[module] = types.MethodType(forward, module)
        else:
            module.forward = types.MethodType(forward, module)
        n += 1
    return n


ATTENTION_CLASS = "Qwen3VLTextAttention"
RESIDUAL = "benchcheck_residual"  # the keyword the fused attention takes its layer's residual by


def takes_residual(attn: Any, state: ModelState) -> bool:
    """``attn`` runs the fused attention forward (``use_fused_text_attention``), which adds a
    residual given as ``RESIDUAL`` in its output projection's product."""
    bound = vars(attn).get("forward")
    return bound is not None and getattr(bound, "__func__", None) is state.attention_forward


def project_out(o_proj: Any, out: torch.Tensor, residual: torch.Tensor | None) -> torch.Tensor:
    """The output projection of the attention's ``out`` (rows, width), with ``residual`` (the
    layer's input, its shape the projection's output's) added: in the product's epilogue
    (``addmm``, one rounding) where the projection is a plain bias-free linear layer."""
    if residual is None:
        return o_proj(out.contiguous())  # type: ignore[no-any-return]
    if type(o_proj) is not torch.nn.Linear or o_proj.bias is not None:
        return residual + o_proj(out.contiguous())  # type: ignore[no-any-return]
    flat = torch.addmm(residual.reshape(-1, residual.shape[-1]), out.reshape(-1, out.shape[-1]), o_proj.weight.t())
    return flat.view(residual.shape)


def norm_rope(x: torch.Tensor, weight: torch.Tensor, eps: float, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """A q or k projection (batch, length, heads, head_dim) through its per-head RMSNorm and
    the rotary embedding (cos, sin: (batch, length, head_dim)): transformers' ``q_norm`` then
    ``apply_rotary_pos_emb`` (rotate_half, two products and a sum), in one expression."""
    h = rms_norm(x, weight, eps)
    half = h.shape[-1] // 2
    rotated = torch.cat((-h[..., half:], h[..., :half]), dim=-1)
    return h * cos.unsqueeze(2) + rotated * sin.unsqueeze(2)


QKV = ("q_proj", "k_proj", "v_proj")


def _plain_projections(attn: Any) -> list[torch.nn.Linear] | None:
    """``attn``'s q, k and v projections where all three are bias-free ``nn.Linear`` running
    their class's forward: their product is then the weight's alone (a bias, a wrapper, another
    layer type or a forward set on the instance adds to it). Read from the modules' own dicts, not
    through ``Module.__getattr__``: an eager decode step checks every layer."""
    projs = [attn._modules.get(name) for name in QKV]
    plain = all(type(p) is torch.nn.Linear and p._parameters.get("bias") is None and "forward" not in vars(p)
                for p in projs)
    return projs if plain else None


def _hooked(projs: list[torch.nn.Linear]) -> bool:
    """A forward hook would see each projection's own call (its own or one for every module): the
    packed product would skip it."""
    return bool(torch_module._global_forward_hooks or torch_module._global_forward_pre_hooks
                or any(p._forward_hooks or p._forward_pre_hooks for p in projs))


def pack_qkv(attn: Any) -> torch.Tensor | None:
    """Copy ``attn``'s q, k and v weights once into one (Nq + Nk + Nv, width) tensor and point the
    three projections' weights at its row blocks (views: no weight is stored twice, and the weights
    alone hold it: ``packed_qkv`` takes it from them); returns it.
    None, and nothing changed, where they are not bias-free ``nn.Linear`` of one dtype, device and width."""
    projs = _plain_projections(attn)
    if projs is None:
        return None
    weights = [p.weight for p in projs]
    if len({(w.dtype, w.device, w.shape[1]) for w in weights}) != 1:
        return None
    with torch.no_grad():
        packed = torch.cat([w.detach() for w in weights])
    start = 0
    for p, w in zip(projs, weights, strict=True):
        p.weight = torch.nn.Parameter(packed[start:start + w.shape[0]], requires_grad=w.requires_grad)
        start += w.shape[0]
    return packed


def packed_qkv(attn: Any, state: ModelState) -> torch.Tensor | None:
    """``attn``'s q, k and v weights as one (Nq + Nk + Nv, width) tensor, a view of the memory
    ``pack_qkv`` gave them, while its three projections are still bias-free ``nn.Linear`` whose
    weights are that memory's consecutive row blocks; None when none was packed, or a later cast,
    move or load replaced a weight, or a projection was since given a bias or replaced (a wrapper,
    an adapter exposing the same weight: more than the weight's product, which its own forward
    computes); the attention is then forgotten. None too, at that call only, while a forward hook
    is registered on a projection or on every module. The view is taken at each call and never kept:
    nothing but the weights holds their memory, so a cast, move or deep copy that gives them
    tensors of their own leaves no packed copy behind."""
    if attn not in state.qkv:
        return None
    projs = _plain_projections(attn)
    packed = None if projs is None else _row_blocks([p._parameters.get("weight") for p in projs])
    if projs is None or packed is None:
        state.qkv.discard(attn)
        return None
    return None if _hooked(projs) else packed  # a hook may be removed again: the packing is kept


def _row_blocks(weights: list[Any]) -> torch.Tensor | None:
    """The one tensor whose consecutive row blocks ``weights`` are (None where they are not)."""
    first = weights[0]
    if first is None:
        return None
    storage, offset, rows, width = first.untyped_storage().data_ptr(), first.storage_offset(), 0, first.shape[1]
    for w in weights:
        if (w is None or w.dtype != first.dtype or w.device != first.device or w.shape[1] != width
                or not w.is_contiguous() or w.untyped_storage().data_ptr() != storage or w.storage_offset() != offset):
            return None
        offset += w.numel()
        rows += w.shape[0]
    return torch.as_strided(first.detach(), (rows, width), (width, 1))  # as the packed copy was: no grad


def use_fused_text_attention(model: Any, compiler: Callable[..., Any] | None = None) -> int:
    """Run each text attention's q/k norms and rotary embedding as one kernel per tensor
    (eagerly about ten kernels and twenty passes over q and k per layer); the projections, the
    cache update and the attention kernel are transformers' own. Returns how many changed."""
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS
    from transformers.models.qwen3_vl.modeling_qwen3_vl import eager_attention_forward

    fn = (compiler or (lambda f: torch.compile(f, dynamic=True)))(norm_rope)
    state = state_of(model)

    def forward(self: Any, hidden_states: torch.Tensor, position_embeddings: tuple[torch.Tensor, torch.Tensor],
                attention_mask: torch.Tensor | None, past_key_values: Any = None,
                **kwargs: Any) -> tuple[torch.Tensor, torch.Tensor | None]:
        residual = kwargs.pop(RESIDUAL, None)
        input_shape = hidden_states.shape[:-1]
        hidden_shape = (*input_shape, -1, self.head_dim)
        cos, sin = position_embeddings
        decoding = isinstance(past_key_values, ReservedCache) and past_key_values.decoding
        packed = packed_qkv(self, state) if decoding and state.config.op("qkv_packed") else None
        if packed is not None:  # a fixed-shape decode step: one product for the three (op qkv_packed)
            q, k, v = torch.split(torch.nn.functional.linear(hidden_states, packed),
                                  [self.q_proj.out_features, self.k_proj.out_features, self.v_proj.out_features], -1)
            q, k, v = q.view(hidden_shape), k.view(hidden_shape), v.view(hidden_shape)
        else:
            q, k = self.q_proj(hidden_states).view(hidden_shape), self.k_proj(hidden_states).view(hidden_shape)
            v = self.v_proj(hidden_states).view(hidden_shape)
        step = norm_rope if plain(input_shape.numel(), state) else fn  # eager decode steps: plain
        q = step(q, self.q_norm.weight, self.q_norm.variance_epsilon, cos, sin).transpose(1, 2)
        k = step(k, self.k_norm.weight, self.k_norm.variance_epsilon, cos, sin).transpose(1, 2)
        v = v.transpose(1, 2)
        if past_key_values is not None:
            k, v = past_key_values.update(k, v, self.layer_idx)
            if decoding:
                assert attention_mask is not None  # a decode step's mask of the written slots
                out = decode_attention(q, k, v, attention_mask, self.scaling, state.config.op("decode_split"))
                return project_out(self.o_proj, out.reshape(*input_shape, -1), residual), None
        attend = ALL_ATTENTION_FUNCTIONS.get_interface(self.config._attn_implementation, eager_attention_forward)
        out, weights = attend(self, q, k, v, attention_mask, dropout=0.0, scaling=self.scaling, **kwargs)
        return project_out(self.o_proj, out.reshape(*input_shape, -1), residual), weights

    n = _install(model, forward, lambda m: type(m).__name__ == ATTENTION_CLASS)
    for module in model.modules() if n else ():  # packed where this forward runs (op qkv_packed)
        if type(module).__name__ == ATTENTION_CLASS and pack_qkv(module) is not None:
            state.qkv.add(module)
    if n:  # the scored last layer's keys take the same kernel (model.scored)
        state.norm_rope = fn
        state.attention_forward = forward
    return n


def _install(model: Any, forward: Callable[..., Any], wanted: Callable[[Any], bool]) -> int:
    """Bind ``forward`` as the forward of every module ``wanted`` accepts; returns how many."""
    n = 0
    for module in model.modules():
        if wanted(module):
            module.forward = types.MethodType(forward, module)
            n += 1
    return n
