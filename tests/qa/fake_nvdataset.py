"""A stand-in for the user's ``nvdataset`` CLI (not on PyPI) in the QA dataset tests.

It checks its arguments (``download <name> <dest>``), records them and the environment it got
(``$FAKE_NVDATASET_LOG``, one JSON line per call), then behaves as ``$FAKE_NVDATASET_MODE`` says:
``ok`` lays the dataset out as the Dataset Service download does (``<dest>/<file>``, ``videos/``,
``gt/``) from ``$FAKE_NVDATASET_SRC``; ``tenant`` and ``forbidden`` fail as the real CLI does without
a tenant or with a refused key; ``hang`` never returns (with a child); ``empty`` exits 0 leaving nothing.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

WATCHED = ("NVDATASET_API_KEY", "NVDATASET_NGC_API_KEY", "NGC_API_KEY", "OPENAI_API_KEY", "HF_TOKEN",
           "EVAL_LLM_JUDGE_API_KEY", "NVDATASET_TENANTID", "NVDATASET_GROUPID")


def main() -> int:
    args = sys.argv[1:]
    with open(os.environ["FAKE_NVDATASET_LOG"], "a", encoding="utf-8") as f:
        f.write(json.dumps({"argv": args, "env": {k: os.environ[k] for k in WATCHED if k in os.environ}}) + "\n")
    if len(args) != 3 or args[0] != "download":
        print(f"usage: nvdataset download NAME DEST (got {args})", file=sys.stderr)
        return 9
    _, name, dest = args
    mode = os.environ.get("FAKE_NVDATASET_MODE", "ok")
    print(f"Downloading {name} ...", flush=True)
    if mode == "tenant":
        print("Error: Did not find tenant_id. Run `nvdataset auth context use`.", file=sys.stderr)
        return 1
    if mode == "forbidden":
        print("Error: HTTP 403 Forbidden: access denied for this key", file=sys.stderr)
        return 1
    if mode == "hang":
        child = subprocess.Popen(["sleep", "300"])
        Path(os.environ["FAKE_NVDATASET_PIDFILE"]).write_text(str(child.pid))
        time.sleep(300)
    if mode == "empty":
        return 0
    shutil.copytree(os.environ["FAKE_NVDATASET_SRC"], dest, dirs_exist_ok=True)
    print("100% done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
