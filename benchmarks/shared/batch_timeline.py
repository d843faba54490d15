"""Where a generation batch of the ``hf`` engine leaves the device waiting: a few marks per batch.

The profiler shows itself in a mix of nine calling threads (decision 108), so this records only
host timestamps and CUDA events at a batch's phase boundaries, through hooks around the engine's
own functions (none of the engine's code changes): ``upload`` (the batch's start, inside the
engine's lock), ``greedy_start`` (the prefill's call), each decode step's call that is not a
replay and each of its forwards (a graph's warm-up, its capture), the loop's end (or failure).
Inside the prefill, hooks on the model's own modules (``PARTS``, put on the first time a model
is seen) mark the start and end of the vision tower, of each of its blocks, of the language
model and of each decoder layer: the prefill's host time split into the tower's set-up (patch
embedding, position inputs), its first block (where a new shape's cuDNN plan is built, decision
107) and the others, the merge of its features (transformers' placeholder check and scatter,
device reads unless op ``visual_no_reads``), the language model's set-up, its first layer and
the others, the stretches between layers (DeepStack's additions after the first ones, device
reads unless ``visual_no_reads``) and the tail, each with the device's time beside it (``parts``).
Each event's device time is placed on the host's clock through one reference event taken with
the device drained (its host time read after the drain returns: device times run late by that
wake-up, microseconds); events are read when the call that made them has returned (its tokens
read: its events done), never sooner. An event is recorded just before its host time is read,
so a lag can be a few microseconds below zero.

Per mark: host ms from the batch's start, the launching thread's CPU ms, and, where an event
was recorded (not while a stream captures), the ms at which the device reached that point. From
those, per phase: how long the host took, the device's lag behind the host at the phase's end
(near zero: the device had caught up, it waited for the host), and the most the device can have
waited inside the batch (``phases``). The allocator's retries and whole-device syncs are counted
per batch too (``torch.cuda.memory_stats``): a retry frees cached blocks after a
failed allocation and waits for the whole device.
"""

from __future__ import annotations

import contextlib
import json
import statistics
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from pathlib import Path
from typing import Any

import torch

# Modules marked inside a prefill, by class name: (label before its forward, label after it).
PARTS: dict[str, tuple[str, str]] = {
    "Qwen3VLVisionModel": ("vision", "vision_done"), "Qwen3VLVisionBlock": ("vblock_in", "vblock"),
    "Qwen3VLTextModel": ("lm", "lm_done"), "Qwen3VLTextDecoderLayer": ("layer_in", "layer")}
# The allocator's counters worth a batch's delta (``torch.cuda.memory_stats`` keys).
MEM_KEYS = ("num_alloc_retries", "num_sync_all_streams", "num_device_alloc", "num_device_free")
NAN = float("nan")


