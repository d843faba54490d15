"""What the candidate changes to one 8B decoder layer are worth at the one-frame workload's batch
shape (issue 15): each timed against the way the engine runs it now, in one run.

A big one-frame batch is 256 requests right-padded to ~256 tokens (65,536 token rows). Per layer
the engine runs q, k, v, o, gate, up and down as separate matrix products, the residual additions
as their own kernels, and the attention as SDPA's causal kernel over the padded rows. Rows:

  qkv        q, k, v as three products            vs one product with the weights concatenated
  gate_up    gate and up as two products           vs one product (and SiLU-times-up on its halves)
  o_res      o product, then the residual added    vs ``addmm`` (the addition in the product's epilogue)
  down_res   the same for the down projection
  attn       SDPA causal over padded (256, 256)    vs FlashAttention's variable-length kernel over
             the real tokens only, and cuDNN's with ragged offsets, K/V heads grouped or expanded,
             the memory-efficient kernel's variable length, FlexAttention, and the real tokens
             padded for the attention alone and gathered back (when this torch runs them; each
             checked against FlashAttention's output)
  silu       SiLU-times-up compiled vs the one-pass Triton kernel (``hf_silu``) vs an addition
             moving the same bytes (the memory's rate)
  triton     ``hf_varlen_triton``'s kernel (block sizes, warps, stages) vs FlashAttention-2's
             variable-length kernel at the packed rows the engine plans: one-frame prompts alone,
             blind families (4 permutations after a shared prefix), 32-frame families (3
             questions after a video's frames); each checked against FlashAttention's output
             (``--triton-only``: the peak and these rows alone)
  swiglu     gate and up through cuBLAS then the one-pass SiLU kernel (the engine before decision 028)
             vs ``hf_swiglu``'s one Triton kernel over the packed weights with SiLU-times-up in
             the products' epilogue, at each of its tile configurations and then tuned, timed in
             alternating sustained rounds (the board's clock falls under its power cap as a run
             goes on), at the one-frame batch, the start-up ramp's batch and the 2B model's
             width; each checked against the float32 products (``--swiglu-only``: the peak and
             these rows alone)
  peak       a bf16 8192^3 product (the hardware's practical rate in this run)
  lt ...     the product rows again with cuBLASLt as torch's preferred BLAS library (``--lt``)

Each row: milliseconds a call (median of ``--iters`` after warm-up, CUDA events) and, for
products, TFLOP/s. Run (GPU):  PYTHONPATH=src python3 -m benchmarks.lm_kernels --out $OUT
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections.abc import Callable
from functools import partial
from pathlib import Path

import torch
import torch.nn.functional as F

HIDDEN, INTER, HEADS, KV_HEADS, HEAD_DIM = 4096, 12288, 32, 8, 128  # Qwen3-VL-8B's text model


def timed(fn: Callable[[], object], iters: int) -> float:
    """Median milliseconds of one call."""
    for _ in range(3):
        fn()
    times = []
    for _ in range(iters):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return float(statistics.median(times))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=256, help="requests in the batch")
    ap.add_argument("--width", type=int, default=256, help="padded row width (tokens)")
    ap.add_argument("--mean-length", type=int, default=248, help="mean real tokens a row (the rest is padding)")
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--lt", action="store_true", help="the product rows again under cuBLASLt")
    ap.add_argument("--triton-only", action="store_true", help="the peak and the Triton attention rows alone")
    ap.add_argument("--swiglu-only", action="store_true", help="the peak and the gate/up product rows alone")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("lm_kernels needs a CUDA device")
    torch.manual_seed(0)
    t = args.rows * args.width
    results: dict[str, float] = {}

    def row(name: str, ms: float, flops: float = 0.0) -> None:
        results[name] = ms
        rate = f"{flops / ms / 1e9:8.1f} TFLOP/s" if flops else ""
        print(f"  {name:34s} {ms:9.3f} ms {rate}", flush=True)

    peak(row, args.iters)
    if args.swiglu_only:
        swiglu_rows(row, args.rows * args.mean_length, args.iters)
        args.triton_only = True  # nothing else
    else:
        triton_rows(row, args)
    if not args.triton_only:
        products(row, t, args.iters)
    if args.lt and not args.triton_only:
        chosen = torch.backends.cuda.preferred_blas_library()
        torch.backends.cuda.preferred_blas_library("cublaslt")
        try:
            products(row, t, args.iters, tag="lt ")
        finally:
            torch.backends.cuda.preferred_blas_library(chosen)
    if not args.triton_only:
        attention(row, args)
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "lm_kernels.json").write_text(json.dumps(
            {"rows": args.rows, "width": args.width, "ms": results, "device": torch.cuda.get_device_name()}, indent=1))


Row = Callable[..., None]
DEV, DT = torch.device("cuda"), torch.bfloat16


def w(n_out: int, n_in: int) -> torch.Tensor:
    return torch.randn(n_out, n_in, device=DEV, dtype=DT).mul_(n_in**-0.5)


def peak(row: Row, iters: int) -> None:
    big = torch.randn(8192, 8192, device=DEV, dtype=DT)
    row("peak 8192^3", timed(lambda: big @ big, iters), 2 * 8192**3)


def products(row: Row, t: int, iters: int, tag: str = "") -> None:
    def row_(name: str, ms: float, flops: float = 0.0) -> None:
        row(tag + name, ms, flops)

    x = torch.randn(t, HIDDEN, device=DEV, dtype=DT)
    wq, wk, wv = w(HEADS * HEAD_DIM, HIDDEN), w(KV_HEADS * HEAD_DIM, HIDDEN), w(KV_HEADS * HEAD_DIM, HIDDEN)
    wqkv = torch.cat([wq, wk, wv])
    f_qkv = 2 * t * HIDDEN * wqkv.shape[0]
    row_("qkv: three products", timed(lambda: (F.linear(x, wq), F.linear(x, wk), F.linear(x, wv)), iters), f_qkv)
    row_("qkv: one product", timed(lambda: F.linear(x, wqkv), iters), f_qkv)
    row_("  q alone", timed(lambda: F.linear(x, wq), iters), 2 * t * HIDDEN * wq.shape[0])
    row_("  k alone", timed(lambda: F.linear(x, wk), iters), 2 * t * HIDDEN * wk.shape[0])

    wg, wu = w(INTER, HIDDEN), w(INTER, HIDDEN)
    wgu = torch.cat([wg, wu])
    silu_mul = torch.compile(lambda g, u: F.silu(g) * u, dynamic=True)
    f_gu = 2 * t * HIDDEN * 2 * INTER

    def two() -> torch.Tensor:
        return silu_mul(F.linear(x, wg), F.linear(x, wu))  # type: ignore[no-any-return]

    def one() -> torch.Tensor:
        gu = F.linear(x, wgu)
        return silu_mul(gu[:, :INTER], gu[:, INTER:])  # type: ignore[no-any-return]

    row_("gate_up: two products + silu*up", timed(two, iters), f_gu)
    row_("gate_up: one product + silu*up", timed(one, iters), f_gu)
    g0, u0 = F.linear(x, wg), F.linear(x, wu)
    row_("  silu*up alone", timed(lambda: silu_mul(g0, u0), iters))
    silu_rows(row_, g0, u0, silu_mul, iters)

    wo, wd = w(HIDDEN, HEADS * HEAD_DIM), w(HIDDEN, INTER)
    res = torch.randn(t, HIDDEN, device=DEV, dtype=DT)
    a = torch.randn(t, INTER, device=DEV, dtype=DT)
    row_("o_res: product, then add", timed(lambda: res + F.linear(x, wo), iters), 2 * t * HIDDEN * HIDDEN)
    row_("o_res: addmm", timed(lambda: torch.addmm(res, x, wo.t()), iters), 2 * t * HIDDEN * HIDDEN)
    row_("down: product alone", timed(lambda: F.linear(a, wd), iters), 2 * t * INTER * HIDDEN)
    row_("down_res: product, then add", timed(lambda: res + F.linear(a, wd), iters), 2 * t * INTER * HIDDEN)
    row_("down_res: addmm", timed(lambda: torch.addmm(res, a, wd.t()), iters), 2 * t * INTER * HIDDEN)
    row_("  add alone", timed(lambda: res + x, iters))
    diff = (torch.addmm(res, a, wd.t()).float() - (res + F.linear(a, wd)).float()).abs().max().item()
    print(f"  addmm vs product+add, max |diff| {diff:.3e}", flush=True)


def silu_rows(row: Row, g: torch.Tensor, u: torch.Tensor, compiled: Callable[..., torch.Tensor],
              iters: int) -> None:
    """SiLU-times-up against the memory's rate: the same bytes moved by an addition (2 reads, 1
    write), and the one-pass Triton kernel (``hf_silu``) checked against the compiled one."""
    gb = 3 * g.numel() * g.element_size() / 1e9
    for name, fn in (("  add, same bytes", lambda: g + u), ("  silu*up compiled", lambda: compiled(g, u))):
        ms = timed(fn, iters)
        row(name, ms)
        print(f"    {gb / ms:.2f} TB/s", flush=True)
    try:
        from benchcheck.engines.hf.kernels.silu_triton import silu_mul_kernel
    except ImportError as e:
        print(f"  silu*up triton: {e}")
        return
    diff = (silu_mul_kernel(g, u).float() - compiled(g, u).float()).abs().max().item()
    for block, warps in ((1024, 4), (2048, 8), (4096, 8), (8192, 16)):
        ms = timed(partial(silu_mul_kernel, g, u, block=block, warps=warps), iters)
        row(f"  silu*up triton {block}/{warps}", ms)
        print(f"    {gb / ms:.2f} TB/s", flush=True)
    print(f"    triton vs compiled max |diff| {diff:.3e}", flush=True)


def swiglu_rows(row: Row, t: int, iters: int) -> None:
    """The gate/up products and SiLU-times-up the engine's way before decision 028 (cuBLAS, then
    ``hf_silu``'s one pass) against ``hf_swiglu``'s packed kernel at the one-frame batch (``t``
    token rows), the start-up ramp's and the 2B model's width."""
    for label, rows, hidden, inter in (("8B one-frame batch", t, HIDDEN, INTER), ("8B ramp batch", 4096, HIDDEN, INTER),
                                       ("2B 32-frame batch", 32768, 2048, 6144)):
        swiglu_shape(row, label, rows, hidden, inter, iters)
        torch.cuda.empty_cache()


def swiglu_shape(row: Row, label: str, rows: int, hidden: int, inter: int, iters: int, rounds: int = 4) -> None:
    """One shape: each tile configuration once (and the first with one program a tile instead of
    persistent ones), then ``rounds`` alternating sustained timings of cuBLAS and the tuned
    kernel (the median of their medians is the row: the board's clock falls under its power cap
    as a run goes on); the largest difference of each way from the float32 products' SiLU-times-up
    on 1,024 rows."""
    from benchcheck.engines.hf.kernels import swiglu_triton as hf_swiglu_kernel
    from benchcheck.engines.hf.kernels.silu_triton import silu_mul_kernel
    from benchcheck.engines.hf.kernels.swiglu import pack_gate_up
    from benchcheck.engines.hf.kernels.swiglu_triton import CONFIGS, swiglu_packed

    x = torch.randn(rows, hidden, device=DEV, dtype=DT)
    wg, wu = w(inter, hidden), w(inter, hidden)
    packed = pack_gate_up(wg, wu)
    flops = 2 * rows * hidden * 2 * inter

    def cublas() -> torch.Tensor:
        return silu_mul_kernel(F.linear(x, wg), F.linear(x, wu))

    def fused() -> torch.Tensor:
        return swiglu_packed(x, packed)

    for config in CONFIGS:
        row(f"  packed {'/'.join(map(str, config))}", timed(partial(swiglu_packed, x, packed, config), iters),
            flops)
    row(f"  packed {'/'.join(map(str, CONFIGS[0]))}, one program a tile",
        timed(lambda: swiglu_packed(x, packed, CONFIGS[0], programs=1 << 30), iters), flops)
    fused()  # the tuner's first call
    picked = [str(c) for c in hf_swiglu_kernel.swiglu_tuned.cache.values()]
    times: dict[str, list[float]] = {"cublas": [], "fused": []}
    for _ in range(rounds):
        times["cublas"].append(timed(cublas, 3 * iters))
        times["fused"].append(timed(fused, 3 * iters))
    row(f"swiglu {label}: cuBLAS + silu pass", statistics.median(times["cublas"]), flops)
    row(f"swiglu {label}: packed, tuned", statistics.median(times["fused"]), flops)
    rounded = {k: [round(v, 3) for v in times[k]] for k in times}
    print(f"    rounds cuBLAS {rounded['cublas']} packed {rounded['fused']}; tuned: {picked[-1] if picked else '?'}",
          flush=True)
    part = slice(0, 1024)
    want = F.silu(x[part].float() @ wg.float().T) * (x[part].float() @ wu.float().T)
    for name, got in (("cuBLAS + silu", cublas()[part]), ("packed", fused()[part])):
        diff = (got.float() - want).abs().max().item()
        print(f"    {name} vs float32 products: max |diff| {diff:.3e}", flush=True)


def triton_rows(row: Row, args: argparse.Namespace) -> None:
    """FlashAttention-2's variable-length kernel against ``hf_varlen_triton``'s in each
    configuration, over the packed rows the engine plans for three workloads (8B heads)."""
    gen = torch.Generator().manual_seed(2)

    def lengths(n: int, lo: int, hi: int) -> list[int]:
        return torch.randint(lo, hi + 1, (n,), generator=gen).tolist()

    def families(prefixes: list[int], members: int, lo: int, hi: int) -> list[tuple[int, int, list[int]]]:
        out, at = [], 0
        for p in prefixes:
            suffixes = lengths(members, lo, hi)
            out.append((at, p, suffixes))
            at += p + sum(suffixes)
        return out

    shapes = {
        "one frame, 256 alone (240-256)": families([0] * args.rows, 1, args.mean_length - 8, args.mean_length + 8),
        "blind, 256 x (prefix ~101 + 4 x ~57)": families(lengths(256, 90, 112), 4, 40, 75),
        "32 frames, 16 x (prefix ~3650 + 3 x ~90)": families(lengths(16, 3600, 3700), 3, 50, 140),
    }
    for label, fams in shapes.items():
        varlen_rows(row, label, fams, args.iters)


def varlen_rows(row: Row, label: str, fams: list[tuple[int, int, list[int]]], iters: int) -> None:
    """One packed row's plan: FlashAttention-2, then each Triton configuration."""
    from benchcheck.engines.hf.attention.varlen import build_plan, flash_varlen
    from benchcheck.engines.hf.kernels.varlen_triton import CONFIGS, varlen_attention

    plan = build_plan(fams, DEV)
    t = max(start + prefix + sum(s) for start, prefix, s in fams)
    q = torch.randn(t, HEADS, HEAD_DIM, device=DEV, dtype=DT)
    k = torch.randn(t, KV_HEADS, HEAD_DIM, device=DEV, dtype=DT)
    v = torch.randn_like(k)
    if plan.kv_index is not None:
        k, v = k.index_select(0, plan.kv_index), v.index_select(0, plan.kv_index)
    cq, ck = plan.host_cu_q.tolist(), plan.host_cu_k.tolist()
    pairs = sum((cq[i + 1] - cq[i]) * (ck[i + 1] - ck[i]) - (cq[i + 1] - cq[i]) * (cq[i + 1] - cq[i] - 1) / 2
                for i in range(len(cq) - 1))
    flops = 4 * HEADS * HEAD_DIM * pairs
    print(f"  {label}: {len(cq) - 1} sequences, {cq[-1]} queries, {ck[-1]} keys", flush=True)
    scale = HEAD_DIM**-0.5
    flash = flash_varlen(q, k, v, plan, scale)
    row(f"varlen {label}: flash", timed(lambda: flash_varlen(q, k, v, plan, scale), iters), flops)
    for config in (*CONFIGS, None):
        def run(config: tuple[int, int, int, int] | None = config) -> torch.Tensor:
            return varlen_attention(q, k, v, plan, scale, config=config)
        name = "/".join(map(str, config)) if config else "tuned (the engine's)"
        try:
            diff = (run().float() - flash.float()).abs().max().item()
            row(f"  triton {name}", timed(run, iters), flops)
            print(f"    max |diff| vs flash {diff:.3e}", flush=True)
        except Exception as e:  # a configuration this GPU cannot compile is a row we skip
            print(f"  triton {name}: {type(e).__name__}: {str(e)[:160]}", flush=True)


