"""The ``nvdataset`` download child gets no key it was not meant to have: the VLM's key, kept in a
variable of the user's choosing (``--vlm-api-key-env``), and the judge's variables stay out of it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

DUMP = "env > \"$NVDATASET_ENV_DUMP\"\nexit 0\n"  # a download that leaves nothing: the run exits 3


def test_the_vlm_key_variable_and_the_judge_never_reach_nvdataset(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "nvdataset"
    fake.write_text("#!/bin/sh\n" + DUMP)
    fake.chmod(0o755)
    dump = tmp_path / "env.txt"
    env = {"PATH": f"{bin_dir}:{os.environ['PATH']}", "HOME": str(tmp_path), "LANG": "C.UTF-8",
           "PYTHONPATH": os.path.abspath("src"), "NVDATASET_ENV_DUMP": str(dump),
           "NGC_API_KEY": "nvapi-download-key-4242", "MYVLM": "vlm-endpoint-key-4242",
           "EVAL_LLM_JUDGE_BASE_URL": "http://127.0.0.1:9/v1", "EVAL_LLM_JUDGE_NAME": "judge-x"}
    res = subprocess.run([sys.executable, "-m", "benchcheck", "qa", "run", "--dataset-name", "ds", "--dataset-file",
                          "qa.json", "--dataset-dir", str(tmp_path / "ds"), "--output-dir", str(tmp_path / "out"),
                          "--vlm-endpoint", "http://127.0.0.1:9/v1", "--vlm-model", "m",
                          "--vlm-api-key-env", "MYVLM", "--skip-judge"],
                         capture_output=True, text=True, env=env, timeout=120)
    assert res.returncode == 3, res.stderr
    got = dict(line.split("=", 1) for line in dump.read_text().splitlines() if "=" in line)
    assert got.get("NGC_API_KEY") == "nvapi-download-key-4242"  # the download's own credential
    assert "MYVLM" not in got and "vlm-endpoint-key-4242" not in dump.read_text()
    assert not [k for k in got if k.startswith("EVAL_LLM_JUDGE_")]
