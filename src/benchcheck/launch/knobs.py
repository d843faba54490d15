"""The launchers' environment knobs (seeds 000 and 001): which variable sets which flag, and the
line that records the values used and where each came from.

Seed 000 runs ``STEP=1 NGPU=4 WORKERS=32 PORT0=8001 GPU_UTIL=0.85 PY=python3 VLLM=vllm MAX_SEQS=64
bash code/run_remote.sh``; seed 001 adds ``PILOT``, ``BENCH`` and ``CONDS``. Each variable is the
default of the matching ``benchcheck launch`` flag: a flag given on the command line wins.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping

# click parameter name -> environment variable.
ENV_OF: dict[str, str] = {
    "step": "STEP",
    "gpus": "NGPU",
    "workers": "WORKERS",
    "port0": "PORT0",
    "gpu_util": "GPU_UTIL",
    "max_num_seqs": "MAX_SEQS",
    "python_exe": "PY",
    "vllm_cmd": "VLLM",
    "pilot": "PILOT",
    "bench": "BENCH",
    "conds": "CONDS",
}

FLAG, ENV, DEFAULT = "flag", "env", "default"


def note(values: Mapping[str, object], sources: Mapping[str, str]) -> str:
    """``knobs: NGPU=2 (env), WORKERS=32 (default), ...`` for the values used (pure); ``values`` maps
    parameter names of :data:`ENV_OF` to what the launch used, after its own defaults."""
    parts = []
    for name, value in values.items():
        shown = "" if value is None else shlex.quote(str(value))
        parts.append(f"{ENV_OF[name]}={shown} ({sources.get(name, DEFAULT)})")
    return "knobs: " + ", ".join(parts)
