"""A command-line VLM for the QA tests; its behaviour is chosen by tags in the question.

``[say:TEXT]`` answers TEXT; ``[echo]`` answers the question verbatim; ``[hang]`` starts a
background grandchild (its pid written to ``$QA_PIDFILE``) and never returns; ``[crash]``
writes the NGC key to stderr and exits 4; ``[garbage]`` prints no JSON; ``[leak]`` answers
with the NGC key; ``[slow]`` waits 0.3 s first. It prints a log line before its JSON, like
real CLIs do. With ``$QA_CALLLOG`` set, every call appends its question to that file.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--video", required=True)
    ap.add_argument("--question", required=True)
    ap.add_argument("--frames", type=int, required=True)
    args = ap.parse_args()
    q = args.question
    if os.environ.get("QA_CALLLOG"):
        with open(os.environ["QA_CALLLOG"], "a", encoding="utf-8") as f:
            f.write(json.dumps(q) + "\n")
    if not Path(args.video).is_file():
        print(f"no such video {args.video}", file=sys.stderr)
        return 5
    if "[hang]" in q:
        child = subprocess.Popen(["sleep", "120"])
        Path(os.environ["QA_PIDFILE"]).write_text(str(child.pid))
        time.sleep(120)
    if "[crash]" in q:
        print(f"fatal: service rt_vlm missing (token {os.environ.get('NGC_API_KEY', '')})", file=sys.stderr)
        return 4
    if "[garbage]" in q:
        print("this is not json")
        return 0
    if "[slow]" in q:
        time.sleep(0.3)
    if "[leak]" in q:
        answer = f"the key is {os.environ.get('NGC_API_KEY', '')}"
    elif "[echo]" in q:
        answer = q
    else:
        m = re.search(r"\[say:([^\]]*)\]", q)
        answer = m.group(1) if m else "I do not know"
    print("vlm: loading config")
    print(json.dumps({"answer": answer, "model": "fake-vlm-1", "frames": args.frames}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
