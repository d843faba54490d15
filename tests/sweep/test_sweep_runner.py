"""The runner end to end with the scripted engine on real stored videos: counts, resume, kill."""

from __future__ import annotations

import collections
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sweep_helpers import RULES, mixed_items, write_rules

from benchcheck.items import load_items
from benchcheck.sweep.cli_run import SweepArgs, dry_run, run
from benchcheck.sweep.engine import SweepEngine
from benchcheck.sweep.plan import count_cells
from benchcheck.sweep.results import KEY, SweepPaths, read_csv, read_csv_all

CONDS = "v_blind,v_1,v_32,v_32_s448,v_128_s224,v_fps0.25_s224"






def _args(tmp: Path, store: Path, rules: Path, conds: str = CONDS, **kw: object) -> SweepArgs:
    loaded = load_items(mixed_items(tmp))
    return SweepArgs(loaded.items, str(store), SweepPaths.under(tmp / "fp" / "results"), conds,
                     engine=SweepEngine("scripted", rules=str(rules)), progress=False, **kw)  # type: ignore[arg-type]


def _observed(paths: SweepPaths) -> dict[tuple[str, str], collections.Counter[str]]:
    out: dict[tuple[str, str], collections.Counter[str]] = collections.defaultdict(collections.Counter)
    for r in read_csv(paths.csv):
        meta = json.loads(r["meta"] or "{}")
        kind = "reuse" if "reused_from" in meta else {"NA": "na"}.get(r["status"], "todo")
        if r["status"] == "error":  # a cell that could not be asked: its error row says why
            kind = "failure" if meta["error_kind"] in ("no video", "frame plan") else "error"
        out[(r["bench"], r["condition"])][kind] += 1
    return out


def test_dry_run_counts_equal_what_the_full_run_writes(tmp_path: Path, store: Path) -> None:
    rules = write_rules(tmp_path / "rules.json", RULES)
    a = _args(tmp_path, store, rules, decode_workers=1)
    lines: list[str] = []
    cells = dry_run(a, lines.append)
    planned = {k: collections.Counter({kk: v for kk, v in n.kinds.items() if kk != "done" and v})
               for k, n in count_cells(cells).items()}
    assert any("TOTAL todo=" in line for line in lines)
    summary = run(a, lambda s: None)
    observed = _observed(a.paths)
    assert {k: v for k, v in observed.items() if v} == {k: v for k, v in planned.items() if v}
    assert summary.written["NA"] == 2 and summary.written["reuse"] == sum(c.kind == "reuse" for c in cells)

    rows = read_csv(a.paths.csv)
    by = {(r["bench"], r["item_id"], r["condition"]): r for r in rows}
    assert by[("Alpha", "Alpha_3", "v_1")]["status"] == "unparsed"
    assert by[("Alpha", "Alpha_3", "v_1")]["correct"] == "0"
    assert by[("Alpha", "Alpha_0", "v_1")]["pred"] == "A" and by[("Alpha", "Alpha_0", "v_1")]["correct"] == "1"
    assert by[("Beta", "Beta_0", "v_1")]["correct"] == "0"  # gold B, model says A
    reused = by[("Alpha", "Alpha_2", "v_32_s448")]
    assert json.loads(reused["meta"])["reused_from"] == "v_32"
    assert reused["pred"] == by[("Alpha", "Alpha_2", "v_32")]["pred"]
    assert by[("Alpha", "Alpha_1", "v_fps0.25_s224")]["status"] == "NA"
    capped = json.loads(by[("Alpha", "Alpha_3", "v_128_s224")]["meta"])
    assert capped["capped"] is True and by[("Alpha", "Alpha_3", "v_128_s224")]["n_frames"] == "100"
    no_video = by[("Alpha", "Alpha_4", "v_1")]
    assert no_video["status"] == "error" and json.loads(no_video["meta"])["error_kind"] == "no video"
    assert by[("Alpha", "Alpha_4", "v_blind")]["status"] == "ok"
    raw = [json.loads(x) for x in a.paths.raw("v_1", "Alpha").read_text().splitlines()]
    assert {r["item_id"] for r in raw} == {"Alpha_0", "Alpha_1", "Alpha_2", "Alpha_3"}
    assert (a.paths.results / "p1_raw" / "v_1" / "run_spec.json").is_file()
    timing = [json.loads(x) for x in a.paths.timing.read_text().splitlines()]
    assert {"condition", "infer", "infer_s", "decode_s", "prompt_tokens"} <= set(timing[0])
    assert a.paths.runner_log.read_text().count("start:") == 1

    # A rerun has nothing left and leaves every file as it was.
    before = a.paths.csv.read_bytes()
    again = run(a, lambda s: None)
    assert sum(again.written.values()) == 0 and a.paths.csv.read_bytes() == before
    after: list[str] = []
    dry_run(a, after.append)
    assert after[-1].startswith("TOTAL todo=0 NA=0 reuse=0")


