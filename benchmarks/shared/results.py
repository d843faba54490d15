"""The files a benchmark writes into ``--out`` (default ``$OUT`` or ``bench_out``): a JSON file
(the run's environment and its rows as dicts) and a Markdown file (the table it printed)."""

from __future__ import annotations

import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

import torch


def default_out() -> str:
    return os.environ.get("OUT", "bench_out")


def environment(device: torch.device, **extra: Any) -> dict[str, Any]:
    """Where and how a run ran: device, versions, the command line and the UTC date."""
    return {
        "device": torch.cuda.get_device_name() if device.type == "cuda" else platform.processor() or "cpu",
        "torch": torch.__version__,
        "python": sys.version.split()[0],
        "command": " ".join(sys.argv),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        **extra,
    }


def write(out: Path, json_name: str, payload: dict[str, Any], md_name: str, lines: list[str]) -> None:
    """``out/json_name`` and ``out/md_name``; the table is printed too."""
    out.mkdir(parents=True, exist_ok=True)
    (out / json_name).write_text(json.dumps(payload, indent=1, default=str))
    (out / md_name).write_text("\n".join(lines) + "\n")
    print("\n".join(lines), flush=True)
