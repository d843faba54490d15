"""The batch timeline's reading (``benchmarks.shared.batch_timeline``): marks with a known truth."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
from benchmarks.shared.batch_timeline import parts, parts_table, phases, summarize, table


def simulate(rng: random.Random, launch: str) -> tuple[list[list[Any]], float]:
    """A batch of stretches: in each the host spends ``host`` ms and launches work the device
    runs for ``work`` ms in launch order (one stream); the device may still be busy with an
    earlier batch at the start (or idle since before it). Each stretch's work is launched at its
    start, at its end, or in pieces spread over it (``launch``). Returns the marks as the
    recorder takes them (host ms; the device's ms at an event recorded at the mark, which it
    reaches once recorded and done with all before) and the device's true idle ms from the
    batch's start to its last mark."""
    t = 0.0
    busy_to = rng.uniform(-5.0, 20.0)  # the device done with all launched so far
    marks: list[list[Any]] = [["start", 0.0, max(busy_to, 0.0), 1, 0.0]]
    idle = 0.0
    for k in range(rng.randint(2, 8)):
        host, work = rng.uniform(0.1, 30.0), rng.uniform(0.0, 40.0)
        n = {"start": 1, "end": 1, "spread": rng.randint(2, 6)}[launch]
        at = {"start": [t], "end": [t + host]}.get(launch) or [t + host * j / n for j in range(n)]
        for a in at:  # each piece runs once the device is free and the piece launched
            begin = max(busy_to, a)
            idle += begin - max(busy_to, 0.0)
            busy_to = begin + work / n
        t += host
        marks.append([f"p{k}", t, max(busy_to, t), 1, t / 2])
    idle += max(0.0, t - max(busy_to, 0.0))  # done before the host's last mark
    return marks, idle


@pytest.mark.parametrize("seed", range(30))
def test_idle_max_bounds_the_true_wait_and_is_it_when_work_comes_last(seed: int) -> None:
    for launch in ("start", "end", "spread"):
        marks, truth = simulate(random.Random(seed), launch)
        got = phases(marks)
        assert truth <= got["idle_max_ms"] + 1e-9, launch
        if launch == "end":
            assert got["idle_max_ms"] == pytest.approx(truth)
        assert all(v >= 0 for k, v in got.items() if k.startswith("lag@"))
    # A device busy past every mark never waited.
    busy = [[m[0], m[1], float(m[1]) + 100.0, 1] for m in simulate(random.Random(seed), "spread")[0]]
    busy[0][1] = 0.0
    assert phases(busy)["idle_max_ms"] == 0.0


def test_marks_without_events_are_host_times_only_and_repeats_are_numbered() -> None:
    marks = [["start", 0.0, None, 0, 0.0], ["step_call", 5.0, 5.5, 7, 1.5], ["step_call", 9.0, 12.0, 7, 2.0],
             ["loop_end", 10.0, None, 0, 2.5]]
    got = phases(marks)
    assert got["step_call"] == 5.0 and got["step_call2"] == 9.0
    assert got["cpu@step_call2"] == 2.0 and got["cpu@loop_end"] == 2.5
    assert got["lag@step_call"] == 0.5 and "lag@loop_end" not in got
    # Each stretch's work launched at its end: the device waited 5, then 3.5 ms.
    assert got["idle_max_ms"] == 8.5


def test_summary_takes_medians_by_condition(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"

    def batch(cond: str, rows: int, launch: float, lag: float, warm: bool, retries: int = 0) -> dict[str, Any]:
        step = [["eager_fwd", launch + 1, None, 2, 1.0],
                ["eager_fwd_done", launch + 3, launch + 3.5, 2, 2.0]] if warm else []
        marks = [["start", 0.0, None, 1, 0.0], ["collated", 1.0, 1.0, 1, 0.5], ["prefill_call", 1.0, None, 1, 0.5],
                 ["step_call", launch, launch + lag, 1, launch / 2], *step,
                 ["capture_fwd", launch + 4, None, 2, 3.0], ["step_done", launch + 6, launch + lag + 1, 1, 4.0],
                 ["loop_end", launch + 8, launch + lag + 2, 1, 5.0]]
        return {"id": f"{cond}|x", "rows": rows, "marks": marks, "mem": {"num_alloc_retries": retries}}

    lines = [batch("v_1", 2, 10, 5, True, 1), batch("v_1", 4, 20, 7, False), batch("v_1", 4, 60, 9, False),
             batch("v_32", 8, 5, 0, False)]
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    got = summarize(path)
    v1 = got["v_1"]
    assert (v1["batches"], v1["rows"], v1["warm_ups"], v1["num_alloc_retries"]) == (3, 3.33, 1, 1)
    assert v1["prefill_host"] == 19.0 and v1["prefill_lag"] == 7 and v1["first_step"] == 6
    assert v1["prefill_cpu"] == 9.5  # the thread's CPU from the prefill's call (0.5) to the step's (launch / 2)
    # Caught up at every mark (lag 0): the device waited most of the batch at most.
    assert got["v_32"]["idle_max_share"] > got["v_1"]["idle_max_share"]
    md = table(got)
    assert md[2].startswith("| v_1 | 3 | 3.33 | 28 | 19.0 (9.5) | 7 | 6 | 1 |")


def jpeg() -> bytes:
    """A real 64x64 JPEG."""
    import io

    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (64, 64), (90, 140, 30)).save(buf, "JPEG")
    return buf.getvalue()