class Recorder:
    """Marks of the batches each thread runs, written as JSON lines by ``flush``."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.local = threading.local()
        self.guard = threading.Lock()
        self.ref: tuple[Any, float] | None = None  # (event, host seconds) taken with the device drained
        self.cuda = torch.cuda.is_available()
        self.handles: list[Any] = []  # the module hooks (``hook_parts``), removed by ``close``
        # The batches of the call in progress, where the caller opened one (``call``).
        self.calls: ContextVar[list[dict[str, Any]] | None] = ContextVar(f"timeline_{id(self)}", default=None)

    # -- recording (the engine's threads) ------------------------------------------------------

    def _reference(self) -> None:
        with self.guard:
            if self.ref is None:
                torch.cuda.synchronize()
                ev = torch.cuda.Event(enable_timing=True)
                ev.record()
                ev.synchronize()
                self.ref = (ev, time.perf_counter())

    def begin(self, rows: int, label: str) -> None:
        if self.cuda and self.ref is None:
            self._reference()
        rec = {"rows": rows, "t0": time.perf_counter(), "c0": time.thread_time(), "marks": [], "mem0": self._mem()}
        self.local.batch = rec
        self._pending().append(rec)
        self.mark(label)

    @contextlib.contextmanager
    def call(self) -> Iterator[None]:
        """Inside the block, batches are the block's call's wherever they launch (an engine with op
        ``launch_thread`` launches on a thread of its own, and takes the caller's context along):
        ``flush`` in the block writes them. Outside any block, a thread's batches are its own."""
        token = self.calls.set([])
        try:
            yield
        finally:
            self.calls.reset(token)

    def _pending(self) -> list[dict[str, Any]]:
        mine = self.calls.get()
        if mine is not None:
            return mine
        if not hasattr(self.local, "pending"):
            self.local.pending = []
        return self.local.pending  # type: ignore[no-any-return]

    def mark(self, label: str, event: bool = True) -> None:
        rec = getattr(self.local, "batch", None)
        if rec is None:
            return
        ev = None
        if event and self.cuda and not torch.cuda.is_current_stream_capturing():
            ev = torch.cuda.Event(enable_timing=True)
            ev.record()
        rec["marks"].append((label, time.perf_counter(), ev, self._stream(), time.thread_time()))

    def end(self, failed: bool = False) -> None:
        rec = getattr(self.local, "batch", None)
        if rec is not None:
            self.mark("failed" if failed else "loop_end")
            rec["mem1"] = self._mem()
            self.local.batch = None

    def flush(self, ids: list[str]) -> None:
        """The call's batches (``call``; else this thread's) since the last flush, resolved (their
        events are done once the call that made them returned) and written with the call's first
        request id."""
        mine = self._pending()
        pending = list(mine)
        mine.clear()
        lines = []
        # A record that never reached the loop's end (a scoring call's collate) is not a batch.
        for rec in (r for r in pending if "mem1" in r):
            marks = []
            for label, h, ev, stream, cpu in rec["marks"]:
                dev = None
                if ev is not None and self.ref is not None:
                    ev.synchronize()
                    dev = round((self.ref[1] + self.ref[0].elapsed_time(ev) / 1e3 - rec["t0"]) * 1e3, 3)
                marks.append([label, round((h - rec["t0"]) * 1e3, 3), dev, stream, round((cpu - rec["c0"]) * 1e3, 3)])
            mem = {k: rec["mem1"].get(k, 0) - rec["mem0"].get(k, 0) for k in MEM_KEYS}
            lines.append(json.dumps({"id": ids[0] if ids else "", "rows": rec["rows"], "marks": marks, "mem": mem}))
        if lines:
            with self.guard, self.path.open("a") as f:
                f.write("\n".join(lines) + "\n")

    def close(self) -> None:
        """Remove the module hooks (the function hooks stay: ``install`` replaced them)."""
        for h in self.handles:
            h.remove()
        self.handles.clear()

    def _mem(self) -> dict[str, int]:
        if not self.cuda:
            return {}
        stats = torch.cuda.memory_stats()
        return {k: int(stats.get(k, 0)) for k in MEM_KEYS}

    def _stream(self) -> int:
        return int(torch.cuda.current_stream().cuda_stream) if self.cuda else 0


def hook_parts(model: Any, rec: Recorder) -> list[Any]:
    """Hooks on ``model``'s modules named in ``PARTS`` (only there: the rest of the process's
    module calls keep PyTorch's fast path) that mark their start and end inside a prefill;
    returns their handles."""
    handles = []
    for module in model.modules():
        labels = PARTS.get(type(module).__name__)
        if labels is None:
            continue
        before, after = labels

        def pre(_m: Any, _a: Any, label: str = before) -> None:
            if getattr(rec.local, "prefill", False):
                rec.mark(label)

        def post(_m: Any, _a: Any, _o: Any, label: str = after) -> None:
            if getattr(rec.local, "prefill", False):
                rec.mark(label)

        handles += [module.register_forward_pre_hook(pre), module.register_forward_hook(post)]
    return handles


def install(path: Path) -> Recorder:
    """The hooks on the engine's generation path; returns the recorder (``flush`` it per call)."""
    from benchcheck.engines.hf import engine as engine_mod
    from benchcheck.engines.hf.forward import generate as gen

    names = ((engine_mod, "upload"), (engine_mod, "greedy_start"), (gen.DecodeStep, "__call__"),
             (gen.DecodeStep, "_forward"))
    missing = [n for m, n in names if not hasattr(m, n)]
    if missing:
        raise SystemExit(f"batch_timeline: the engine's {missing} are gone; update the hooks")
    rec = Recorder(path)
    ns = vars(engine_mod)  # the names the engine's module calls them by
    upload, start = ns["upload"], ns["greedy_start"]
    call, forward = gen.DecodeStep.__call__, gen.DecodeStep._forward

    def upload_hook(host: Any, *a: Any, **kw: Any) -> Any:
        rec.begin(len(host.lengths), "start")
        out = upload(host, *a, **kw)
        rec.mark("collated")
        return out

    hooked: set[int] = set()  # the models whose modules carry the part hooks

    def start_hook(*a: Any, **kw: Any) -> Callable[[], Any]:
        rec.mark("prefill_call", event=False)
        model = a[0] if a else kw.get("model")
        if model is not None and id(model) not in hooked:
            hooked.add(id(model))
            rec.handles += hook_parts(model, rec)
        rec.local.prefill = True
        try:
            read = start(*a, **kw)
        except BaseException:
            rec.end(failed=True)  # the pipeline splits or fails the batch; its marks so far kept
            raise
        finally:
            rec.local.prefill = False
        rec.end()
        return read  # type: ignore[no-any-return]

    def call_hook(self: Any) -> Any:
        rec.local.prefill = False  # greedy_start's decode loop: its layers are not the prefill's
        if self.graph is not None:
            return call(self)  # a replay: one launch, not marked (the loop's end is)
        rec.mark("step_call")  # its event: the device done with all before (the prefill, at the first)
        out = call(self)
        rec.mark("step_done")
        return out

    def forward_hook(self: Any) -> Any:
        capturing = rec.cuda and torch.cuda.is_current_stream_capturing()
        rec.mark("capture_fwd" if capturing else "eager_fwd", event=False)
        out = forward(self)
        rec.mark("capture_fwd_done" if capturing else "eager_fwd_done")
        return out

    ns["upload"], ns["greedy_start"] = upload_hook, start_hook
    gen.DecodeStep.__call__ = call_hook  # type: ignore[method-assign]
    gen.DecodeStep._forward = forward_hook  # type: ignore[method-assign]
    return rec


# -- reading (after the run) ---------------------------------------------------------------------

def phases(marks: list[list[Any]]) -> dict[str, float]:
    """One batch's marks as ms: the host time at each mark (the k-th repeat of a label numbered
    ``label2``, ``label3``...), the launching thread's CPU time there (``cpu@``: well below the
    host time, the thread waited, for Python's lock or in a blocking call), and ``lag@`` each
    evented mark: how long after the host's time there the device reached it. An event is
    reached only once recorded, so a lag is not below zero (but for microseconds); near zero,
    the device had caught up: the stretch before the mark was the host's, and the device had run
    out of work in it.

    ``idle_max_ms``: the most the device can have waited inside the batch (from its first mark to
    its last): the wait if each stretch's work between two evented marks was launched at the
    stretch's end. Events alone give no floor (the work's own duration is not seen); before the
    first mark the device waited for the engine's lock, not counted."""
    out: dict[str, float] = {}
    seen: dict[str, int] = defaultdict(int)
    most = 0.0
    prev: float | None = None  # the device's time at the last evented mark, from the batch's start
    for label, h, dev, _stream, *cpu in marks:
        seen[label] += 1
        name = label if seen[label] == 1 else f"{label}{seen[label]}"
        out[name] = h
        if cpu:
            out[f"cpu@{name}"] = cpu[0]
        if dev is None:
            continue
        out[f"lag@{name}"] = dev - h
        if prev is not None or h > 0:
            most += max(0.0, h - (0.0 if prev is None else prev))
        prev = max(0.0, dev)
    out["total_ms"] = marks[-1][1] if marks else 0.0
    out["idle_max_ms"] = most
    return out


def parts(marks: list[list[Any]]) -> dict[str, float]:
    """A prefill's parts from its module marks (``PARTS``), ms: ``pre`` (the call to the tower's
    start, or the language model's without one); the tower: ``vision`` / ``vision_cpu`` /
    ``vision_dev`` (host, the thread's CPU, the device between its two events), ``tower_setup``
    (its start to its first block's), ``vblock1`` (the first block; with ``vblock1_cpu``) and
    ``vblock`` (the median of the others); ``merge`` / ``merge_cpu`` (the tower's end to the
    language model's start) and ``lag_lm`` (the device behind the host there: near zero, the
    device waited for the merge); the language model: ``lm_setup`` (its start to its first
    layer's), ``layer1`` (the first layer; with ``layer1_cpu``), ``layer`` / ``layer_dev`` (medians
    of the others' host and device times), ``between`` / ``between_cpu`` (the stretches between
    one layer's end and the next one's start, summed) and ``tail`` (the last layer's end to the
    first decode step's call: the output layer, the first tokens). Keys absent where their marks are."""
    at: dict[str, list[tuple[float, float | None, float]]] = defaultdict(list)
    for label, h, dev, _stream, *cpu in marks:
        at[label].append((h, dev, cpu[0] if cpu else NAN))
    out: dict[str, float] = {}
    first = at.get("vision") or at.get("lm")
    if first and at.get("prefill_call"):
        out["pre"] = first[0][0] - at["prefill_call"][0][0]
    if at.get("vision") and at.get("vision_done"):
        (h0, d0, c0), (h1, d1, c1) = at["vision"][0], at["vision_done"][-1]
        out.update(vision=h1 - h0, vision_cpu=c1 - c0)
        if d0 is not None and d1 is not None:
            out["vision_dev"] = d1 - d0
        out.update(_stretches("vblock", at, h0))
        if "vblock_setup" in out:
            out["tower_setup"] = out.pop("vblock_setup")
        if at.get("lm"):
            (h2, _d2, c2) = at["lm"][0]
            out.update(merge=h2 - h1, merge_cpu=c2 - c1)
    if at.get("lm"):
        h2, d2, _ = at["lm"][0]
        if d2 is not None:
            out["lag_lm"] = d2 - h2
        layers = _stretches("layer", at, h2)
        if "layer_setup" in layers:
            layers["lm_setup"] = layers.pop("layer_setup")
        out.update(layers)
        if at.get("layer") and at.get("step_call"):
            out["tail"] = at["step_call"][0][0] - at["layer"][-1][0]
    return out


def _stretches(name: str, at: dict[str, list[tuple[float, float | None, float]]], start: float) -> dict[str, float]:
    """A run of modules marked ``NAME_in`` / ``NAME`` (blocks or layers): ``NAME_setup`` (``start`` to
    the first one's start), ``NAME1`` and ``NAME1_cpu`` (the first one), ``NAME`` / ``NAME_dev``
    (medians of the others' host and device times), ``NAME_between`` / ``NAME_between_cpu``
    (from each one's end to the next one's start, summed)."""
    ins, outs = at.get(f"{name}_in", []), at.get(name, [])
    pairs = list(zip(ins, outs, strict=False))
    out: dict[str, float] = {}
    if not pairs:
        return out
    out[f"{name}_setup"] = pairs[0][0][0] - start
    (h0, _, c0), (h1, _, c1) = pairs[0]
    out.update({f"{name}1": h1 - h0, f"{name}1_cpu": c1 - c0})
    rest = pairs[1:]
    if rest:
        out[name] = statistics.median(b[0] - a[0] for a, b in rest)
        dev = [b[1] - a[1] for a, b in rest if a[1] is not None and b[1] is not None]
        if dev:
            out[f"{name}_dev"] = statistics.median(dev)
    gaps = list(zip(outs, ins[1:], strict=False))
    out[f"{name}_between"] = sum(b[0] - a[0] for a, b in gaps)
    out[f"{name}_between_cpu"] = sum(b[2] - a[2] for a, b in gaps)
    return out


PART_KEYS = ("pre", "vision", "vision_cpu", "vision_dev", "tower_setup", "vblock1", "vblock1_cpu", "vblock", "merge",
             "merge_cpu", "lag_lm", "lm_setup", "layer1", "layer1_cpu", "layer", "layer_dev", "layer_between",
             "layer_between_cpu", "tail")


def summarize(path: Path) -> dict[str, dict[str, float]]:
    """Per condition (the request id before ``|``), medians over its batches, ms: the batch
    (``batch``), the prefill's launch on the host (``prefill_host``, from the prefill's call to the
    first decode step's) and the launching thread's CPU time in it (``prefill_cpu``), how long the
    device still ran after that launch (``prefill_lag``), the first decode step's call (its warm-up
    and capture: ``first_step``); the batches whose first step was warmed up eagerly
    (``warm_ups``), ``idle_max``'s share of the batches' time, the allocator's deltas summed."""
    by: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for line in path.read_text().splitlines():
        if line.strip():
            b = json.loads(line)
            by[b["id"].split("|")[0]].append(b)
    out: dict[str, dict[str, float]] = {}
    for cond, batches in sorted(by.items()):
        ph = [phases(b["marks"]) for b in batches]

        def med(f: Callable[[dict[str, float]], float], ph: list[dict[str, float]] = ph) -> float:
            vals = [v for v in (f(p) for p in ph) if v == v]
            return round(statistics.median(vals), 1) if vals else float("nan")

        total = sum(p["total_ms"] for p in ph)
        row: dict[str, float] = {
            "batches": len(batches), "rows": round(sum(b["rows"] for b in batches) / len(batches), 2),
            "batch": med(lambda p: p["total_ms"]),
            "prefill_host": med(lambda p: p.get("step_call", NAN) - p.get("prefill_call", NAN)),
            "prefill_cpu": med(lambda p: p.get("cpu@step_call", NAN) - p.get("cpu@prefill_call", NAN)),
            "prefill_lag": med(lambda p: p.get("lag@step_call", NAN)),
            "first_step": med(lambda p: p.get("step_done", NAN) - p.get("step_call", NAN)),
            "warm_ups": sum(1 for b in batches if [m[0] for m in b["marks"]].count("eager_fwd") and
                            any(m[0] == "capture_fwd" for m in b["marks"])),
        }
        row["idle_max_share"] = round(sum(p["idle_max_ms"] for p in ph) / total, 3) if total > 0 else 0.0
        pp = [parts(b["marks"]) for b in batches]
        for k in PART_KEYS:
            row[f"part_{k}"] = med(lambda p, k=k: p.get(k, NAN), pp)  # type: ignore[misc]
        for k in MEM_KEYS:
            row[k] = sum(b["mem"].get(k, 0) for b in batches)
        out[cond] = row
    return out


def parts_table(summary: dict[str, dict[str, float]]) -> list[str]:
    """``summarize``'s prefill parts (``parts``, medians, ms) as a Markdown table; empty where
    no batch has module marks."""
    if not any(r.get("part_pre", NAN) == r.get("part_pre", NAN) for r in summary.values()):
        return []
    out = ["| condition | before the tower | tower host (CPU) / device | tower set-up | first block (CPU) / others | "
           "merge (CPU) | device behind at the LM | LM set-up | first layer (CPU) | other layers host / device | "
           "between layers (CPU) | tail |",
           "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for cond, r in summary.items():
        g = {k: r.get(f"part_{k}", NAN) for k in PART_KEYS}
        out.append(f"| {cond} | {g['pre']} | {g['vision']} ({g['vision_cpu']}) / {g['vision_dev']} | "
                   f"{g['tower_setup']} | {g['vblock1']} ({g['vblock1_cpu']}) / {g['vblock']} | "
                   f"{g['merge']} ({g['merge_cpu']}) | {g['lag_lm']} | {g['lm_setup']} | {g['layer1']} "
                   f"({g['layer1_cpu']}) | {g['layer']} / {g['layer_dev']} | {g['layer_between']} "
                   f"({g['layer_between_cpu']}) | {g['tail']} |")
    return out


def table(summary: dict[str, dict[str, float]]) -> list[str]:
    """``summarize``'s rows as a Markdown table."""
    out = ["| condition | batches | rows | batch ms | prefill launch ms (thread CPU) | device after it ms | "
           "first step ms | warm-ups | idle at most | allocator retries |",
           "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for cond, r in summary.items():
        out.append(f"| {cond} | {r['batches']:.0f} | {r['rows']} | {r['batch']} | {r['prefill_host']} "
                   f"({r['prefill_cpu']}) | {r['prefill_lag']} | {r['first_step']} | {r['warm_ups']:.0f} | "
                   f"{r['idle_max_share']:.0%} | {r['num_alloc_retries']:.0f} |")
    return out
