"""HFConfig: every knob in one frozen record, ops by name, a hash that tells fast paths apart."""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from benchcheck.engines.hf.config import OPS, HFConfig

# The defaults' hash, pinned: a change to any default (or to what the hash covers) must be
# deliberate, since rows written before and after would then carry different hashes.
DEFAULT_HASH = "d377f93c6b06cdf4"  # qkv_packed on (131); decode_join on CUDA (129); stage_ahead on CUDA (125); ...


def test_defaults_hash_as_pinned_in_this_and_another_process() -> None:
    assert HFConfig().hash == DEFAULT_HASH
    code = "from benchcheck.engines.hf.config import HFConfig; print(HFConfig().hash)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={"PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src"), "PYTHONHASHSEED": "7"})
    assert out.stdout.strip() == DEFAULT_HASH
    assert len(DEFAULT_HASH) == 16 and int(DEFAULT_HASH, 16) >= 0


def test_a_fast_path_off_changes_the_hash_and_alike_configs_hash_alike() -> None:
    base = HFConfig()
    assert HFConfig(ops=("-swiglu",)).hash != base.hash
    assert HFConfig(ops=("-swiglu",)).hash != HFConfig(ops=("-varlen_triton",)).hash
    assert HFConfig(ops=("+swiglu",)).hash == base.hash  # on by default: the same behaviour
    assert HFConfig(ops=("-swiglu", "+swiglu")).hash == base.hash  # the last entry wins
    assert HFConfig(pacing_depth=4).hash != base.hash
    assert HFConfig(ops=("-swiglu",)).op("swiglu") is False and base.op("swiglu") is True
    # A device-dependent default: on CUDA only unless named; naming it is another behaviour.
    assert base.op("varlen", cuda=True) and not base.op("varlen", cuda=False)
    assert HFConfig(ops=("+varlen",)).op("varlen", cuda=False) and HFConfig(ops=("+varlen",)).hash != base.hash
    assert HFConfig(ops=("-swiglu",)).changed() == {"ops": ["-swiglu"]}
    assert base.changed() == {}


def test_every_op_and_knob_has_a_reason_citing_a_decision() -> None:
    assert all(default in ("on", "cuda", "off") and re.search(r"\(decision \d{3}\)$", why)
               for default, why in OPS.values())
    src = Path(__file__).resolve().parents[2] / "src" / "benchcheck" / "engines" / "hf" / "config.py"
    text = src.read_text()
    for f in dataclasses.fields(HFConfig):
        if f.name != "ops":  # each knob's line is preceded by its one-line reason
            before = text.split(f"    {f.name}: ", 1)[0].rstrip().splitlines()[-1]
            assert before.strip().startswith("#") and re.search(r"decision \d{3}", before), f.name


@pytest.mark.parametrize(("ops", "says"), [
    (("+swigl",), "no op named 'swigl'"),
    (("swiglu",), r"is not '\+name' or '-name'"),
])
def test_unknown_or_unsigned_op_is_one_line(ops: tuple[str, ...], says: str) -> None:
    with pytest.raises(ValueError, match=says) as e:
        HFConfig(ops=ops)
    assert "\n" not in str(e.value)


def test_frozen_and_checked() -> None:
    cfg = HFConfig()
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.pacing_depth = 3  # type: ignore[misc]
    for bad in ({"max_batch_size": 0}, {"chunk_growth": "2"}, {"frame_memo_bytes": -1}, {"decode_processes": -1}):
        with pytest.raises(ValueError, match="hf config: "):
            HFConfig(**bad)  # type: ignore[arg-type]