def prefill_marks(vision: bool) -> list[list[Any]]:
    """A prefill's marks with known parts: the call at 1 ms; the tower from 3 ms: 2 ms of set-up,
    its first block 9 ms (4 of CPU), the others 2 ms each, 0.5 ms between blocks, its device 40 ms
    in all; the merge 6 ms (5 of CPU), the device 0.5 ms behind at the LM's start; the LM's set-up
    1 ms, its first layer 12 ms (6 of CPU), then 3 ms each on the host and 4 on the device, with 1
    ms (0.5 of CPU) between layers after each of the first two; the first step called 7 ms after
    the last layer."""
    marks: list[list[Any]] = [["start", 0.0, None, 1, 0.0], ["prefill_call", 1.0, None, 1, 0.5]]
    t, cpu = 3.0, 1.0
    if vision:
        marks.append(["vision", t, t + 1.0, 1, cpu])
        t += 2.0
        for k in range(4):
            marks.append(["vblock_in", t, None, 1, cpu])
            t += 9.0 if k == 0 else 2.0
            cpu += 4.0 if k == 0 else 1.0
            marks.append(["vblock", t, None, 1, cpu])
            t += 0.5
        marks.append(["vision_done", t, 3.0 + 1.0 + 40.0, 1, cpu])
        t += 6.0
        cpu += 5.0
    marks.append(["lm", t, t + 0.5, 1, cpu])
    dev = t + 0.5
    t += 1.0
    for k in range(5):
        marks.append(["layer_in", t, dev, 1, cpu])
        t += 12.0 if k == 0 else 3.0
        cpu += 6.0 if k == 0 else 3.0
        dev += 4.0
        marks.append(["layer", t, dev, 1, cpu])
        if k < 2:
            t, cpu = t + 1.0, cpu + 0.5
    marks.append(["lm_done", t + 1.0, None, 1, cpu])
    marks.append(["step_call", t + 7.0, dev + 1.0, 1, cpu])
    return marks


def test_the_prefills_parts_are_read_from_its_module_marks(tmp_path: Path) -> None:
    got = parts(prefill_marks(vision=True))
    assert got["pre"] == 2.0 and got["tower_setup"] == 2.0 and got["vision_dev"] == 40.0
    assert got["vblock1"] == 9.0 and got["vblock1_cpu"] == 4.0 and got["vblock"] == 2.0
    assert got["vision"] == 2.0 + 9.0 + 3 * 2.0 + 4 * 0.5 and got["vision_cpu"] == 7.0
    assert got["merge"] == 6.0 and got["merge_cpu"] == 5.0 and got["lag_lm"] == 0.5 and got["lm_setup"] == 1.0
    assert got["layer1"] == 12.0 and got["layer1_cpu"] == 6.0 and got["layer"] == 3.0 and got["layer_dev"] == 4.0
    assert got["layer_between"] == 2.0 and got["layer_between_cpu"] == 1.0 and got["tail"] == 7.0
    blind = parts(prefill_marks(vision=False))
    assert blind["pre"] == 2.0 and "vision" not in blind and "merge" not in blind and blind["layer1"] == 12.0
    assert parts([["start", 0.0, None, 1, 0.0], ["step_call", 3.0, None, 1, 1.0]]) == {}
    path = tmp_path / "t.jsonl"
    path.write_text("".join(json.dumps({"id": f"{c}|x", "rows": 2, "marks": prefill_marks(c == "v_1"), "mem": {}})
                            + "\n" for c in ("v_1", "v_blind")))
    summary = summarize(path)
    assert summary["v_1"]["part_merge"] == 6.0 and summary["v_blind"]["part_layer_dev"] == 4.0
    md = parts_table(summary)
    assert md[2] == ("| v_1 | 2.0 | 19.0 (7.0) / 40.0 | 2.0 | 9.0 (4.0) / 2.0 | 6.0 (5.0) | 0.5 | 1.0 | 12.0 (6.0) | "
                     "3.0 / 4.0 | 2.0 (1.0) | 7.0 |")
    assert md[3].startswith("| v_blind | 2.0 | nan (nan) / nan |")
    # Batches without module marks (an older timeline): no table.
    path.write_text(json.dumps({"id": "v_1|x", "rows": 1, "marks": [["start", 0.0, None, 1, 0.0]], "mem": {}}))
    assert parts_table(summarize(path)) == []


