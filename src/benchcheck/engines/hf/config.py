"""``HFConfig``: every knob of the ``hf`` engine in one frozen, hashed record (decision 070).

Each field holds its default and, beside it, why (the numbers are in the decision records under
docs/decisions/ and in docs/PERFORMANCE.md, never here). Fast paths are *ops*, switched on and
off by name as vLLM's ``custom_ops`` strings are: ``ops=("-swiglu", "+varlen_triton")``. An op
that is on is used where the device, dtype and model support it (a CUDA kernel never runs on the
CPU); an op that is off is never used. Unknown names and bad values are one-line errors.

The engine reads its knobs from its config only: no module globals, no attributes set after
construction, no environment variables. ``HFConfig.hash`` (16 hex digits of the knobs' canonical
JSON, the ops resolved to on/off) is written in ``run_log`` and in every row an ``hf`` engine makes
(``engine_config_hash``), so two runs that differ only in a fast path are told apart; two configs
that behave alike (``ops=("+swiglu",)`` and the default) hash alike.

From the CLI: ``--hf-config KEY=VALUE`` (repeatable; ``ops=-swiglu,+pacing``) or
``--hf-config FILE.json`` (an object of the same keys). Importable without torch.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# Every op: its default and why (the decision record, docs/decisions, holds the measurement).
# Default "on": used where it can run (each measured faster or no slower, with the same scores
# within the checks' tolerance: gpu_screen's correctness rows); "cuda": on CUDA only by default,
# ``+name`` also elsewhere where it can run (the CPU runs "varlen" by a reference kernel, for tests);
# "off": measured no faster, kept to be compared (``+name`` turns it on).
OPS: dict[str, tuple[str, str]] = {
    "rms_norm": ("on", "each text RMSNorm compiled into one kernel, CUDA with Triton (decision 001)"),
    "fused_mlp": ("on", "the text MLP's SiLU-times-up fused and its residual in the down projection (decision 024)"),
    "silu_kernel": ("on", "SiLU-times-up as a one-pass Triton kernel, not the compiled function (decision 024)"),
    "swiglu": ("on", "gate/up products with SiLU-times-up in their epilogue, one Triton kernel (decision 028)"),
    "residual_epilogue": ("on", "the MLP's residual added in the down projection's product (decision 020)"),
    "attention_residual": ("off", "the attention's residual added in its output projection's product, as the "
                           "MLP's (decision 020): one addition a layer fewer in prefills and decode steps; no "
                           "faster on the 8B sweep item or the 2B 32-frame step on the H100 (decision 125)"),
    "text_attention": ("on", "the fused text attention forward: decoding without K/V heads repeated (decision 015)"),
    "decode_graphs": ("on", "each batch's decode step captured once as a CUDA graph and replayed (decision 015)"),
    "decode_warm_once": ("on", "a batch's decode step captured without its eager warm-up once a step of as many "
                         "rows was warmed on the engine: the mix's GPU busier (decision 110)"),
    "varlen": ("cuda", "packed families in one unpadded row, variable-length attention (decision 007)"),
    "varlen_triton": ("on", "short packed sequences through the Triton kernel, not FlashAttention-2 (decision 025)"),
    "unpadded": ("on", "short batches that share nothing scored unpadded in the one row (decision 016)"),
    "share_prefixes": ("on", "requests with a common prefix computed once per family (decision 003)"),
    "share_frames": ("on", "one video's questions planned together so they share frames and prefix (decision 022)"),
    "scored_last_layer": ("on", "the last decoder layer at the scored positions only: in scoring forwards (decision "
                          "019) and in a generation's prefill, its keys and values still cached (decision 124)"),
    "vision_rotary": ("on", "the vision tower's q/k rotary as one Triton pass over the fused qkv (decision 010)"),
    "vision_block": ("cuda", "vision blocks: norms compiled, fc1's bias and tanh GELU in its product (decision 102)"),
    "vision_norm_kernel": ("off", "the fused vision blocks' LayerNorms (and the residual adds before them) as one "
                           "Triton pass reading each input once, not the compiled looped reduction: no faster on "
                           "the 2B 32-frame step on the H100 (decision 125)"),
    "vision_pow2": ("off", "the vision tower's images in power-of-two counts per attention call, so cuDNN's plans "
                    "recur: the mix with it was no busier, and it was not timed alone (decision 108)"),
    "visual_no_reads": ("on", "the visual forward's placeholder check and DeepStack additions without their "
                        "device reads (decisions 105, 115): with new_shape_flash the sweep mix busier (decision 116)"),
    "right_prefill": ("on", "a generation batch of unequal rows padded on the right: a causal prefill without a "
                      "mask or K/V heads repeated, as scoring's since decision 004 (decision 106)"),
    "decode_planless": ("on", "eager decode steps of an unpadded batch (few new tokens: no graph) off SDPA's cuDNN "
                        "kernel, which built a plan per new key length, the device waiting (decision 107)"),
    "new_shape_flash": ("on", "a small SDPA shape met first in a generation prefill run without building a cuDNN "
                        "plan (FlashAttention), built when the shape recurs (decision 111): with visual_no_reads "
                        "the sweep mix busier and cheaper (decision 116)"),
    "decode_together": ("on", "a generation batch planned by its K/V slots (decode_batch_tokens), its rows prefilled "
                        "apart in forwards of at most max_batch_tokens and decoded together: a step reads the "
                        "weights once for every row (decision 117)"),
    "decode_join": ("cuda", "a generation batch that more requests follow prefilled and held: the next batch joins "
                    "its reservation where both fit decode_batch_tokens, and both decode together, a step reading "
                    "the weights once for both; 128-token sweep rows 4.4 % faster on the H100, a real answer "
                    "unchanged (decision 129)"),
    "decode_split": ("on", "a decode step's attention as one Triton kernel over spans of the keys (flash decoding) "
                     "instead of batched matrix products: inside a replayed 8B step 13-23 % faster at 1-5 rows "
                     "on the H100 (decision 119)"),
    "graph_fused": ("on", "decode steps captured as CUDA graphs run the compiled norms and q/k norm with rotary, and "
                    "SiLU-times-up as one kernel (op silu_kernel's), as prefills do: the compiled call's host "
                    "cost is paid once at capture, its fewer kernels at every replay (decision 123)"),
    "qkv_packed": ("on", "a fixed-shape decode step's q, k and v projections as one product over one weight whose "
                   "row blocks the three projections' weights are views of (packed once where the fused attention "
                   "is installed, no weight stored twice): fewer, larger products than three small ones "
                   "(decision 131)"),
    "stage_ahead": ("cuda", "a generation batch's host inputs (padding, positions, frames in page-locked memory) "
                    "built on a thread of their own while the batch before it runs, so that the device need not "
                    "wait for them between batches: the sweep's real path cheaper per inference (decision 125)"),
    "launch_thread": ("off", "the engine's device work launched from one thread of the model's own, so thread-local "
                      "caches (cuDNN's attention plans) hit whichever thread calls: no gain on the H200 "
                      "(decision 116)"),
    "pacing": ("off", "launches paced blocks ahead: re-measured no faster, so off (decision 011)"),
    "freeze_gc": ("cuda", "gc.freeze() after the first call: no full scans of the libraries' objects (decision 027)"),
    "decode_shm": ("on", "decoded frames handed back from the worker processes in shared memory (decision 014)"),
}


@dataclass(frozen=True, slots=True)
class HFConfig:
    """The ``hf`` engine's knobs (docs/models_hf.md, "Configuration"). Frozen: a variant is a new
    config (``dataclasses.replace`` or ``with_ops``)."""

    # Most requests in one forward: large enough that a packed blind batch feeds the whole GPU (decision 030).
    max_batch_size: int = 256
    # Most padded tokens in one forward (capped at what fits in half the free device memory) (decision 030).
    max_batch_tokens: int = 65536
    # Requests sorted together by length; None: 8 batches of text, 2 of requests with images (decision 002).
    sort_window: int | None = None
    # Each chunk of a call this many times the one before: the device starts early (decision 012).
    chunk_growth: int = 2
    # Requests in the first chunk; None: chosen by what they carry (decision 013).
    first_chunk: int | None = None
    # Threads that render, tokenize and decode: 2 measured faster than 8 (GIL contention) (decision 002).
    encode_threads: int = 2
    # Image-decoding worker processes; None: half the cores (at most 8) on CUDA, none elsewhere (decision 014).
    decode_processes: int | None = None
    # Bytes of decoded frames kept for the next request that names them (one video's questions) (decision 023).
    frame_memo_bytes: int = 64 << 20
    # Longest prompt of a batch sharing nothing still scored unpadded in one row (op ``unpadded``) (decision 016).
    unpadded_max_tokens: int = 512
    # Blocks the launching thread runs ahead of the device (op ``pacing``) (decision 011).
    pacing_depth: int = 8
    # Longest key sequence the Triton varlen kernel takes (op ``varlen_triton``) (decision 025).
    varlen_triton_max_keys: int = 4096
    # Decode steps between a step's "every row finished" flag and its reading on CUDA: one step
    # queued keeps the device busy, and a stop costs at most this many wasted steps (decision 103).
    decode_lookback: int = 1
    # Most attention FLOPs of one SDPA call that op ``new_shape_flash`` runs without a cuDNN plan
    # when its shape is new: where FlashAttention's extra time over a forward's layers stays below
    # one plan's build, as the 8B's language model measured; its vision tower and the 2B were not
    # measured apart (decision 111).
    new_shape_flash_gflops: int = 700
    # Most K/V slots one generation batch reserves (op ``decode_together``): its rows prefilled apart
    # in forwards of at most max_batch_tokens, then decoded together; capped at what fits in a third
    # of the free device memory (the bound that holds on large devices), never below
    # max_batch_tokens (decision 117).
    decode_batch_tokens: int = 524288
    # Fast paths switched by name: "+name" on, "-name" off (``OPS``); later entries win.
    ops: tuple[str, ...] = field(default=())

    def __post_init__(self) -> None:
        for name in ("max_batch_size", "max_batch_tokens", "chunk_growth", "encode_threads", "pacing_depth",
                     "varlen_triton_max_keys", "new_shape_flash_gflops", "decode_batch_tokens"):
            _positive(name, getattr(self, name))
        for name in ("sort_window", "first_chunk"):
            if getattr(self, name) is not None:
                _positive(name, getattr(self, name))
        for name in ("frame_memo_bytes", "unpadded_max_tokens", "decode_lookback"):
            if _int(name, getattr(self, name)) < 0:
                raise ValueError(f"hf config: {name} must be 0 or more, got {getattr(self, name)}")
        if self.decode_processes is not None and _int("decode_processes", self.decode_processes) < 0:
            raise ValueError(f"hf config: decode_processes must be 0 or more, got {self.decode_processes}")
        if isinstance(self.ops, str) or not isinstance(self.ops, tuple):
            raise ValueError(f"hf config: ops must be a tuple of '+name'/'-name' strings, got {self.ops!r}")
        for op in self.ops:
            _op_name(op)

    # -- ops -----------------------------------------------------------------------------------

    def chosen(self, name: str) -> bool | None:
        """The op ``name`` as the config names it: the last ``+name`` (True) or ``-name`` (False)
        entry, None where no entry names it (its default: ``OPS``)."""
        if name not in OPS:
            raise KeyError(f"hf config: no op named {name!r}")
        on: bool | None = None
        for entry in self.ops:
            if entry[1:] == name:
                on = entry[0] == "+"
        return on

    def op(self, name: str, cuda: bool = True) -> bool:
        """Whether the op ``name`` is on, on CUDA (``cuda``) or elsewhere: as named, else its default."""
        on = self.chosen(name)
        if on is not None:
            return on
        default = OPS[name][0]
        return default == "on" or (default == "cuda" and cuda)

    def resolved_ops(self) -> dict[str, bool | None]:
        """Every op: on, off, or None for a device-dependent default not overridden."""
        out: dict[str, bool | None] = {}
        for name, (default, _) in OPS.items():
            on = self.chosen(name)
            out[name] = on if on is not None else {"on": True, "off": False}.get(default)
        return out

    def with_ops(self, *ops: str) -> HFConfig:
        """This config with ``ops`` appended (they win over earlier entries)."""
        return dataclasses.replace(self, ops=(*self.ops, *ops))

    # -- identity ------------------------------------------------------------------------------

    def canonical(self) -> dict[str, Any]:
        """The knobs as the hash sees them: every field, the ops resolved to {name: on}."""
        d = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "ops"}
        d["ops"] = self.resolved_ops()
        return d

    @property
    def hash(self) -> str:
        """16 hex digits of the canonical JSON: equal for configs that behave alike, in any process."""
        text = json.dumps(self.canonical(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def changed(self) -> dict[str, Any]:
        """The knobs that differ from the defaults (what a log line or a variant row names)."""
        base, mine = HFConfig().canonical(), self.canonical()
        out = {k: v for k, v in mine.items() if k != "ops" and v != base[k]}
        ops = [("+" if on else "-") + n for n, on in mine["ops"].items() if on != base["ops"][n] and on is not None]
        if ops:
            out["ops"] = ops
        return out

    # -- parsing -------------------------------------------------------------------------------

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], where: str = "hf config") -> HFConfig:
        """A config from a mapping of knob names (a JSON object); unknown keys are an error."""
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(d) - known)
        if unknown:
            raise ValueError(f"{where}: no knob named {unknown[0]!r} (knobs: {', '.join(sorted(known))})")
        kw = dict(d)
        if "ops" in kw:
            ops = kw["ops"]
            kw["ops"] = tuple(_split_ops(ops) if isinstance(ops, str) else ops) if ops is not None else ()
        try:
            return cls(**kw)
        except TypeError as e:
            raise ValueError(f"{where}: {e}") from None

    @classmethod
    def parse(cls, args: Sequence[str]) -> HFConfig:
        """The CLI's ``--hf-config`` values: ``KEY=VALUE`` pairs, or one JSON file of them; the
        pairs apply over the file's values in order (``ops`` pairs add to the ops)."""
        d: dict[str, Any] = {}
        ops: list[str] = []
        for arg in args:
            if "=" not in arg:
                path = Path(arg)
                if not path.is_file():
                    raise ValueError(f"--hf-config {arg}: neither KEY=VALUE nor a JSON file")
                try:
                    data = json.loads(path.read_text())
                except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
                    raise ValueError(f"--hf-config {arg}: not a JSON object ({e})") from None
                if not isinstance(data, dict):
                    raise ValueError(f"--hf-config {arg}: not a JSON object of knobs")
                file_ops = data.pop("ops", None)
                if file_ops is not None:
                    ops += _split_ops(file_ops) if isinstance(file_ops, str) else [str(o) for o in file_ops]
                d.update(data)
                continue
            key, value = (s.strip() for s in arg.split("=", 1))
            if key == "ops":
                ops += _split_ops(value)
            else:
                d[key] = _value(value)
        return cls.from_dict({**d, "ops": tuple(ops)}, "--hf-config")


def _split_ops(text: str) -> list[str]:
    return [s.strip() for s in text.split(",") if s.strip()]


def _value(text: str) -> Any:
    """A KEY=VALUE value: JSON where it parses (numbers, null, true), else the text."""
    if text.lower() in ("none", "null"):
        return None
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def _int(name: str, v: Any) -> int:
    if not isinstance(v, int) or isinstance(v, bool):
        raise ValueError(f"hf config: {name} must be an integer, got {v!r}")
    return v


def _positive(name: str, v: Any) -> None:
    if _int(name, v) < 1:
        raise ValueError(f"hf config: {name} must be at least 1, got {v}")


def _op_name(entry: Any) -> str:
    if not isinstance(entry, str) or len(entry) < 2 or entry[0] not in "+-":
        raise ValueError(f"hf config: op {entry!r} is not '+name' or '-name' (ops: {', '.join(OPS)})")
    if entry[1:] not in OPS:
        raise ValueError(f"hf config: no op named {entry[1:]!r} (ops: {', '.join(OPS)})")
    return entry[1:]


DEFAULTS = HFConfig()  # where a lower layer needs a default of the config (one rule, one place)
