"""The sweep's mix through ``benchcheck sweep run`` (decision 101): the 13 conditions on videos of
realistic lengths from a normalized store, answered by the ``hf`` engine, weighted as seed 001.

Setup (timed): a synthetic source per video class (``video.synth``'s panning texture), normalized
by ``video.store.normalize_videos`` (``benchcheck videos normalize``) into the store; ``--rounds``
benches, each every class ``COUNT`` times: the sweep plans bench-major, so each round is a whole
mix; the checkpoint (8B random weights on the GPU; ``--tiny``: the tiny model on the CPU).
Run: ``sweep run --engine hf`` in a child process whose bootstrap (``child``) caps each request's
``max_tokens`` (128, as the sweep sends) at ``--answer-tokens`` in ``HFEngine.generate_sync`` (a
random-weight model never stops), or with ``--answer-stop K`` keeps it and ends each batch's
decoding as a real model's end token after K tokens would (the engine's path as in production:
steps reserved for 128 tokens, captured as a CUDA graph), and logs each call's seconds holding
the engine's device lock (``HFEngine.active``: its GPU seconds); stopped at the budget (process group killed; the rows
are crash-safe). Report: per condition frames, prompt tokens, GPU s, decode s; over the window
inferences/s, NVML busy, engine-held fraction; the mix with seed 001's weights, GPU-s per 1,000
inferences and seed 001's GPU-hours, and its GPU busy as those weights make it (decision 109),
read over each cell's calls after its first in time where it has them: the first visits every shape
first, with the process's compiles and autotuning, which a run of seed 001's size pays once (the
sweep may answer a later round's cell first, so the first visit is found by time, not by round); each
item's question has its own length, so new prompt lengths still come every round (decision 111).

    PYTHONPATH=src:.:/tmp/site python3 -m benchmarks.sweep_mix --out $OUT          # H200, 8B
    PYTHONPATH=src:. python -m benchmarks.sweep_mix --tiny --rounds 1 --out out    # CPU, tiny
"""

from __future__ import annotations

import argparse
import bisect
import contextlib
import dataclasses
import gc
import hashlib
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import torch

from benchmarks.shared.py_spy import recorded
from benchmarks.shared.results import default_out, environment, write

# Seed 001: 84 benchmarks x 300 items x 8 new conditions (201,600) + about 30,000 base-condition
# inferences for the 24 benchmarks lacking some (spread evenly here over the five base conditions).
NEW = ("v_32_s168", "v_32_s336", "v_fps0.25_s224", "v_fps0.5_s224", "v_fps1_s224", "v_fps2_s224",
       "v_8_s224", "v_128_s224")
