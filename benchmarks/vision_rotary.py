"""The vision tower's rotary embedding alone on the GPU: old compiled path vs the one-pass kernel.

At the true Qwen3-VL vision shapes (2B: 16 heads x 64; 8B: 16 heads x 72) and the patches of one
engine call of 32-frame requests (448 patches a 448x256 frame, 32 frames, 24 requests: 344,064
patches), times (CUDA events, median of ``triton.testing.do_bench``):

- ``old``: transformers' ``apply_rotary_pos_emb_vision`` compiled with dynamic=True on the strided
  q/k views of the qkv projection (what the engine ran before, ``hf_fused.compiled_vision_rotary``);
- ``old-static``: the same compiled without dynamic shapes (one kernel per shape);
- ``compile-new(-static)``: the half-split form from the projection output, compiled;
- ``triton rR wW``: ``hf_vision_rotary.qkv_rotary`` with R patches a program and W warps;
- ``copy``: a device copy of the same q/k bytes (the bandwidth limit, cos/sin not counted).

Each is checked first against transformers' eager function on the same GPU inputs (bf16 elements
that differ, max difference) and against a float64 reference (relative error); the kernel's output
buffer is poisoned with NaN first. Then SDPA over the per-image views: q/k/v as the engine hands
them over vs contiguous (images, heads, n, head_dim), and whether the output's transpose to
(patches, hidden) before ``proj`` is a copy.

    PYTHONPATH=src python3 benchmarks/vision_rotary.py --out $OUT
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from benchcheck.engines.hf.kernels.vision_rotary import qkv_rotary_eager
from benchcheck.engines.hf.kernels.vision_rotary_triton import qkv_rotary

SHAPES = {"2B": (16, 64), "8B": (16, 72)}
CONFIGS = [(2, 4), (4, 4), (8, 4), (8, 8), (16, 8)]


def rope_tables(seq: int, dim: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """cos/sin laid out as the tower's (patches, head_dim) float32: the two halves equal."""
    ang = torch.rand(seq, dim // 2, device=device) * 40.0
    return torch.cat([ang.cos(), ang.cos()], -1), torch.cat([ang.sin(), ang.sin()], -1)


def new_form(qkv: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, heads: int) -> torch.Tensor:
    """The half-split form from the projection, for torch.compile: (2, seq, heads, head_dim)."""
    seq = qkv.shape[0]
    x = qkv.view(seq, 3, heads, -1)[:, :2].float()
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    c = cos[:, None, None, :]
    s = sin[:, None, None, :]
    o = torch.cat((x1 * c[..., :half] - x2 * s[..., :half], x2 * c[..., half:] + x1 * s[..., half:]), -1)
    return o.to(qkv.dtype).permute(1, 0, 2, 3).contiguous()


SMOKE = False  # --smoke: the CPU (Triton's interpreter), a few patches, no compiled variants


def bench(fn: Any) -> float:
    if SMOKE:
        t0 = time.perf_counter()
        fn()
        return (time.perf_counter() - t0) * 1e3
    import triton.testing

    return float(triton.testing.do_bench(fn, warmup=25, rep=150, return_mode="median"))


def compare(got: torch.Tensor, ref: torch.Tensor, ref64: torch.Tensor) -> dict[str, float]:
    d = (got.float() - ref.float()).abs()
    return {"differ": float((got != ref).float().mean()), "max_diff": float(d.max()),
            "rel_err_fp64": float((got.double() - ref64).norm() / ref64.norm()),
            "nan": float(got.isnan().any())}


def rotary_rows(label: str, heads: int, dim: int, seq: int, device: torch.device) -> list[dict[str, Any]]:
    from transformers.models.qwen3_vl.modeling_qwen3_vl import apply_rotary_pos_emb_vision

    torch.manual_seed(dim)
    qkv = torch.randn(seq, 3 * heads * dim, device=device, dtype=torch.bfloat16)
    cos, sin = rope_tables(seq, dim, device)
    q, k, _ = qkv.view(seq, 3, heads, dim).permute(1, 0, 2, 3).unbind(0)
    ref_q, ref_k = apply_rotary_pos_emb_vision(q, k, cos, sin)  # transformers, eager, same GPU
    r64q, r64k = qkv_rotary_eager(qkv.double(), cos.double(), sin.double(), heads)
    ref = torch.stack([ref_q, ref_k])
    ref64 = torch.stack([r64q, r64k])
    eager = torch.stack(qkv_rotary_eager(qkv, cos, sin, heads))
    nbytes = 2 * seq * heads * dim * 2 * 2 + 2 * cos.numel() * 4  # q,k read + written, cos/sin read
    rows: list[dict[str, Any]] = []

    def add(name: str, fn: Any, out: torch.Tensor | None, t_compile: float = 0.0) -> None:
        t = bench(fn)
        row = {"shape": label, "variant": name, "ms": t, "TB/s": nbytes / t / 1e9, "compile_s": t_compile}
        if out is not None:
            row.update(compare(out, ref, ref64))
        rows.append(row)
        print(f"  {label} {name:<22} {t:7.3f} ms {row['TB/s']:5.2f} TB/s "
              + " ".join(f"{k}={row[k]:.3g}" for k in ("differ", "max_diff", "rel_err_fp64") if k in row), flush=True)

    add("eager-transformers", lambda: apply_rotary_pos_emb_vision(q, k, cos, sin), ref)
    add("eager-new", lambda: qkv_rotary_eager(qkv, cos, sin, heads), eager)
    compiled = () if SMOKE else (("old", True), ("old-static", False))
    for name, dyn in compiled:
        torch._dynamo.reset()
        fn = torch.compile(apply_rotary_pos_emb_vision, dynamic=dyn)
        t0 = time.perf_counter()
        out = torch.stack(fn(q, k, cos, sin))
        add(name, lambda fn=fn: fn(q, k, cos, sin), out, time.perf_counter() - t0)
    for name, dyn in () if SMOKE else (("compile-new", True), ("compile-new-static", False)):
        torch._dynamo.reset()
        fn = torch.compile(new_form, dynamic=dyn)
        t0 = time.perf_counter()
        out = fn(qkv, cos, sin, heads)
        add(name, lambda fn=fn: fn(qkv, cos, sin, heads), out, time.perf_counter() - t0)
    for r, w in CONFIGS:
        buf = torch.full((2, seq, heads, dim), float("nan"), device=device, dtype=qkv.dtype)
        t0 = time.perf_counter()
        qkv_rotary(qkv, cos, sin, heads, out=buf, rows=r, warps=w)
        if not SMOKE:
            torch.cuda.synchronize()
        add(f"triton r{r} w{w}", lambda r=r, w=w, buf=buf: qkv_rotary(qkv, cos, sin, heads, out=buf, rows=r, warps=w),
            buf, time.perf_counter() - t0)
        # Odd patch counts (masked tail) compute the same.
        tail = seq - 5
        got = torch.stack(qkv_rotary(qkv[:tail], cos[:tail], sin[:tail], heads, rows=r, warps=w))
        rows[-1]["tail_equal"] = bool(torch.equal(got, buf[:, :tail]))
    qk = qkv.view(seq, 3, heads * dim)[:, :2]
    dst = torch.empty((seq, 2, heads * dim), device=device, dtype=qkv.dtype)
    add("copy (limit)", lambda: dst.copy_(qk), None)
    rows[-1]["TB/s"] = (2 * qk.numel() * 2) / rows[-1]["ms"] / 1e9
    return rows


def sdpa_rows(heads: int, dim: int, images: int, n: int, device: torch.device) -> list[dict[str, Any]]:
    """SDPA over the per-image views as the engine calls it vs contiguous (images, heads, n, d)."""
    seq = images * n
    qkv = torch.randn(seq, 3 * heads * dim, device=device, dtype=torch.bfloat16)
    qk = torch.stack(qkv_rotary(qkv, *rope_tables(seq, dim, device), heads))
    v = qkv.view(seq, 3, heads, dim)[:, 2]

    def split(x: torch.Tensor) -> torch.Tensor:
        return x.reshape(images, n, heads, dim).transpose(1, 2)

    views = (split(qk[0]), split(qk[1]), split(v))
    dense = tuple(x.contiguous() for x in views)
    rows = []
    for name, args in (("engine views (BSHD)", views), ("contiguous BHSD", dense)):
        o = F.scaled_dot_product_attention(*args, scale=dim**-0.5)
        flat = o.transpose(1, 2).reshape(seq, -1)
        t = bench(lambda args=args: F.scaled_dot_product_attention(*args, scale=dim**-0.5))
        t_out = bench(lambda o=o: o.transpose(1, 2).reshape(seq, -1).contiguous())
        row = {"variant": name, "sdpa_ms": t, "out_strides": list(o.stride()),
               "out_flat_is_view": flat.data_ptr() == o.data_ptr() and flat.is_contiguous(),
               "out_to_proj_ms": t_out,
               "max_diff_vs_views": float((o - F.scaled_dot_product_attention(*views, scale=dim**-0.5)).abs().max())}
        rows.append(row)
        print(f"  sdpa {name:<22} {t:7.3f} ms; output strides {row['out_strides']}, flat view: "
              f"{row['out_flat_is_view']}, transpose+contiguous {t_out:.3f} ms", flush=True)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--requests", type=int, default=24)
    ap.add_argument("--out", default=os.environ.get("OUT", "bench_out"))
    ap.add_argument("--smoke", action="store_true", help="CPU, Triton's interpreter (TRITON_INTERPRET=1), tiny")
    args = ap.parse_args()
    global SMOKE
    SMOKE = args.smoke
    device = torch.device("cpu" if SMOKE else "cuda")
    frames, patches = (3, 16) if SMOKE else (32, 448)
    seq = args.requests * frames * patches
    name = "cpu" if SMOKE else torch.cuda.get_device_name()
    print(f"{name}; torch {torch.__version__}; {seq} patches", flush=True)
    rows: list[dict[str, Any]] = []
    with torch.inference_mode():
        for label, (heads, dim) in SHAPES.items():
            rows += rotary_rows(label, heads, dim, seq, device)
        sdpa = sdpa_rows(16, 64, args.requests * frames, patches, device)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "vision_rotary.json").write_text(json.dumps({"patches": seq, "rotary": rows, "sdpa": sdpa}, indent=1))
    print("\n| shape | variant | ms | TB/s | bf16 elements != transformers | max diff | rel err vs fp64 |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for r in rows:
        nan = float("nan")
        print(f"| {r['shape']} | {r['variant']} | {r['ms']:.3f} | {r['TB/s']:.2f} | {r.get('differ', nan):.2e} "
              f"| {r.get('max_diff', nan):.3g} | {r.get('rel_err_fp64', nan):.2e} |")


if __name__ == "__main__":
    main()