def hybrid_attention(row: Row, qv: torch.Tensor, kv: torch.Tensor, vv: torch.Tensor, lengths: torch.Tensor,
                     width: int, flash: torch.Tensor, flops: float, iters: int) -> None:
    """The packed row's real tokens copied into right-padded (rows, width) buffers, SDPA's causal
    kernel (cuDNN) over them, the real tokens' outputs gathered back: what padding for the
    attention alone would cost, each part and the whole."""
    b = lengths.numel()
    pos = torch.cat([torch.arange(int(n)) + i * width for i, n in enumerate(lengths.tolist())]).to(DEV)

    def pad(x: torch.Tensor) -> torch.Tensor:
        out = x.new_zeros(b * width, *x.shape[1:])
        return out.index_copy_(0, pos, x)

    def attend(qp: torch.Tensor, kp: torch.Tensor, vp: torch.Tensor) -> torch.Tensor:
        q4, k4, v4 = (t.view(b, width, *t.shape[1:]).transpose(1, 2) for t in (qp, kp, vp))
        return F.scaled_dot_product_attention(q4, k4, v4, is_causal=True, enable_gqa=True, scale=HEAD_DIM**-0.5)

    def whole() -> torch.Tensor:
        o = attend(pad(qv), pad(kv), pad(vv))
        return o.transpose(1, 2).reshape(b * width, *qv.shape[1:]).index_select(0, pos)

    qp, kp, vp = pad(qv), pad(kv), pad(vv)
    o = attend(qp, kp, vp)
    row("  pad q, k, v", timed(lambda: (pad(qv), pad(kv), pad(vv)), iters))
    row("  attend padded (BLHD strides)", timed(lambda: attend(qp, kp, vp), iters), flops)
    row("  gather outputs", timed(lambda: o.transpose(1, 2).reshape(b * width, *qv.shape[1:]).index_select(0, pos),
                                  iters))
    diff = (whole().float() - flash.float()).abs().max().item()
    row("attn: pad, cuDNN causal, gather", timed(whole, iters), flops)
    print(f"    max |diff| vs flash varlen {diff:.3e}", flush=True)