def _cli(tmp: Path, store: Path, rules: Path, *extra: str) -> list[str]:
    argv = [sys.executable, "-m", "benchcheck", "sweep", "run"]
    for p in mixed_items(tmp):
        argv += ["--items", str(p)]
    return [*argv, "--store", str(store), "--results", str(tmp / "fp" / "results"), "--engine", "scripted",
            "--rules", str(rules), "--decode-workers", "0", "--no-progress", *extra]


def _keys(path: Path) -> list[tuple[str, ...]]:
    return [tuple(r[k] for k in KEY) for r in read_csv_all(path)]


def test_killed_sweep_reruns_to_completion_without_duplicates_or_edits(tmp_path: Path, store: Path) -> None:
    csv_path = tmp_path / "fp" / "results" / "conditions_results.csv"
    fast = write_rules(tmp_path / "fast.json", RULES)
    slow = write_rules(tmp_path / "slow.json", [{"match": "", "delay_s": 0.4}, *RULES])
    subprocess.run(_cli(tmp_path, store, fast, "--conds", "v_blind"), check=True, capture_output=True, timeout=120)
    pre = csv_path.read_bytes()
    assert len(_keys(csv_path)) == 9
    proc = subprocess.Popen(_cli(tmp_path, store, slow, "--conds", CONDS), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 90
    while len(_keys(csv_path)) < 9 + 8 and time.monotonic() < deadline:
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    killed = csv_path.read_bytes()
    assert killed.startswith(pre) and len(_keys(csv_path)) >= 9 + 8
    done = subprocess.run(_cli(tmp_path, store, fast, "--conds", CONDS), capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr
    final = csv_path.read_bytes()
    assert final.startswith(killed)
    keys = _keys(csv_path)
    assert len(keys) == len(set(keys))
    dry_argv = [sys.executable, "-m", "benchcheck", "sweep", "dry-run"]
    for p in mixed_items(tmp_path):
        dry_argv += ["--items", str(p)]
    dry_argv += ["--store", str(store), "--results", str(tmp_path / "fp" / "results"), "--conds", CONDS]
    dry = subprocess.run(dry_argv, capture_output=True, text=True, timeout=120)
    assert dry.returncode == 0, dry.stderr
    assert dry.stdout.strip().splitlines()[-1].startswith("TOTAL todo=0 NA=0 reuse=0"), dry.stdout


def test_two_processes_on_the_same_work_write_each_row_once(tmp_path: Path, store: Path) -> None:
    rules = write_rules(tmp_path / "r.json", [{"match": "", "delay_s": 0.05}, *RULES])
    procs = [subprocess.Popen(_cli(tmp_path, store, rules, "--conds", "v_blind,v_1"), stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE) for _ in range(2)]
    for p in procs:
        assert p.wait(timeout=180) == 0, p.stderr.read().decode() if p.stderr else ""
    keys = _keys(tmp_path / "fp" / "results" / "conditions_results.csv")
    # blind: all 9; v_1: the 7 items with a stored video and the error rows of the 2 without
    assert len(keys) == len(set(keys)) == 9 + 9


@pytest.mark.parametrize("max_len", [32768])
def test_a_context_too_small_for_the_budget_stops_before_any_request(tmp_path: Path, store: Path,
                                                                      max_len: int) -> None:
    from benchcheck.engines.rules.scripted import ScriptedEngine
    from benchcheck.serve.app import build_app
    from loopback import thread_server

    engine = ScriptedEngine(RULES, name="small", max_model_len=max_len)
    with thread_server(build_app(engine, "small")) as url:
        argv = _cli(tmp_path, store, write_rules(tmp_path / "r.json", RULES), "--conds", "v_1")
        i = argv.index("--engine")
        argv[i:i + 4] = ["--engine", "openai", "--endpoint", f"{url}/v1", "--model", "small"]
        res = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert res.returncode == 2
    assert "32,768 tokens < 58,128" in res.stderr and "never lowered" in res.stderr
    assert "Traceback" not in res.stderr
    assert not (tmp_path / "fp" / "results" / "conditions_results.csv").exists()


def test_a_group_another_process_holds_is_left_to_it(tmp_path: Path, store: Path) -> None:
    from benchcheck.lease import try_lease

    rules = write_rules(tmp_path / "rules.json", RULES)
    a = _args(tmp_path, store, rules, conds="v_blind,v_1", decode_workers=0)
    held = try_lease(a.paths.raw("v_1", "Alpha"))  # another live process works Alpha x v_1
    assert held is not None
    lines: list[str] = []
    with held:
        first = run(a, lines.append)
    assert first.held == 4 and "4 held by another process" in lines[-1]
    keys = {(r["bench"], r["condition"]) for r in read_csv(a.paths.csv)}
    assert ("Alpha", "v_1") not in keys and {("Alpha", "v_blind"), ("Beta", "v_1")} <= keys
    again = run(a, lambda s: None)  # the lease is free now: the same command does the rest
    assert again.written["ok"] + again.written["unparsed"] == 4 and again.held == 0


def test_calls_keep_a_one_call_engine_fed_while_frames_decode(tmp_path: Path) -> None:
    from benchcheck.sweep.cli_run import SERIAL_CHUNK, SweepCalls, sweep_calls

    def args(engine: SweepEngine, **kw: object) -> SweepArgs:
        return SweepArgs((), str(tmp_path), SweepPaths.under(tmp_path / "r"), "v_blind", engine=engine,
                         progress=False, **kw)  # type: ignore[arg-type]

    hf = SweepEngine("hf", model=str(tmp_path))
    # hf: calls of several items (they share decode steps), and enough units that each decoder
    # has 4 items to build while one unit is on the device, 64 items at most
    assert SERIAL_CHUNK == 8
    assert sweep_calls(args(hf), 1, 15) == SweepCalls(9, 8)  # 60 items ahead: 8 units, and the one on the device
    assert sweep_calls(args(hf), 1, 127) == SweepCalls(9, 8)  # a large host: 64 items ahead, not 508
    assert sweep_calls(args(hf), 1, 0) == SweepCalls(2, 8)  # decoding in the unit's thread overlaps too
    assert sweep_calls(args(hf, chunk=1), 1, 8) == SweepCalls(33, 1)
    assert sweep_calls(args(hf, workers=3), 1, 8) == SweepCalls(3, 8)
    # an engine that runs many calls at once: that many units of one item
    assert sweep_calls(args(SweepEngine("scripted")), 64, 8) == SweepCalls(64, 1)
    served = SweepEngine("openai", endpoints=("http://127.0.0.1:1/v1", "http://127.0.0.1:2/v1"))
    assert sweep_calls(args(served), 1, 8) == SweepCalls(12, 1)  # seed 001: 6 per endpoint, one item each