def keep_engine_functions(monkeypatch: pytest.MonkeyPatch) -> None:
    """The engine functions ``install`` replaces, given back after the test (monkeypatch restores them)."""
    from benchcheck.engines.hf import engine as engine_mod
    from benchcheck.engines.hf.forward import generate as gen

    for owner, name in ((engine_mod, "upload"), (engine_mod, "greedy_start"), (gen.DecodeStep, "__call__"),
                        (gen.DecodeStep, "_forward")):
        monkeypatch.setattr(owner, name, getattr(owner, name))


def test_the_hooks_record_generation_batches_only(tiny_model: Path, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    # The real engine on the CPU (no events): a scoring call's collate begins no batch that is
    # written, each generation batch is written once with its marks in order, and the hooks are
    # the engine's own functions again after the test (monkeypatch restores what install replaced).
    from benchmarks.shared.batch_timeline import install

    from benchcheck.engines.base import GenerateRequest, ScoreRequest
    from benchcheck.engines.hf.engine import HFEngine

    keep_engine_functions(monkeypatch)
    engine = HFEngine(tiny_model, device="cpu")
    engine.stop_ids = set()
    path = tmp_path / "t.jsonl"
    rec = install(path)
    try:
        engine.score_sync([ScoreRequest("s0", "Which is it? A or B.")])
        reqs = [GenerateRequest(f"g{i}", f"Say something {i}" + " more" * i, (), max_tokens=3) for i in range(2)]
        engine.generate_sync(reqs)
        rec.flush([r.request_id for r in reqs])
        seen = [GenerateRequest("v0", "What is shown?", (jpeg(),), max_tokens=2)]
        engine.generate_sync(seen)
        rec.flush(["v0"])
        # The part hooks on the model's own modules only (gone after close, below).
        hooked = {type(m).__name__ for m in engine.model.modules() if m._forward_hooks}
        assert hooked == {"Qwen3VLVisionModel", "Qwen3VLVisionBlock", "Qwen3VLTextModel", "Qwen3VLTextDecoderLayer"}
    finally:
        rec.close()
    assert not any(m._forward_hooks or m._forward_pre_hooks for m in engine.model.modules())
    batches = [json.loads(line) for line in path.read_text().splitlines()]
    assert len(batches) == 2 and batches[0]["id"] == "g0" and batches[0]["rows"] == 2
    labels = [m[0] for m in batches[0]["marks"]]
    assert labels[:3] == ["start", "collated", "prefill_call"] and labels[-1] == "loop_end"
    assert labels.count("step_call") == 2  # 3 tokens: the prefill's, then two eager steps
    # Module marks in the prefill only (the decode steps run the same layers, unmarked).
    layers = engine.model.config.text_config.num_hidden_layers
    prefill = labels[labels.index("prefill_call") + 1:labels.index("step_call")]
    assert prefill == ["lm", *["layer_in", "layer"] * layers, "lm_done"] and labels.count("layer") == layers
    hosts = [m[1] for m in batches[0]["marks"]]
    assert hosts == sorted(hosts) and all(m[2] is None for m in batches[0]["marks"])
    # With an image: the tower and its blocks first, then the language model.
    vlabels = [m[0] for m in batches[1]["marks"]]
    depth = engine.model.config.vision_config.depth
    tower = vlabels[vlabels.index("prefill_call") + 1:vlabels.index("lm")]
    assert tower == ["vision", *["vblock_in", "vblock"] * depth, "vision_done"]
    assert set(parts(batches[1]["marks"])) >= {"pre", "vision", "tower_setup", "merge", "lm_setup", "layer1", "tail"}
    rec.flush(["nothing"])  # nothing pending: nothing written twice
    assert len(path.read_text().splitlines()) == 2


def test_a_calls_batches_are_its_own_where_the_engine_launches_elsewhere(tiny_model: Path, tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    # Op launch_thread: the batches launch on the engine's own thread. Inside ``call`` they are
    # the calling thread's call's, written by its flush; two calls from two threads each get theirs.
    from concurrent.futures import ThreadPoolExecutor

    from benchmarks.shared.batch_timeline import install

    from benchcheck.engines.base import GenerateRequest
    from benchcheck.engines.hf.engine import HFEngine

    keep_engine_functions(monkeypatch)
    engine = HFEngine(tiny_model, device="cpu")
    engine = engine.with_config(engine.config.with_ops("+launch_thread"))
    engine.stop_ids = set()
    path = tmp_path / "t.jsonl"
    rec = install(path)

    def one(k: int) -> None:
        reqs = [GenerateRequest(f"c{k}_{i}", f"Say {k} {i}" + " more" * i, (), max_tokens=2) for i in range(k + 1)]
        with rec.call():
            engine.generate_sync(reqs)
            rec.flush([r.request_id for r in reqs])

    try:
        with ThreadPoolExecutor(2) as pool:
            list(pool.map(one, range(2)))
    finally:
        rec.close()
    got = {json.loads(line)["id"]: json.loads(line)["rows"] for line in path.read_text().splitlines()}
    assert got == {"c0_0": 1, "c1_0": 2}
