"""Probe torch's variable-length flash attention on this GPU (issue 15, decision 007): does it run with
grouped K/V heads and bottom-right causal alignment, does it match a dense masked SDPA, and how
fast is it against the memory-efficient kernel with a tree mask on a blind-sized batch?

    python3 -m benchmarks.varlen_probe
"""

from __future__ import annotations

import inspect
import itertools

import torch
import torch.nn.functional as F

H, HK, D = 32, 8, 128


def reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cq: list[int], ck: list[int]) -> torch.Tensor:
    """Per sequence, float32 math, explicit bottom-right causal mask, K/V heads repeated."""
    out = torch.empty(q.shape, dtype=torch.float32, device=q.device)
    for s in range(len(cq) - 1):
        qs = q[cq[s]:cq[s + 1]].float().transpose(0, 1)
        ks = k[ck[s]:ck[s + 1]].float().transpose(0, 1).repeat_interleave(H // HK, 0)
        vs = v[ck[s]:ck[s + 1]].float().transpose(0, 1).repeat_interleave(H // HK, 0)
        nq, nk = qs.shape[1], ks.shape[1]
        mask = torch.arange(nk, device=q.device)[None] <= torch.arange(nq, device=q.device)[:, None] + (nk - nq)
        with torch.nn.attention.sdpa_kernel([torch.nn.attention.SDPBackend.MATH]):
            out[cq[s]:cq[s + 1]] = F.scaled_dot_product_attention(qs, ks, vs, attn_mask=mask).transpose(0, 1)
    return out


def flash(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cu_q: torch.Tensor, cu_k: torch.Tensor, mq: int,
          mk: int) -> torch.Tensor:
    out: torch.Tensor = torch.ops.aten._flash_attention_forward(q, k, v, cu_q, cu_k, mq, mk, 0.0, True, False,
                                                                scale=D**-0.5)[0]
    return out


def families(n_fam: int, p: int, s: int, m: int) -> tuple[list[int], list[int], list[int], int]:
    """cu_q, cu_k (host) and the gather index of n_fam families of one prefix and m suffixes."""
    cq, ck, idx = [0], [0], list[int]()
    at = 0
    for _ in range(n_fam):
        cq.append(cq[-1] + p)
        ck.append(ck[-1] + p)
        idx += range(at, at + p)
        pre = list(range(at, at + p))
        at += p
        for j in range(m):
            sj = s + (j * 3) % 7
            cq.append(cq[-1] + sj)
            ck.append(ck[-1] + p + sj)
            idx += pre + list(range(at, at + sj))
            at += sj
    return cq, ck, idx, at


def main() -> None:
    if not torch.cuda.is_available():
        raise SystemExit("varlen_probe needs a CUDA device")
    dev = torch.device("cuda")
    print("torch", torch.__version__, torch.cuda.get_device_name(), "flash available:",
          torch.backends.cuda.is_flash_attention_available())
    print(torch.ops.aten._flash_attention_forward.default._schema)
    try:
        from torch.nn.attention import varlen

        print("varlen_attn", inspect.signature(varlen.varlen_attn))
    except ImportError as e:
        print("no torch.nn.attention.varlen:", e)
    g = torch.Generator(device=dev).manual_seed(0)
    cq, ck, idx, t = families(3, 37, 19, 4)
    for dtype in (torch.bfloat16, torch.float16):
        row_k = torch.randn(t, HK, D, device=dev, generator=g).to(dtype)
        row_v = torch.randn(t, HK, D, device=dev, generator=g).to(dtype)
        q = torch.randn(t, H, D, device=dev, generator=g).to(dtype)
        index = torch.tensor(idx, device=dev)
        k, v = row_k[index], row_v[index]
        cu_q = torch.tensor(cq, dtype=torch.int32, device=dev)
        cu_k = torch.tensor(ck, dtype=torch.int32, device=dev)
        mq = max(b - a for a, b in itertools.pairwise(cq))
        mk = max(b - a for a, b in itertools.pairwise(ck))
        ref = reference(q, k, v, cq, ck)
        out = flash(q, k, v, cu_q, cu_k, mq, mk).float()
        rel = ((out - ref).norm() / ref.norm()).item()
        # the same function rounded to dtype by the math kernel (the noise scale of the check)
        print(f"{dtype}: flash varlen vs float32 math rel {rel:.2e}, max abs {(out - ref).abs().max().item():.2e}")
        try:
            from torch.nn.attention import varlen

            got = varlen.varlen_attn(q, k, v, cu_q, cu_k, mq, mk, scale=D**-0.5, window_size=(-1, 0),
                                     enable_gqa=True)
            o2 = (got[0] if isinstance(got, tuple) else got).float()
            print(f"  varlen_attn rel {((o2 - ref).norm() / ref.norm()).item():.2e}")
        except Exception as e:
            print("  varlen_attn failed:", type(e).__name__, str(e)[:200])
    # Timing on a blind-sized batch: 64 families, prefix 101, 4 suffixes of ~57.
    cq, ck, idx, t = families(64, 101, 54, 4)
    dtype = torch.bfloat16
    q = torch.randn(t, H, D, device=dev, dtype=dtype)
    rk = torch.randn(t, HK, D, device=dev, dtype=dtype)
    rv = torch.randn(t, HK, D, device=dev, dtype=dtype)
    index = torch.tensor(idx, device=dev)
    cu_q = torch.tensor(cq, dtype=torch.int32, device=dev)
    cu_k = torch.tensor(ck, dtype=torch.int32, device=dev)
    mq = max(b - a for a, b in itertools.pairwise(cq))
    mk = max(b - a for a, b in itertools.pairwise(ck))
    width = t // 64
    b = 64
    qd = torch.randn(b, H, width, D, device=dev, dtype=dtype)
    kd = torch.randn(b, HK, width, D, device=dev, dtype=dtype)
    vd = torch.randn(b, HK, width, D, device=dev, dtype=dtype)
    row = -(-width // 16) * 16
    mask = torch.full((b, width, row), float("-inf"), dtype=dtype, device=dev)[..., :width]
    mask.masked_fill_(torch.ones(width, width, dtype=torch.bool, device=dev).tril(), 0.0)
    from torch.nn.attention import SDPBackend, sdpa_kernel

    def dense() -> torch.Tensor:
        kk = kd[:, :, None].expand(b, HK, H // HK, width, D).reshape(b, H, width, D)
        vv = vd[:, :, None].expand(b, HK, H // HK, width, D).reshape(b, H, width, D)
        with sdpa_kernel([SDPBackend.EFFICIENT_ATTENTION]):
            return F.scaled_dot_product_attention(qd, kk, vv, attn_mask=mask[:, None])

    def var() -> torch.Tensor:
        return flash(q, rk.index_select(0, index), rv.index_select(0, index), cu_q, cu_k, mq, mk)

    for name, fn in (("dense masked MEA + repeat_kv", dense), ("gather + flash varlen", var),
                     ("dense masked MEA + repeat_kv", dense), ("gather + flash varlen", var)):
        for _ in range(5):
            fn()
        torch.cuda.synchronize()
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        for _ in range(50):
            fn()
        e1.record()
        torch.cuda.synchronize()
        print(f"{name}: {e0.elapsed_time(e1) / 50:.3f} ms a layer ({t} tokens, {len(idx)} keys)")


if __name__ == "__main__":
    main()