def attention(row: Row, args: argparse.Namespace) -> None:
    iters = args.iters
    b, L = args.rows, args.width
    q = torch.randn(b, HEADS, L, HEAD_DIM, device=DEV, dtype=DT)
    k = torch.randn(b, KV_HEADS, L, HEAD_DIM, device=DEV, dtype=DT)
    v = torch.randn_like(k)
    attn_flops = 4 * b * HEADS * HEAD_DIM * args.mean_length**2 / 2  # causal, real tokens only
    row("attn: SDPA causal, padded, gqa", timed(
        lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True), iters), attn_flops)
    kx, vx = k.repeat_interleave(HEADS // KV_HEADS, 1), v.repeat_interleave(HEADS // KV_HEADS, 1)
    row("attn: SDPA causal, padded, kv expanded", timed(
        lambda: F.scaled_dot_product_attention(q, kx, vx, is_causal=True), iters), attn_flops)
    gen = torch.Generator().manual_seed(1)
    lengths = torch.randint(args.mean_length - 8, min(L, args.mean_length + 8) + 1, (b,), generator=gen)
    cu = torch.zeros(b + 1, dtype=torch.int32)
    cu[1:] = lengths.cumsum(0)
    total, cu_d = int(cu[-1]), cu.to(DEV)
    qv = torch.randn(total, HEADS, HEAD_DIM, device=DEV, dtype=DT)
    kv = torch.randn(total, KV_HEADS, HEAD_DIM, device=DEV, dtype=DT)
    vv = torch.randn_like(kv)
    mx = int(lengths.max())
    try:
        row("attn: flash varlen, real tokens", timed(lambda: torch.ops.aten._flash_attention_forward(
            qv, kv, vv, cu_d, cu_d, mx, mx, 0.0, True, False, scale=HEAD_DIM**-0.5), iters), attn_flops)
    except Exception as e:  # a kernel this torch lacks is a row we skip
        print(f"  flash varlen: {type(e).__name__}: {str(e)[:120]}")
    try:
        flash = torch.ops.aten._flash_attention_forward(qv, kv, vv, cu_d, cu_d, mx, mx, 0.0, True, False,
                                                        scale=HEAD_DIM**-0.5)[0]
    except Exception:  # no reference for the ragged rows' check
        return
    hybrid_attention(row, qv, kv, vv, lengths, L, flash, attn_flops, iters)
    kvx, vvx = kv.repeat_interleave(HEADS // KV_HEADS, 1), vv.repeat_interleave(HEADS // KV_HEADS, 1)
    try:  # the memory-efficient (CUTLASS) kernel, variable length, K/V expanded, causal from the top left
        def efficient() -> torch.Tensor:
            return torch.ops.aten._efficient_attention_forward(  # type: ignore[no-any-return]
                qv[None], kvx[None], vvx[None], None, cu_d, cu_d, mx, mx, 0.0, 1, False, scale=HEAD_DIM**-0.5)[0][0]
        diff = (efficient().float() - flash.float()).abs().max().item()
        row("attn: efficient varlen, kv expanded", timed(efficient, iters), attn_flops)
        print(f"    max |diff| vs flash varlen {diff:.3e}", flush=True)
    except Exception as e:
        print(f"  efficient varlen: {type(e).__name__}: {str(e)[:160]}")
    # cuDNN's ragged (nested) layout: (tokens, heads, dim) with cumulative lengths; grouped K/V
    # heads as they are, or expanded to the query heads.
    for label, kk, vk in (("gqa", kv, vv), ("kv expanded", kvx, vvx)):
        def ragged(kk: torch.Tensor = kk, vk: torch.Tensor = vk) -> torch.Tensor:
            return torch.ops.aten._cudnn_attention_forward(  # type: ignore[no-any-return]
                qv, kk, vk, None, cu_d, cu_d, mx, mx, False, 0.0, True, False, scale=HEAD_DIM**-0.5)[0]
        try:
            out = ragged()
            diff = (out.float() - flash.float()).abs().max().item()
            row(f"attn: cuDNN ragged, {label}", timed(ragged, iters), attn_flops)
            print(f"    out {tuple(out.shape)}, max |diff| vs flash varlen {diff:.3e}", flush=True)
        except Exception as e:
            print(f"  cuDNN ragged, {label}: {type(e).__name__}: {str(e)[:160]}")
    row("  k/v expanded (repeat_interleave)", timed(
        lambda: (kv.repeat_interleave(HEADS // KV_HEADS, 1), vv.repeat_interleave(HEADS // KV_HEADS, 1)), iters))
    try:  # FlexAttention over the packed row with a document-causal block mask (built once a forward)
        from torch.nn.attention.flex_attention import create_block_mask, flex_attention

        doc = torch.repeat_interleave(torch.arange(b), lengths).to(DEV)

        def causal_doc(_b: object, _h: object, qi: torch.Tensor, ki: torch.Tensor) -> torch.Tensor:
            return (doc[qi] == doc[ki]) & (qi >= ki)

        mask = create_block_mask(causal_doc, None, None, total, total, device=DEV)
        row("  flex block mask (once a forward)", timed(
            lambda: create_block_mask(causal_doc, None, None, total, total, device=DEV), iters))
        flex = torch.compile(flex_attention, dynamic=False)
        q4, k4, v4 = (t.transpose(0, 1)[None] for t in (qv, kv, vv))

        def run_flex() -> torch.Tensor:
            return flex(q4, k4, v4, block_mask=mask, enable_gqa=True, scale=HEAD_DIM**-0.5)
        diff = (run_flex()[0].transpose(0, 1).float() - flash.float()).abs().max().item()
        row("attn: flex document-causal, gqa", timed(run_flex, iters), attn_flops)
        print(f"    max |diff| vs flash varlen {diff:.3e}", flush=True)
    except Exception as e:
        print(f"  flex: {type(e).__name__}: {str(e)[:160]}")


if __name__ == "__main__":
    main()
