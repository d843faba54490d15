"""Seed 003's dataset side end to end: ``qa run --dataset-name/--dataset-file`` with a fake
``nvdataset`` on PATH that checks its arguments and records the environment it got.

Credential order and the ``dss credential:`` line, what reaches the nvdataset child, the VLM child
and the judge host; the tenancy and 403 hints; no credential, no CLI, a hung download; an extracted
dataset named by VSS_EVAL_DATASET; the default output folder; ``--inline-media`` with a command."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from qa_servers import RecordingHost, completion

from benchcheck.qa.dataset_fetch import CREDENTIAL_VARS, child_env, dss_credential, failure_hint
from loopback import thread_server

NAME, FILE = "vss-devx-base", "dataset_single_turn.json"
SECRETS = {"NVDATASET_API_KEY": "nvds-personal-key-4242", "NVDATASET_NGC_API_KEY": "nvds-ngc-key-4242",
           "NGC_API_KEY": "nvapi-global-key-4242", "OPENAI_API_KEY": "sk-openai-key-4242",
           "HF_TOKEN": "hf_abcdefghijklmnopqrstuvwx"}
TENANCY = {"NVDATASET_TENANTID": "tenant-7", "NVDATASET_GROUPID": "group-3"}
ITEMS: list[dict[str, Any]] = [
    {"id": "q1", "query": "In warehouse_01, is the forklift moving? [say:yes]", "ground_truth": "yes",
     "evaluation_method": ["qa"]},
    {"id": "q2", "query": "How many people enter? [say:2]", "ground_truth": "2",
     "evaluation_method": ["qa", "trajectory"],
     "trajectory_ground_truth": [{"tool": "video_understanding", "params": {"sensor_id": "lobby_02"}}]},
    {"id": "q3", "query": "Which camera do you mean? [say:x]", "ground_truth": "Ask which camera",
     "evaluation_method": ["qa"]},  # names no clip: a clarification test, skipped
    {"id": "r1", "query": "Write a report on warehouse_01", "ground_truth": "gt/dev_base_001_report.json",
     "evaluation_method": ["report"]},
]
VLM = '''import json, os, re, sys
with open(os.environ["QA_ENVDUMP"], "a") as f:
    f.write(json.dumps({"argv": sys.argv[1:], "env": sorted(os.environ)}) + "\\n")
q = sys.argv[sys.argv.index("--prompt") + 1]
if "[fail422]" in q:
    print("HTTP 422 Unprocessable: 'content' Input should be a valid string", file=sys.stderr); sys.exit(1)
if "[exit4]" in q:
    print("service rt_vlm missing from the recorded config", file=sys.stderr); sys.exit(4)
m = re.search(r"\\[say:([^\\]]*)\\]", q)
print(json.dumps({"answer": m.group(1) if m else "?", "model": "vlm-x"}))
'''


def _source(tmp: Path, clips: Path, items: list[dict[str, Any]] = ITEMS) -> Path:
    """What the Dataset Service holds for the dataset (README_eval's tree)."""
    src = tmp / "dss_source"
    (src / "videos").mkdir(parents=True)
    (src / "gt").mkdir()
    shutil.copy(clips / "a.mp4", src / "videos" / "warehouse_01.mp4")
    shutil.copy(clips / "sub" / "b.mp4", src / "videos" / "lobby_02.mp4")
    (src / FILE).write_text(json.dumps(items))
    (src / "dataset_multi_turn.json").write_text("[]")
    (src / "gt" / "dev_base_001_report.json").write_text("{}")
    return src


def _tools(tmp: Path) -> dict[str, str]:
    """A bin folder with the fake ``nvdataset``, and the VLM command."""
    bin_dir = tmp / "bin"
    bin_dir.mkdir(exist_ok=True)
    fake = bin_dir / "nvdataset"
    fake.write_text(f'#!/bin/sh\nexec {sys.executable} {Path(__file__).with_name("fake_nvdataset.py")} "$@"\n')
    fake.chmod(0o755)
    (tmp / "vlm.py").write_text(VLM)
    return {"PATH": f"{bin_dir}:{os.environ['PATH']}", "HOME": str(tmp / "home"),
            "FAKE_NVDATASET_LOG": str(tmp / "nvdataset.log"), "QA_ENVDUMP": str(tmp / "vlm_env.log")}


def _vlm(tmp: Path, extra: str = "") -> str:
    return f"{sys.executable} {tmp / 'vlm.py'} --file {{video}} --prompt {{question}} {extra}".strip()


def _run(args: list[str], env: dict[str, str], cwd: Path, timeout_s: float = 120) -> subprocess.CompletedProcess[str]:
    """``benchcheck qa run ARGS`` in ``cwd`` with exactly ``env`` plus LANG and this checkout's PYTHONPATH."""
    full = {k: os.path.abspath(v) if k == "PYTHONPATH" else v
            for k, v in os.environ.items() if k in ("LANG", "PYTHONPATH")}
    return subprocess.run([sys.executable, "-m", "benchcheck", "qa", "run", *args], capture_output=True,
                          text=True, env={**full, **env}, cwd=cwd, timeout=timeout_s)


def _calls(tmp: Path) -> list[dict[str, Any]]:
    log = tmp / "nvdataset.log"
    return [json.loads(x) for x in log.read_text().splitlines()] if log.exists() else []


def test_credential_order_and_what_the_child_gets() -> None:
    env = {**SECRETS, **TENANCY, "PATH": "/bin"}
    assert dss_credential(env) == "NVDATASET_API_KEY"
    assert dss_credential({k: v for k, v in env.items() if k != "NVDATASET_API_KEY"}) == "NVDATASET_NGC_API_KEY"
    assert dss_credential({"NGC_API_KEY": "x", "HOME": "/nonexistent"}) == "NGC_API_KEY"
    assert dss_credential({"HOME": "/nonexistent"}) is None
    for cred in CREDENTIAL_VARS:
        got = child_env(env, cred)
        assert got[cred] == env[cred] and got["NVDATASET_TENANTID"] == "tenant-7"
        assert not {k for k in SECRETS if k != cred} & set(got)
    assert "Export NVDATASET_TENANTID" in failure_hint(1, "x\nError: Did not find tenant_id", "NGC_API_KEY")
    assert "NGC_API_KEY" in failure_hint(1, "HTTP 403 Forbidden", "NGC_API_KEY")


def test_download_run_and_outputs_end_to_end(tmp_path: Path, clips: Path) -> None:
    """NGC-era keys only: NVDATASET_NGC_API_KEY is picked; the judge (loopback, not NVIDIA) gets no key."""
    src = _source(tmp_path, clips)
    work = tmp_path / "work"
    work.mkdir()
    host = RecordingHost("judge-v1", lambda body: (200, completion("judge-v1", '{"score": 1, "reasoning": "ok"}')))
    with thread_server(host.app()) as judge_url:
        env = {**_tools(tmp_path), **{k: v for k, v in SECRETS.items() if k != "NVDATASET_API_KEY"}, **TENANCY,
               "FAKE_NVDATASET_SRC": str(src), "EVAL_LLM_JUDGE_BASE_URL": judge_url, "EVAL_LLM_JUDGE_NAME": "j"}
        res = _run(["--dataset-name", NAME, "--dataset-file", FILE, "--vlm-cmd", _vlm(tmp_path)], env, work)
        assert res.returncode == 0, res.stderr
        again = _run(["--dataset-name", NAME, "--dataset-file", FILE, "--vlm-cmd", _vlm(tmp_path)], env, work)
    assert again.returncode == 0, again.stderr
    assert "dss credential: NVDATASET_NGC_API_KEY" in res.stderr
    assert "dss tenancy: NVDATASET_TENANTID, NVDATASET_GROUPID" in res.stderr
    [call] = _calls(tmp_path)  # the rerun found the dataset downloaded
    dest = work / "agent_eval" / "dataset" / NAME
    assert call["argv"] == ["download", NAME, str(dest)]
    assert call["env"] == {"NVDATASET_NGC_API_KEY": SECRETS["NVDATASET_NGC_API_KEY"], **TENANCY}
    out = work / "agent_eval" / "results" / "vlm_qa"  # <dataset>/../../results/vlm_qa
    summary = json.loads((out / "summary.json").read_text())
    assert summary["counts"]["scored"] == 2 and summary["accuracy"] == 1.0
    assert summary["counts"]["skipped_by_reason"] == {"no_clip_named": 1, "not_qa": 1}
    assert summary["settings"]["dataset_name"] == NAME
    workflow = json.loads((out / "workflow_output.json").read_text())
    rows = workflow if isinstance(workflow, list) else workflow["items"]
    assert {r["id"]: r["video"] for r in rows} == {"q1": "warehouse_01.mp4", "q2": "lobby_02.mp4"}
    for line in (tmp_path / "vlm_env.log").read_text().splitlines():  # no key reaches the VLM child
        assert not set(SECRETS) & set(json.loads(line)["env"])
    assert host.chats() and all("Authorization" not in r.headers for r in host.requests)
    seen = "".join(json.dumps(r.headers) + r.body.decode() for r in host.requests)
    everything = seen + res.stdout + res.stderr + "".join(p.read_text() for p in out.rglob("*") if p.is_file())
    assert not [k for k, v in SECRETS.items() if v in everything]


def test_the_personal_key_wins_and_alone_reaches_nvdataset(tmp_path: Path, clips: Path) -> None:
    env = {**_tools(tmp_path), **SECRETS, **TENANCY, "FAKE_NVDATASET_SRC": str(_source(tmp_path, clips))}
    res = _run(["--dataset-name", NAME, "--dataset-file", FILE, "--vlm-cmd", _vlm(tmp_path), "--skip-judge",
                "--output-dir", str(tmp_path / "out")], env, tmp_path)
    assert res.returncode == 0, res.stderr
    assert "dss credential: NVDATASET_API_KEY" in res.stderr and SECRETS["NVDATASET_API_KEY"] not in res.stderr
    assert _calls(tmp_path)[0]["env"] == {"NVDATASET_API_KEY": SECRETS["NVDATASET_API_KEY"], **TENANCY}
    assert (tmp_path / "out" / "summary.json").is_file()


@pytest.mark.parametrize(("mode", "expect"), [
    ("tenant", "Export NVDATASET_TENANTID and NVDATASET_GROUPID"),
    ("forbidden", "refused the credential (403). The run used NGC_API_KEY"),
    ("empty", f"lacks {FILE} or videos/"),
])
def test_a_failed_download_exits_3_with_its_hint(mode: str, expect: str, tmp_path: Path) -> None:
    env = {**_tools(tmp_path), "NGC_API_KEY": SECRETS["NGC_API_KEY"], "FAKE_NVDATASET_MODE": mode}
    res = _run(["--dataset-name", NAME, "--dataset-file", FILE, "--vlm-cmd", _vlm(tmp_path), "--skip-judge"],
               env, tmp_path)
    assert res.returncode == 3, res.stderr
    assert expect in res.stderr and "Traceback" not in res.stderr
    assert "dss tenancy: NVDATASET_TENANTID not set" in res.stderr
    assert not (tmp_path / "agent_eval" / "results").exists()


def test_preconditions_exit_2_with_their_hints(tmp_path: Path, clips: Path) -> None:
    tools = _tools(tmp_path)
    base = ["--vlm-cmd", _vlm(tmp_path), "--skip-judge"]
    no_key = _run(["--dataset-name", NAME, "--dataset-file", FILE, *base], tools, tmp_path)
    assert no_key.returncode == 2 and "no DSS credential" in no_key.stderr and "nvdataset auth login" in no_key.stderr
    one_flag = _run(["--dataset-name", NAME, *base], tools, tmp_path)
    assert one_flag.returncode == 2 and "both required" in one_flag.stderr
    no_cli = _run(["--dataset-name", NAME, "--dataset-file", FILE, *base],
                  {**tools, "PATH": "/usr/bin:/bin", "NGC_API_KEY": "k"}, tmp_path)
    assert no_cli.returncode == 2 and "not on PyPI" in no_cli.stderr and "uv tool install" in no_cli.stderr
    assert not _calls(tmp_path)


def test_an_extracted_dataset_named_by_vss_eval_dataset(tmp_path: Path, clips: Path) -> None:
    extracted = tmp_path / "data-dir" / "agent_eval" / "dataset" / NAME
    shutil.copytree(_source(tmp_path, clips), extracted)
    env = {**_tools(tmp_path), "VSS_EVAL_DATASET": str(extracted)}  # no credential needed
    res = _run(["--dataset-name", NAME, "--dataset-file", FILE, "--vlm-cmd", _vlm(tmp_path), "--skip-judge"],
               env, tmp_path / "bin")
    assert res.returncode == 0, res.stderr
    assert not _calls(tmp_path)
    assert (tmp_path / "data-dir" / "agent_eval" / "results" / "vlm_qa" / "summary.json").is_file()
    missing = _run(["--dataset-name", NAME, "--dataset-file", "nope.json", "--vlm-cmd", _vlm(tmp_path),
                    "--skip-judge"], env, tmp_path)
    assert missing.returncode == 2 and f"dataset not found at {extracted}" in missing.stderr


def test_a_hung_download_is_killed_at_the_timeout(tmp_path: Path) -> None:
    pidfile = tmp_path / "child.pid"
    env = {**_tools(tmp_path), "NGC_API_KEY": "k-123456789", "FAKE_NVDATASET_MODE": "hang",
           "FAKE_NVDATASET_PIDFILE": str(pidfile)}
    t0 = time.monotonic()
    res = _run(["--dataset-name", NAME, "--dataset-file", FILE, "--vlm-cmd", _vlm(tmp_path), "--skip-judge",
                "--download-timeout", "2"], env, tmp_path)
    assert res.returncode == 3 and "did not finish in 2 s" in res.stderr
    assert time.monotonic() - t0 < 60
    time.sleep(0.2)
    pid = int(pidfile.read_text())
    assert not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text().split()[2]


def test_inline_media_with_a_command_and_the_vlm_error_hints(tmp_path: Path, clips: Path) -> None:
    qa = {"evaluation_method": ["qa"], "ground_truth": "yes"}
    items = [{**qa, "id": "a", "query": "warehouse_01: moving? [say:yes]"},
             {**qa, "id": "b", "query": "warehouse_01: big? [fail422]"},
             {**qa, "id": "c", "query": "lobby_02: who? [exit4]"}]
    env = {**_tools(tmp_path), "NGC_API_KEY": "k-123456789", "FAKE_NVDATASET_SRC": str(_source(tmp_path, clips, items))}
    res = _run(["--dataset-name", NAME, "--dataset-file", FILE, "--vlm-cmd", _vlm(tmp_path, "{inline_media}"),
                "--inline-media", "--skip-judge"], env, tmp_path)
    assert res.returncode == 3, res.stderr  # two VLM errors
    calls = [json.loads(x) for x in (tmp_path / "vlm_env.log").read_text().splitlines()]
    assert all(c["argv"][-1] == "--inline-media" and "BENCHCHECK_QA_INLINE_MEDIA" in c["env"] for c in calls)
    assert "routable address" in res.stderr and "`vss configure`" in res.stderr
    summary = json.loads((tmp_path / "agent_eval" / "results" / "vlm_qa" / "summary.json").read_text())
    assert len(summary["vlm_hints"]) == 2 and summary["settings"]["media"] == "inline"
    plain = _run(["--dataset-name", NAME, "--dataset-file", FILE, "--vlm-cmd", _vlm(tmp_path, "{inline_media}"),
                  "--skip-judge", "--output-dir", str(tmp_path / "plain")], env, tmp_path)
    assert plain.returncode == 3
    last = json.loads((tmp_path / "vlm_env.log").read_text().splitlines()[-1])
    assert "--inline-media" not in last["argv"] and "BENCHCHECK_QA_INLINE_MEDIA" not in last["env"]
