"""Run-log timing and launch-line parsing: unknown stays unknown, secrets never survive."""

from __future__ import annotations

from pathlib import Path

from benchcheck.data.launch import EXPECTED, changes, flags, lines_for_stage, read_launch_lines, redact
from benchcheck.data.runlog import read_run_log, stage_key, summarize, union_seconds
from benchcheck.store import append_rows


def test_union_counts_overlaps_once_and_skips_gaps() -> None:
    assert union_seconds([(0, 10), (5, 15), (100, 110)]) == 25
    assert union_seconds([]) == 0


def test_summarize_mixed_rows() -> None:
    t = summarize([{"started": 0, "ended": 100, "gpus": [0, 1], "items_attempted": 400},
                   {"started": 50, "ended": 150, "wall_s": 100, "gpus": "2,3", "items_attempted": 400,
                    "rows_added": 7, "engine": "openai", "model": "m"}])
    assert t.wall_s == 150 and t.gpu_s == 400 and t.items_per_s_per_gpu == 2.0
    assert t.rows_added == 7 and t.engines == ("openai",) and t.models == ("m",) and t.runs == 2
    assert not t.gpus_assumed
    unknown = summarize([{"step": 3}])
    assert unknown.wall_s is None and unknown.gpu_s is None and unknown.items_per_s_per_gpu is None
    # A run without "gpus" is one GPU (one shard per GPU); "gpus": 0 is a CPU run, not "unknown".
    mixed = summarize([{"wall_s": 10, "gpus": 0, "ok": 30, "items_attempted": 40}, {"wall_s": 20, "ok": 30}])
    assert mixed.wall_s == 30 and mixed.gpu_s == 20 and mixed.gpus_assumed and not mixed.cpu
    assert mixed.items == 60 and mixed.items_per_s_per_gpu == 3.0
    cpu = summarize([{"wall_s": 10, "gpus": 0, "ok": 30}, {"wall_s": 20, "gpus": [], "ok": 30}])
    assert cpu.cpu and not cpu.gpus_assumed and cpu.items_per_s_per_gpu is None and cpu.gpu_s == 0


def test_stage_keys_and_missing_log(tmp_path: Path) -> None:
    assert stage_key({"step": 2}) == stage_key({"step": "2"}) == stage_key({"step": "step2"}) == "step2"
    assert stage_key({"condition": "v_32_s224"}) == "v_32_s224" and stage_key({}) is None
    assert read_run_log(tmp_path / "run_log.jsonl") is None
    append_rows(tmp_path / "run_log.jsonl", [{"step": 1, "wall_s": 5, "gpus": 1, "items_attempted": 10}])
    with (tmp_path / "run_log.jsonl").open("a") as f:
        f.write('{"step": 1, "wall')
    log = read_run_log(tmp_path / "run_log.jsonl")
    assert log is not None and log["step1"].runs == 1 and log["step1"].items_per_s_per_gpu == 2.0


def test_redaction() -> None:
    line = ("HF_TOKEN=hf_abcdefghijklmnopqrstuv vllm serve m --api-key sk-123 --api-key=sk-456 "
            "-H 'Authorization: Bearer abc.def' OPENAI_API_KEY=xyz")
    out = redact(line)
    for secret in ("hf_abcdefghijklmnopqrstuv", "sk-123", "sk-456", "abc.def", "xyz"):
        assert secret not in out
    assert out.count("***") == 5 and "vllm serve m" in out


def test_flags_changes_and_model_lines(tmp_path: Path) -> None:
    assert flags("vllm serve m --a 1 --b=2 --flag --c '{\"image\": 1024}'") == {
        "--a": "1", "--b": "2", "--flag": "", "--c": '{"image": 1024}'}
    lines = ["vllm serve A --gpu-memory-utilization 0.9 --max-logprobs 20 --max-num-seqs 64",
             "vllm serve B --max-logprobs 20", "python -m benchcheck serve --model C --max-batch-size 8"]
    notes = changes(lines, {**EXPECTED["pool"], **EXPECTED["pool:step1"]})
    assert notes == ["--gpu-memory-utilization 0.9 (SPEC: 0.85)", "--gpu-memory-utilization not set (SPEC: 0.85)",
                     "--max-num-seqs not set (SPEC: 64)"]  # the benchcheck server is not judged
    assert lines_for_stage(lines, "step1", "B") == [lines[1]] and lines_for_stage(lines, "step1", None) == lines
    assert lines_for_stage(lines, "step1", "D") == []
    logged = ["# 2026-11-29 10:00:00 step 1 shard 0/2", "CUDA_VISIBLE_DEVICES=0 vllm serve A --port 8001",
              "# 2026-11-29 11:00:00 step 1 shard 1/2", "CUDA_VISIBLE_DEVICES=0 vllm serve A --port 8001",
              "# 2026-11-29 12:00:00 step 2 shard 0/1", "CUDA_VISIBLE_DEVICES=0 vllm serve A --port 8001 --x 1"]
    assert lines_for_stage(logged, "step1", "B") == [logged[1]]  # the launcher's header wins over the model
    assert lines_for_stage(logged, "step2", None) == [logged[5]]
    (tmp_path / "launch_params.txt").write_text("\n  \nvllm serve A --api-key s3cret\n")
    assert read_launch_lines([tmp_path / "launch_params.txt", tmp_path / "absent.txt"]) == [
        "vllm serve A --api-key ***"]