BASE = ("v_blind", "v_1", "v_32", "v_32_s224", "v_32_s448")
SEED_COUNTS = {**dict.fromkeys(NEW, 84 * 300), **dict.fromkeys(BASE, 30_000 // len(BASE))}
SEED_TOTAL = sum(SEED_COUNTS.values())
VIDEOS = "30:16x9:2,30:4x3:1,180:16x9:2,180:4x3:1,900:16x9:1,900:4x3:1,2400:16x9:1,2400:4x3:1"
SOURCE_FRAMES = 1200  # source frames at most: the store keeps 1,024 frames at most
ANSWER_ENV, CALLS_ENV, STOP_ENV = "SWEEP_MIX_ANSWER_TOKENS", "SWEEP_MIX_CALLS", "SWEEP_MIX_ANSWER_STOP"
TIMELINE_ENV = "SWEEP_MIX_TIMELINE"
BOOT = "import benchmarks.sweep_mix as m; m.child()"
QUESTIONS = ("what does the person in the video do right after the door opens?",
             "why does the woman in the blue coat pick up the box on the table near the end?")
OPTIONS = ("runs away", "sits down on the sofa", "waves at the camera", "reads a book", "opens a box")
# Words that lengthen each item's question by its own count (``filler``), so a batch's prompt
# lengths are new in every round as a benchmark's items are (decision 111).
FILLER = ("in the scene that follows the kitchen and the street where people talk walk cook and wait for "
          "the bus while a dog runs past the camera near the end of the clip")
STEADY_FROM = 1  # a cell's calls after its first this many, in time, are its steady ones (first visits left out)


@dataclasses.dataclass(frozen=True)
class VideoClass:
    seconds: float
    aspect: tuple[int, int]
    count: int

    @property
    def name(self) -> str:
        return f"{self.seconds:g}s_{self.aspect[0]}x{self.aspect[1]}"


def parse_videos(text: str) -> list[VideoClass]:
    """``SECONDS:WxH:COUNT,...`` (COUNT items per round ask about that class's video)."""
    try:
        parts = [(p.split(":")[0], p.split(":")[1].split("x"), p.split(":")[2]) for p in text.split(",")]
        return [VideoClass(float(s), (int(w), int(h)), int(c)) for s, (w, h), c in parts]
    except (ValueError, IndexError):
        raise SystemExit(f"--videos: {text!r} is not SECONDS:WxH:COUNT,... (e.g. {VIDEOS})") from None


def source_geometry(vc: VideoClass, short: int) -> tuple[int, int, float, int]:
    """(width, height, fps, frames) of a class's source: the store's short side (480 beyond
    30 min), at most 2 fps and ``SOURCE_FRAMES`` frames."""
    from benchcheck.video.normalize import LONG_SHORT_SIDE, LONG_VIDEO_S

    side = min(short, LONG_SHORT_SIDE) if vc.seconds > LONG_VIDEO_S else short
    w = 2 * round(side * vc.aspect[0] / vc.aspect[1] / 2)
    fps = min(2.0, SOURCE_FRAMES / vc.seconds)
    return w, side, fps, max(1, round(vc.seconds * fps))


def make_source(path: str, w: int, h: int, fps: float, n: int, seed: int) -> float:
    from benchcheck.video.synth import make_test_video

    c0 = time.process_time()
    make_test_video(Path(path), n, fps=fps, width=w, height=h, textured=True, preset="ultrafast", seed=seed)
    return time.process_time() - c0


def build_store(root: Path, classes: list[VideoClass], short: int) -> tuple[dict[str, str], dict[str, Any]]:
    """Class name -> video_id in ``root/store`` (sources made in parallel, then normalized)."""
    from benchcheck.video.store import normalize_videos

    t0 = time.perf_counter()
    srcs = {vc.name: root / "sources" / f"{vc.name}.mp4" for vc in classes}
    (root / "sources").mkdir(parents=True, exist_ok=True)
    with ProcessPoolExecutor(min(len(classes), cores())) as pool:
        futs = [pool.submit(make_source, str(srcs[vc.name]), *source_geometry(vc, short), k)
                for k, vc in enumerate(classes)]
        src_cpu = sum(f.result() for f in futs)
    t1 = time.perf_counter()
    report = normalize_videos(list(srcs.values()), root / "store", workers=min(len(classes), cores()))
    done = {Path(o.path).resolve(): o for o in report.outcomes}
    ids = {}
    for name, src in srcs.items():
        o = done.get(src.resolve())
        if o is None or not o.content_hash:
            raise SystemExit(f"normalize failed for {name}: {o.reason if o else 'no outcome'}")
        ids[name] = o.content_hash
    return ids, {"sources_s": round(t1 - t0, 2), "sources_cpu_s": round(src_cpu, 2),
                 "normalize_s": round(time.perf_counter() - t1, 2)}


def write_items(root: Path, classes: list[VideoClass], ids: dict[str, str], rounds: int) -> tuple[Path, dict[str, str]]:
    """``rounds`` bench files; returns the folder and item_id -> class name."""
    folder = root / "items"
    folder.mkdir(parents=True, exist_ok=True)
    of: dict[str, str] = {}
    for r in range(rounds):
        rows = []
        for vc in classes:
            for k in range(vc.count):
                iid = f"R{r:02d}_{vc.name}_{k}"
                of[iid] = vc.name
                question = f"{QUESTIONS[(r + k) % len(QUESTIONS)]} {filler(iid)}".strip()
                rows.append({"item_id": iid, "question": question, "options": list(OPTIONS),
                             "answer": (r + k) % len(OPTIONS), "video_id": ids[vc.name]})
        (folder / f"R{r:02d}.jsonl").write_text("".join(json.dumps(x) + "\n" for x in rows))
    return folder, of


def filler(item_id: str) -> str:
    """The words that lengthen an item's question, 0 to all of ``FILLER``'s, fixed by its id: a
    benchmark's questions differ in length, so a real run's batches seldom repeat a prompt length,
    and a cost that recurs with every new length (a cuDNN plan, decision 107) recurs here as there."""
    words = FILLER.split()
    n = int.from_bytes(hashlib.blake2b(item_id.encode(), digest_size=4).digest(), "little") % (len(words) + 1)
    return " ".join(words[:n])


def round_of(request_id: str) -> int:
    """The round (bench) of a call log's ``CONDITION|Rnn_class_k`` id; -1 for any other id."""
    item = request_id.split("|", 1)[-1]
    return int(item[1:3]) if item[:1] == "R" and item[1:3].isdigit() else -1


def write_model(root: Path, tiny: bool, shape: str) -> Path:
    folder = root / "model"
    if tiny:
        from benchcheck.testing import build_tiny_model

        return build_tiny_model(folder, seed=0)
    from benchcheck.testing.random_weights import build_random_model

    built = build_random_model(shape, device="cuda")
    built.model.save_pretrained(folder)
    built.tokenizer.save_pretrained(folder)
    (folder / "preprocessor_config.json").write_text(json.dumps(built.preprocessor_config))
    del built
    gc.collect()
    torch.cuda.empty_cache()  # the child loads its own copy
    return folder


# -- the child: the real CLI with the two hooks -------------------------------------------------

def child() -> None:
    """``python -c BOOT sweep run ...``: cap answers, log each call's lock-held seconds, run the CLI."""
    from benchcheck.cli import main
    from benchcheck.engines.hf.engine import HFEngine

    if not all(hasattr(HFEngine, n) for n in ("generate_sync", "active")):
        raise SystemExit("sweep_mix: HFEngine.generate_sync/active are gone; update the hooks in child()")
    cap = int(os.environ.get(ANSWER_ENV, "0"))
    stop_at = int(os.environ.get(STOP_ENV, "0"))
    timeline = None
    if os.environ.get(TIMELINE_ENV):
        from benchmarks.shared.batch_timeline import install

        timeline = install(Path(os.environ[TIMELINE_ENV]))
    log = open(os.environ[CALLS_ENV], "a")  # noqa: SIM115 (open for the child's life)
    local, guard = threading.local(), threading.Lock()
    generate, active = HFEngine.generate_sync, HFEngine.active

    def generate_sync(self: HFEngine, reqs: Any, stop: threading.Event | None = None) -> Any:
        if cap > 0:
            reqs = [dataclasses.replace(r, max_tokens=min(r.max_tokens, cap)) for r in reqs]
        local.held, local.spans = 0.0, []
        if timeline is not None:
            with timeline.call():  # the call's batches, wherever the engine launches them
                out = generate(self, reqs, stop)
                timeline.flush([r.request_id for r in reqs])
        else:
            out = generate(self, reqs, stop)
        got = {g.request_id: g for g in out}
        line = {"ids": [r.request_id for r in reqs], "held_s": local.held, "spans": local.spans, "end": time.time(),
                "tokens": [getattr(got.get(r.request_id), "prompt_tokens", 0) for r in reqs],
                "new_tokens": [getattr(got.get(r.request_id), "completion_tokens", 0) for r in reqs]}
        with guard:
            log.write(json.dumps(line) + "\n")
            log.flush()
        return out

    @contextlib.contextmanager
    def held(self: HFEngine) -> Iterator[None]:
        with active(self):
            t0, w0 = time.perf_counter(), time.time()
            try:
                yield
            finally:
                local.held = getattr(local, "held", 0.0) + time.perf_counter() - t0
                # The wall-clock stretches this call held the engine: other calls' batches
                # interleave with its own, so its start and end alone would count theirs too.
                getattr(local, "spans", []).append((round(w0, 4), round(time.time(), 4)))

    HFEngine.generate_sync = generate_sync  # type: ignore[method-assign]
    HFEngine.active = held  # type: ignore[method-assign]
    from benchmarks.shared.answer_stop import answers_stop_after

    with answers_stop_after(stop_at) if stop_at > 0 else contextlib.nullcontext():
        main(args=sys.argv[1:], prog_name="benchcheck")


def run_child(cmd: list[str], env: dict[str, str], calls: Path, logs: Path, timeout: float,
              cuda: bool, spied: bool = False) -> dict[str, Any]:
    """The child until it exits or ``timeout`` (its process group killed); NVML samples and the
    call log's growth polled, so a window's samples can be picked by time. ``spied``: the command
    is py-spy recording the child, so at the budget py-spy gets SIGINT first (it writes its
    samples, then ends the child) and the group is killed after."""
    from benchmarks.shared.nvml import Nvml

    nvml = Nvml() if cuda else None
    polls: list[tuple[float, int]] = []
    stop = threading.Event()
    with contextlib.ExitStack() as st:
        samples = st.enter_context(nvml.sampling(0.02)) if nvml is not None else []

        def poll() -> None:
            last = time.time()
            while not stop.wait(0.1):
                polls.append((time.time(), len(samples)))
                if polls[-1][0] - last >= 30:
                    last = polls[-1][0]
                    n = sum(1 for _ in calls.open()) if calls.is_file() else 0
                    print(f"  {last - t0:5.0f} s: {n} engine calls answered", flush=True)

        t0 = time.time()
        thread = threading.Thread(target=poll, daemon=True)
        thread.start()
        with (logs / "child.out").open("w") as out:
            proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
            killed = False
            try:
                proc.wait(timeout=max(1.0, timeout))
            except subprocess.TimeoutExpired:
                killed = True
                if spied:
                    os.kill(proc.pid, signal.SIGINT)
                    with contextlib.suppress(subprocess.TimeoutExpired):
                        proc.wait(timeout=8)  # within the 15 s the budget leaves after the child
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        stop.set()
        thread.join()
    tail = (logs / "child.out").read_text(errors="replace")[-3000:]
    return {"rc": proc.returncode, "killed_at_budget": killed, "child_s": round(time.time() - t0, 1),
            "polls": polls, "samples": list(samples), "tail": tail}


# -- aggregation -----------------------------------------------------------------------------------

def call_lines(path: Path) -> Iterator[dict[str, Any]]:
    """The child's call log, a record per engine call (none when there is no log)."""
    for line in path.read_text().splitlines() if path.is_file() else []:
        try:
            yield json.loads(line)
        except ValueError:  # the last line of a child killed at the budget
            continue


def samples_by(polls: list[tuple[float, int]], t: float) -> int:
    """How many NVML samples had been taken at time ``t`` (``polls``: (time, count) pairs)."""
    return max([n for tp, n in polls if tp <= t], default=0)


def token_shares(call: dict[str, Any]) -> list[float]:
    """Each request's share of a logged call, by prompt tokens (alike where none are logged)."""
    tokens = call.get("tokens") or [1] * len(call["ids"])
    total = sum(tokens) or len(call["ids"])
    return [(tok or 1) / total for tok in tokens]


def call_ranks(calls: dict[str, tuple[float, float, int]], class_of: dict[str, str]) -> dict[str, int]:
    """request id -> its call's rank in time among its cell's calls (0: the cell's first call in the
    process). A cell is (condition, video class); a call's time is its end (``read_calls``). The rank,
    not the round in the id: the sweep may run a later round's call of a cell before an earlier one's."""
    ends: dict[tuple[str, str], set[float]] = defaultdict(set)
    cell_of: dict[str, tuple[str, str]] = {}
    for rid, (_, end, _) in calls.items():
        cond, _, item = rid.partition("|")
        cell_of[rid] = (cond, class_of.get(item, "?"))
        ends[cell_of[rid]].add(end)
    order = {cell: sorted(e) for cell, e in ends.items()}
    return {rid: bisect.bisect_left(order[cell], calls[rid][1]) for rid, cell in cell_of.items()}


def read_calls(path: Path) -> dict[str, tuple[float, float, int]]:
    """request_id -> (GPU s: its call's held seconds by prompt-token share, its call's end, new tokens)."""
    out: dict[str, tuple[float, float, int]] = {}
    for c in call_lines(path):
        for rid, share, new in zip(c["ids"], token_shares(c), c["new_tokens"], strict=False):
            out[rid] = (c["held_s"] * share, c["end"], new)
    return out


def call_busy(path: Path, polls: list[tuple[float, int]], samples: list[Any]) -> dict[str, tuple[float, float]]:
    """request id -> (NVML's busy % over the samples taken while its engine call held the engine,
    those samples' count times the request's share of the call's prompt tokens); absent where the
    call caught no sample. ``polls`` maps a time to the samples taken by then, so a sample counts
    for the call whose ``spans`` hold its poll: weighted by their count, every sample counts once
    (a short call can hold a poll's worth). NVML averages its own readings over a period of its
    own, so a short call's share blurs into its neighbours'."""
    out: dict[str, tuple[float, float]] = {}
    for c in call_lines(path):
        read = [x.busy for a, b in c.get("spans", []) for x in samples[samples_by(polls, a):samples_by(polls, b)]]
        if not read:
            continue
        for rid, share in zip(c["ids"], token_shares(c), strict=False):
            out[rid] = (float(np.mean(read)), len(read) * share)
    return out


def weighted_busy(pairs: list[tuple[float, float]]) -> float:
    """The busy % of (weight, busy %) pairs, by their weights; NaN where no pair has a reading."""
    read = [(w, b) for w, b in pairs if b == b]
    total = sum(w for w, _ in read)
    return sum(w * b for w, b in read) / total if total > 0 else float("nan")


def mix_busy(per_cond: dict[str, dict[str, Any]]) -> dict[str, float]:
    """NVML's busy % over the mix as seed 001 weights it, not as the run's window happens to: each
    condition's busy in its calls weighted by the GPU time the mix spends in it (its weight times
    its held seconds an inference); ``covered``: the share of that time whose condition has a
    busy reading. A run gives every condition a like number of rows, so its window over-weights
    the light conditions (decision 109)."""
    time_in = {k: c["weight"] * c["gpu_s"] for k, c in per_cond.items()}
    read = {k: t for k, t in time_in.items() if "busy_in_calls" in per_cond[k]}
    if not sum(read.values()):
        return {}
    return {"busy": round(sum(t * per_cond[k]["busy_in_calls"] for k, t in read.items()) / sum(read.values()), 1),
            "covered": round(sum(read.values()) / sum(time_in.values()), 3)}


def window(ends: list[tuple[float, float, bool]], polls: list[tuple[float, int]], samples: list[Any],
           spans: list[tuple[float, float]]) -> dict[str, float]:
    """Over (request's call end, its GPU s, in window?) sorted by end, one entry per request: from
    the first call's end to the last one's, the requests of the calls after the first and their
    inferences/s, the share of that time the engine was held (``spans``: every stretch any call
    held it, clipped to the window: a call's batches interleave with other calls', so a call
    ending in the window can have held the engine before it), and NVML's busy."""
    ends = [e for e in ends if e[2]]
    if not ends:
        return {}
    t0, t1 = ends[0][0], ends[-1][0]
    after = [e for e in ends if e[0] > t0]
    if not after or t1 <= t0:
        return {}
    wall = t1 - t0
    held = sum(max(0.0, min(b, t1) - max(a, t0)) for a, b in spans)

    win = samples[samples_by(polls, t0):samples_by(polls, t1)]
    out = {"wall_s": round(wall, 2), "inferences": len(after), "inferences_per_s": round(len(after) / wall, 4),
           "held_fraction": round(held / wall, 3)}
    if win:
        out.update({k: round(float(np.mean([getattr(x, k) for x in win])), 1) for k in ("busy", "mhz", "watts")})
    return out


def aggregate(rows: list[dict[str, str]], calls: dict[str, tuple[float, float, int]], class_of: dict[str, str],
              classes: list[VideoClass], steady_from: int = 0, busy: dict[str, tuple[float, float]] | None = None,
              ) -> tuple[list[dict[str, Any]], dict[str, dict[str, Any]], dict[str, Any]]:
    """(cells, per condition, mix): cells by (condition, class); seed 001's weights applied; with
    ``busy`` (``call_busy``), each cell's NVML busy over the rows it is measured by, each row by its
    samples, and each condition's over its cells by the GPU time the mix spends in them
    (``busy_in_calls``, ``weighted_busy``).

    With ``steady_from`` > 0 a cell is measured by its rows whose calls came after its first
    ``steady_from`` calls in time (``call_ranks``) where it has any (``steady`` true), else by all its
    rows: a cell's first call holds its shape's first call in the process (compiles, autotuning,
    first plans), paid once in a run of seed 001's size and not per inference (decision 111). ``first_extra_s``: the GPU
    seconds the cells' earlier rows took beyond their steady cost."""
    share = {vc.name: vc.count / sum(v.count for v in classes) for vc in classes}
    ranks = call_ranks(calls, class_of)
    cells: dict[tuple[str, str], dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in rows:
        key = (r["condition"], class_of.get(r["item_id"], "?"))
        meta = json.loads(r.get("meta") or "{}")
        c = cells[key]
        if r["status"] == "NA" or meta.get("reused_from"):
            c["free"].append(1.0)
            continue
        rid = f"{r['condition']}|{r['item_id']}"
        if rid not in calls:
            continue
        late = steady_from > 0 and ranks[rid] >= steady_from
        read, samples = (busy or {}).get(rid, (float("nan"), 0.0))
        for k, v in (("gpu_s", calls[rid][0]), ("busy", read), ("samples", samples),
                     *((k, float(r.get(k) or 0)) for k in ("n_frames", "prompt_tokens", "infer_s", "decode_s"))):
            c[k].append(v)
            if late:
                c["late_" + k].append(v)
    keys = ("n_frames", "prompt_tokens", "gpu_s", "infer_s", "decode_s")
    out = []
    for (cond, cls), c in sorted(cells.items()):
        late = bool(c["late_gpu_s"])
        use = {k: c["late_" + k] if late else c[k] for k in keys}
        n = len(use["gpu_s"])
        is_free = not n and bool(c["free"])
        rec: dict[str, Any] = {"condition": cond, "class": cls, "n": n, "free": is_free, "steady": late,
                               "weight": 0.0 if is_free else SEED_COUNTS.get(cond, 0) * share.get(cls, 0.0)}
        for k in keys:
            rec[k] = float(np.mean(use[k])) if n else float("nan")
        pre = "late_" if late else ""
        rec["busy_in_calls"] = weighted_busy(list(zip(c[pre + "samples"], c[pre + "busy"], strict=True)))
        early = len(c["gpu_s"]) - len(c["late_gpu_s"])
        rec["first_extra_s"] = (sum(c["gpu_s"]) - sum(c["late_gpu_s"]) - early * rec["gpu_s"]) if late else 0.0
        out.append(rec)
    measured = [c for c in out if c["n"] and c["weight"] > 0]

    def wmean(cs: list[dict[str, Any]]) -> dict[str, float]:
        w = sum(c["weight"] for c in cs)
        return {k: sum(c["weight"] * c[k] for c in cs) / w for k in keys} if w else {}

    per_cond = {}
    for cond in SEED_COUNTS:
        cs = [c for c in measured if c["condition"] == cond]
        if cs:
            per_cond[cond] = {"n": sum(c["n"] for c in cs), "weight": sum(c["weight"] for c in cs), **wmean(cs)}
            b = weighted_busy([(c["weight"] * c["gpu_s"], c["busy_in_calls"]) for c in cs])
            if b == b:
                per_cond[cond]["busy_in_calls"] = round(b, 1)
    missing = sorted({(c["condition"], c["class"]) for c in out if not c["n"] and not c["free"]}
                     | {(k, v.name) for k in SEED_COUNTS for v in classes if (k, v.name) not in cells})
    free = {(c["condition"], c["class"]) for c in out if c["free"]}
    due = sum(SEED_COUNTS[k] * share[v.name] for k in SEED_COUNTS for v in classes if (k, v.name) not in free)
    weight = sum(c["weight"] for c in measured)
    mix = {**wmean(measured), "weight_measured": round(weight / due, 3),
           "weight_steady": round(sum(c["weight"] for c in measured if c["steady"]) / weight, 3) if weight else 0.0,
           "first_extra_s": round(sum(c["first_extra_s"] for c in out), 2),
           "missing_cells": [f"{a}/{b}" for a, b in missing]}
    return out, per_cond, mix


def costs(mix: dict[str, Any], held: float, cores: int) -> dict[str, Any]:
    g = mix.get("gpu_s", float("nan"))
    frac = held if held == held and held > 0 else 1.0
    per_1000 = 1000 * g / frac
    hours = SEED_TOTAL * g / frac / 3600
    return {"gpu_s_per_inference": round(g, 4), "inferences_per_s_at_full_gpu": round(1 / g, 3),
            "inferences_per_s": round(frac / g, 3), "gpu_s_per_1000": round(per_1000, 1),
            "gpu_s_per_1000_at_full_gpu": round(1000 * g, 1), "seed001_inferences": SEED_TOTAL,
            "seed001_gpu_hours": round(hours, 1), "seed001_wall_h_1_4_8_gpus": [round(hours / k, 2) for k in (1, 4, 8)],
            "decode_cores_per_gpu_needed": round(mix.get("decode_s", float("nan")) / g, 2), "decode_cores": cores}


# -- main ---------------------------------------------------------------------------------------------

def cores() -> int:
    """Cores this process may run on (a lent machine's share, not the host's count)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 2


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tiny", action="store_true", help="the tiny model on the CPU (smaller sources)")
    ap.add_argument("--shape", default="qwen3-vl-8b")
    ap.add_argument("--videos", default=VIDEOS, help="video classes SECONDS:WxH:COUNT (COUNT items per round)")
    ap.add_argument("--rounds", type=int, default=4, help="benches, each a whole mix (the budget may stop sooner)")
    ap.add_argument("--conds", default=None, help="sweep conditions (default: all 13)")
    ap.add_argument("--answer-tokens", type=int, default=4, help="new tokens per answer (0: the sweep's 128)")
    ap.add_argument("--answer-stop", type=int, default=0,
                    help="instead of capping max_tokens: keep 128 and end decoding after this many tokens, "
                         "as a real model's end token would (graphs captured as in production)")
    ap.add_argument("--workers", type=int, default=0,
                    help="sweep run --workers (0: the sweep's own default, one unit per frame decoder plus one)")
    ap.add_argument("--decode-workers", type=int, default=max(1, cores() - 1), help="sweep run --decode-workers")
    ap.add_argument("--chunk", type=int, default=0, help="sweep run --chunk (0: the sweep's own default)")
    ap.add_argument("--hf-config", action="append", default=[], help="passed on to sweep run --hf-config")
    ap.add_argument("--source-short", type=int, default=None, help="sources' short side (default 720; --tiny 240)")
    ap.add_argument("--budget-s", type=float, default=420.0, help="the whole script, setup included")
    ap.add_argument("--py-spy", default=None, help="a py-spy binary: record the child's threads (50 samples a second)")
    ap.add_argument("--timeline", action="store_true",
                    help="mark each generation batch's phases with CUDA events (benchmarks.shared.batch_timeline)")
    ap.add_argument("--workdir", type=Path, default=None, help="videos, store, model, rows (default: a temp folder)")
    ap.add_argument("--out", type=Path, default=Path(default_out()))
    a = ap.parse_args()
    t_start = time.time()
    if not a.tiny and not torch.cuda.is_available():
        raise SystemExit("sweep_mix needs a CUDA device (or --tiny for the CPU)")
    with contextlib.ExitStack() as st:
        work = a.workdir or Path(st.enter_context(tempfile.TemporaryDirectory(prefix="sweep_mix_")))
        work.mkdir(parents=True, exist_ok=True)
        try:
            run(a, work, t_start)
        except Exception as e:  # the results folder says what stopped the run
            a.out.mkdir(parents=True, exist_ok=True)
            (a.out / "sweep_mix.json").write_text(json.dumps({"error": f"{type(e).__name__}: {e}",
                                                              "wall_s": round(time.time() - t_start, 1)}))
            raise


def run(a: argparse.Namespace, work: Path, t_start: float) -> None:
    from benchmarks import sweep_mix as me  # by its module name: the pool's workers import it

    deadline = t_start + a.budget_s
    cuda = not a.tiny
    classes = parse_videos(a.videos)
    short = a.source_short or (240 if a.tiny else 720)
    cpu0 = _cpu()
    print(f"setup: {len(classes)} videos ({a.videos}), short side {short}, {a.rounds} rounds, in {work}", flush=True)
    setup: dict[str, Any] = {}
    with ProcessPoolExecutor(1) as one:  # the store's sources and normalization beside the model's build
        store_fut = one.submit(me.build_store, work, classes, short)
        t0 = time.perf_counter()
        model = me.write_model(work, a.tiny, a.shape)
        setup["model_s"] = round(time.perf_counter() - t0, 1)
        ids, timing = store_fut.result()
    setup.update(timing, setup_s=round(time.time() - t_start, 1))
    items, class_of = write_items(work, classes, ids, a.rounds)
    print(f"setup done in {setup['setup_s']} s: {setup}", flush=True)
    results, calls = work / "results", work / "calls.jsonl"
    calls.unlink(missing_ok=True)
    cmd = [sys.executable, "-c", BOOT, "sweep", "run", "--items", str(items), "--store", str(work / "store"),
           "--results", str(results), "--engine", "hf", "--model", str(model), "--device", "cuda" if cuda else "cpu",
           "--decode-workers", str(a.decode_workers), "--no-progress"]
    cmd += ["--chunk", str(a.chunk)] if a.chunk else []
    cmd += ["--workers", str(a.workers)] if a.workers else []
    cmd += ["--conds", a.conds] if a.conds else []
    for h in a.hf_config:
        cmd += ["--hf-config", h]
    if a.py_spy:  # the child's threads sampled for the whole run (where the engine's host time goes)
        a.out.mkdir(parents=True, exist_ok=True)
        cmd = recorded(a.py_spy, a.out / "py_spy_sweep_mix.txt", cmd)
    cap = 0 if a.answer_stop > 0 else a.answer_tokens
    env = {**os.environ, ANSWER_ENV: str(cap), CALLS_ENV: str(calls), STOP_ENV: str(a.answer_stop)}
    timeline = work / "timeline.jsonl"
    timeline.unlink(missing_ok=True)
    if a.timeline:
        env[TIMELINE_ENV] = str(timeline)
    if a.answer_stop > 0:
        forced = (f"answers end after {a.answer_stop} new tokens as a real model's end token would end them "
                  "(max_tokens 128 kept: steps reserved and captured as sent)")
    elif cap > 0:
        forced = (f"answers forced to {cap} new tokens: each request's max_tokens (128, as the sweep sends) "
                  "capped in the child's HFEngine.generate_sync")
    else:
        forced = "128 new tokens (no cap)"
    print(f"sweep run ({forced}); child budget {deadline - time.time() - 15:.0f} s", flush=True)
    child_res = run_child(cmd, env, calls, work, deadline - time.time() - 15, cuda, spied=bool(a.py_spy))
    print(f"child exit {child_res['rc']} after {child_res['child_s']} s"
          f"{' (stopped at the budget)' if child_res['killed_at_budget'] else ''}", flush=True)
    a.out.mkdir(parents=True, exist_ok=True)
    shutil.copy(work / "child.out", a.out / "sweep_mix_child.log")
    if calls.is_file():  # each engine call's rows, prompt tokens and held seconds, for a later look
        shutil.copy(calls, a.out / "sweep_mix_calls.jsonl")
    marks: dict[str, Any] = {}
    if timeline.is_file():
        from benchmarks.shared.batch_timeline import summarize

        shutil.copy(timeline, a.out / "sweep_mix_timeline.jsonl")
        marks = summarize(timeline)
    # NVML's busy readings and when they were taken, so a later look can place them (with the calls).
    (a.out / "sweep_mix_nvml.json").write_text(json.dumps(
        {"polls": [[round(t, 3), n] for t, n in child_res["polls"]], "busy": [x.busy for x in child_res["samples"]]}))
    from benchcheck.sweep.results import read_csv

    rows = read_csv(results / "conditions_results.csv") if (results / "conditions_results.csv").is_file() else []
    by_id = read_calls(calls)
    # The headline reads the steady rounds; all rows beside it, first visits included (decision 111).
    busy = call_busy(calls, child_res["polls"], child_res["samples"])
    cells, per_cond, mix = aggregate(rows, by_id, class_of, classes, STEADY_FROM, busy)
    _, per_cond_all, mix_all = aggregate(rows, by_id, class_of, classes, 0, busy)
    ends = sorted((end, g, True) for g, end, _ in by_id.values())
    ranks = call_ranks(by_id, class_of)
    first_r1 = min((c[1] for rid, c in by_id.items() if ranks[rid] >= STEADY_FROM), default=None)
    new_tokens = float(np.mean([c[2] for c in by_id.values()])) if by_id else float("nan")
    steady = [(e, g, first_r1 is not None and e >= first_r1) for e, g, _ in ends]
    spans = [(a, b) for c in call_lines(calls) for a, b in c.get("spans", [])]
    win = {"all": window(ends, child_res["polls"], child_res["samples"], spans),
           "steady": window(steady, child_res["polls"], child_res["samples"], spans)}
    mix["busy"], mix_all["busy"] = mix_busy(per_cond), mix_busy(per_cond_all)
    held = (win["steady"] or win["all"]).get("held_fraction", float("nan"))
    cost = costs(mix, held, a.decode_workers) if mix.get("gpu_s") else {}
    cost_all = costs(mix_all, held, a.decode_workers) if mix_all.get("gpu_s") else {}
    where = environment(torch.device("cuda" if cuda else "cpu"), cpu_s=round(_cpu() - cpu0, 1), cores=cores(),
                      wall_s=round(time.time() - t_start, 1), shape="tiny" if a.tiny else a.shape,
                      forced=f"{forced} (mean new tokens {new_tokens:.1f})")
    payload = {"env": where,
               "setup": setup, "child": {k: v for k, v in child_res.items() if k not in ("polls", "samples")},
               "windows": win, "held_fraction": held, "mix": mix, "cost": cost, "per_condition": per_cond,
               "cells": cells,
               "all_rows": {"mix": mix_all, "cost": cost_all, "per_condition": per_cond_all},
               "seed_counts": SEED_COUNTS, "classes": [dataclasses.asdict(c) for c in classes], "timeline": marks}
    write(a.out, "sweep_mix.json", payload, "sweep_mix.md", lines(payload, a))
    if not rows or not by_id:
        raise SystemExit(f"no {'rows written' if not rows else 'engine calls logged (hook?)'}; child output:\n"
                         f"{child_res['tail']}")


def lines(p: dict[str, Any], a: argparse.Namespace) -> list[str]:
    env, win, cost, mix = p["env"], p["windows"], p["cost"], p["mix"]
    out = [f"# sweep mix ({env['shape']}, {env['device']}, {env['date']})", "",
           f"- {env['forced']}; workers {a.workers or 'the sweep default'}, "
           f"chunk {a.chunk or 'the sweep default'}; videos {a.videos}; "
           f"{a.rounds} rounds",
           f"- setup {p['setup']}; child exit {p['child']['rc']} after {p['child']['child_s']} s"
           f"{' (stopped at the budget)' if p['child']['killed_at_budget'] else ''}; script wall {env['wall_s']} s, "
           f"CPU {env['cpu_s']} s (this process and its finished children)"]
    for k in ("all", "steady"):
        if win[k]:
            out.append(f"- window {k}: {win[k]}")
    if mix.get("busy"):
        every = p["all_rows"]["mix"].get("busy") or {}
        out.append(f"- GPU busy over the mix as seed 001 weights it: {mix['busy']['busy']} % "
                   f"({mix['busy']['covered']:.0%} of the mix's GPU time has a reading; each condition's busy in its "
                   f"calls after its first where it has them, weighted by the time the mix spends in it; "
                   f"{mix['weight_steady']:.0%} of the weight from such rows); over all rows, first visits "
                   f"included: {every.get('busy', '-')} %")
        held = p.get("held_fraction")
        if held and held == held:  # the goal's GPU busy counts the engine's waits for work too (decision 114)
            out.append(f"- with the engine held {held:.1%} of the {'steady' if win['steady'] else 'whole'} window "
                       f"(the rest waiting for the sweep to bring work): the GPU busy about "
                       f"{mix['busy']['busy'] * min(held, 1.0):.1f} % of the run's time")
    if mix.get("gpu_s") and mix.get("weight_steady", 1.0) < 1.0:
        out.append(f"- **{1 - mix['weight_steady']:.0%} of the measured weight is read from first visits only** "
                   f"(cells the budget cut before a second call): their GPU seconds over-stated and their "
                   "busy under-stated by the process's compiles and first plans; a longer --budget-s reaches them")
    if cost:
        out += [f"- mix (seed 001 weights, {mix['weight_measured']:.0%} of the weight measured, "
                f"{mix['weight_steady']:.0%} of that from rows after each cell's first call): "
                f"{cost['gpu_s_per_inference']} GPU s/inference, {mix['n_frames']:.0f} frames, "
                f"{mix['prompt_tokens']:.0f} prompt tokens, decode {mix['decode_s']:.3f} s",
                f"- inferences/s {cost['inferences_per_s']} at the held fraction "
                f"({cost['inferences_per_s_at_full_gpu']} at a full GPU); per 1,000 inferences "
                f"{cost['gpu_s_per_1000']} GPU-s ({cost['gpu_s_per_1000_at_full_gpu']} at a full GPU); over all "
                f"rows {p['all_rows']['cost'].get('gpu_s_per_1000', '-')}; the first visits took "
                f"{mix['first_extra_s']} GPU-s beyond their cells' steady cost (once a process)",
                f"- seed 001 ({cost['seed001_inferences']:,} inferences): {cost['seed001_gpu_hours']} GPU-hours; "
                f"wall h on 1/4/8 GPUs {cost['seed001_wall_h_1_4_8_gpus']}; decode cores per GPU needed "
                f"{cost['decode_cores_per_gpu_needed']} (have {cost['decode_cores']})"]
    free = sorted(f"{c['condition']}/{c['class']}" for c in p["cells"] if c["free"])
    if free:
        out.append(f"- cells at no cost (reused or NA rows): {', '.join(free)}")
    if mix.get("missing_cells"):
        out.append(f"- cells without a measured row (left out of the mix): {', '.join(mix['missing_cells'])}")
    out += ["", "| condition | seed count | rows | frames | prompt tokens | GPU s/inf | GPU busy in its calls % | "
            "latency s | decode s | decode/GPU |", "|---|---|---|---|---|---|---|---|---|---|"]
    for cond, c in p["per_condition"].items():
        out.append(f"| {cond} | {SEED_COUNTS[cond]:,} | {c['n']} | {c['n_frames']:.0f} | {c['prompt_tokens']:.0f} | "
                   f"{c['gpu_s']:.3f} | {c.get('busy_in_calls', '-')} | {c['infer_s']:.3f} | {c['decode_s']:.3f} | "
                   f"{c['decode_s'] / c['gpu_s'] if c['gpu_s'] else float('nan'):.1f} |")
    if p.get("timeline"):
        from benchmarks.shared.batch_timeline import parts_table, table

        out += ["", "Generation batches (`--timeline`, medians; `benchmarks/shared/batch_timeline.py`):", "",
                *table(p["timeline"])]
        prefill = parts_table(p["timeline"])
        if prefill:
            out += ["", "Their prefills' parts (ms, medians; `batch_timeline.parts`):", "", *prefill]
    return out


def _cpu() -> float:
    s, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime


if __name__ == "__main__":
    main()