def test_cli_pairs_and_json_file(tmp_path: Path) -> None:
    cfg = HFConfig.parse(["max_batch_size=64", "ops=-swiglu,+pacing", "sort_window=none", "ops=-unpadded"])
    assert cfg == HFConfig(max_batch_size=64, ops=("-swiglu", "+pacing", "-unpadded"))
    f = tmp_path / "hf.json"
    f.write_text(json.dumps({"max_batch_size": 64, "ops": ["-swiglu", "+pacing"]}))
    assert HFConfig.parse([str(f), "ops=-unpadded"]).hash == cfg.hash
    for args, says in ((["nope=1"], "no knob named 'nope'"), (["ops=+nope"], "no op named 'nope'"),
                       (["missing.json"], "neither KEY=VALUE nor a JSON file"), (["max_batch_size=x"], "integer")):
        with pytest.raises(ValueError, match=says) as e:
            HFConfig.parse(args)
        assert "\n" not in str(e.value)


def _screen(tmp_path: Path, model: Path, name: str, *hf_config: str) -> tuple[int, str, Path]:
    from click.testing import CliRunner

    from benchcheck.cli import main

    items = tmp_path / "items.jsonl"
    items.write_text('{"item_id": "a", "question": "What is red?", "options": ["apple", "sky"], "answer": 0}\n'
                     '{"item_id": "b", "question": "What is blue?", "options": ["grass", "sky"], "answer": 1}\n')
    results = tmp_path / name
    args = ["screen", "--items", str(items), "--step", "1", "--engine", "hf", "--model", str(model),
            "--results", str(results), "--device", "cpu", "--no-progress"]
    for c in hf_config:
        args += ["--hf-config", c]
    res = CliRunner().invoke(main, args)
    return res.exit_code, res.output, results


def _hashes(results: Path) -> tuple[set[str], set[str]]:
    rows = [json.loads(x) for p in (results / "step1").glob("*.jsonl") for x in p.read_text().splitlines() if x]
    log = [json.loads(x) for x in (results / "run_log.jsonl").read_text().splitlines() if x]
    return {r["engine_config_hash"] for r in rows}, {r["engine_config_hash"] for r in log}


def test_rows_and_run_log_carry_the_config_hash_and_a_fast_path_off_changes_it(tiny_model: Path,
                                                                                tmp_path: Path) -> None:
    """Two screens that differ only in a fast path (prefix sharing off): the same scores, told apart
    by the hash in every row and in the run log; the typed record reads it; the run log's timing
    lists it."""
    from benchcheck.data.runlog import read_run_log
    from benchcheck.records import parse_row

    code, out, default = _screen(tmp_path, tiny_model, "default")
    assert code == 0, out
    code, out, apart = _screen(tmp_path, tiny_model, "apart", "ops=-share_prefixes", "pacing_depth=4")
    assert code == 0, out
    other = HFConfig(pacing_depth=4, ops=("-share_prefixes",)).hash
    assert _hashes(default) == ({DEFAULT_HASH}, {DEFAULT_HASH})
    assert _hashes(apart) == ({other}, {other}) and other != DEFAULT_HASH
    row = json.loads(next((apart / "step1").glob("*.jsonl")).read_text().splitlines()[0])
    rec = parse_row(row)
    assert rec is not None and rec.engine_config_hash == other
    timing = read_run_log(apart / "run_log.jsonl")
    assert timing is not None and {t.engine_configs for t in timing.values()} == {(other,)}


def test_unknown_op_on_the_command_line_is_one_line_exit_2(tiny_model: Path, tmp_path: Path) -> None:
    code, out, _ = _screen(tmp_path, tiny_model, "bad", "ops=+swigl")
    assert code == 2, out
    assert "Traceback" not in out
    [line] = [x for x in out.splitlines() if x.startswith("error:")]
    assert "no op named 'swigl'" in line, line


def test_decode_lookback_is_a_checked_knob_in_the_hash() -> None:
    assert HFConfig().decode_lookback == 1
    assert HFConfig(decode_lookback=0).hash != HFConfig().hash
    assert HFConfig.parse(["decode_lookback=4"]).decode_lookback == 4
    with pytest.raises(ValueError, match="decode_lookback must be 0 or more"):
        HFConfig(decode_lookback=-1)
