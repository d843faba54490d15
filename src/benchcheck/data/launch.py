"""Server launch lines from ``launch_params.txt``: secrets redacted, changes from the protocol found.

The report quotes the launch lines verbatim except for secrets (``--api-key``, ``HF_TOKEN=``,
``hf_…`` tokens, ``Authorization`` headers; :mod:`benchcheck.masking` is the one masking helper),
and lists every server flag that differs from the launcher docs/PROTOCOL.md fixes ("Launcher" for
the screening steps, "Frame plans" for the sweep).
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from benchcheck.defaults import GPU_UTIL, STEP_MAX_SEQS, SWEEP_LIMIT_MM, SWEEP_MAX_MODEL_LEN, SWEEP_MAX_SEQS
from benchcheck.masking import redact
from benchcheck.protocol import TOP_LOGPROBS

_VLLM = re.compile(r"\bvllm\b")
_STEP = re.compile(r"\bstep\s*(\d+)\b")

# The vLLM flags docs/PROTOCOL.md fixes per kind of run (only these may differ, and each difference is reported).
EXPECTED: dict[str, dict[str, str]] = {
    "pool": {"--gpu-memory-utilization": str(GPU_UTIL), "--max-logprobs": str(TOP_LOGPROBS)},
    "pool:step1": {"--max-num-seqs": str(STEP_MAX_SEQS)},
    "sweep": {"--gpu-memory-utilization": str(GPU_UTIL), "--max-model-len": str(SWEEP_MAX_MODEL_LEN),
              "--limit-mm-per-prompt": SWEEP_LIMIT_MM, "--max-num-seqs": str(SWEEP_MAX_SEQS)},
}


def read_launch_lines(paths: list[Path]) -> list[str]:
    """The non-empty lines of every ``launch_params.txt`` found, redacted, in order."""
    lines: list[str] = []
    for p in paths:
        try:
            text = p.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        lines += [redact(line.rstrip()) for line in text.splitlines() if line.strip()]
    return lines


def flags(line: str) -> dict[str, str]:
    """``--name value`` and ``--name=value`` pairs of a command line (a bare flag maps to ``""``)."""
    try:
        toks = shlex.split(line)
    except ValueError:
        toks = line.split()
    out: dict[str, str] = {}
    i = 0
    while i < len(toks):
        t = toks[i]
        if t.startswith("--"):
            if "=" in t:
                k, v = t.split("=", 1)
                out[k] = v
            elif i + 1 < len(toks) and not toks[i + 1].startswith("--"):
                out[t] = toks[i + 1]
                i += 1
            else:
                out[t] = ""
        i += 1
    return out


def _same(flag: str, got: str, want: str) -> bool:
    if flag == "--limit-mm-per-prompt":
        return re.sub(r"\s", "", got) == re.sub(r"\s", "", want)
    try:
        return float(got) == float(want)
    except ValueError:
        return got == want


def changes(lines: list[str], expected: dict[str, str]) -> list[str]:
    """One note per expected flag that a vLLM launch line sets differently or leaves out.

    Other servers (``benchcheck serve`` on CPU or in tests) have other flags and are not judged.
    """
    notes: list[str] = []
    for flag, want in expected.items():
        seen = {flags(line).get(flag) for line in commands(lines) if _VLLM.search(line)}
        for got in sorted(v for v in seen if v is not None):
            if not _same(flag, got, want):
                notes.append(f"{flag} {got} (SPEC: {want})")
        if lines and None in seen:
            notes.append(f"{flag} not set (SPEC: {want})")
    return notes


def commands(lines: list[str]) -> list[str]:
    """The command lines (the ``# <time> step K shard i/n`` headers left out)."""
    return [line for line in lines if not line.lstrip().startswith("#")]


def step_blocks(lines: list[str]) -> dict[str, list[str]]:
    """Command lines under each ``# ... step K ...`` header, as ``{"stepK": [lines]}`` (no repeats)."""
    blocks: dict[str, list[str]] = {}
    key: str | None = None
    for line in lines:
        if line.lstrip().startswith("#"):
            m = _STEP.search(line)
            key = f"step{m.group(1)}" if m else None
        elif key is not None and line not in blocks.setdefault(key, []):
            blocks[key].append(line)
    return blocks


def lines_for_stage(lines: list[str], stage: str, model: str | None) -> list[str]:
    """The launch lines that served a step: its header block when the launcher wrote one, else the
    lines naming its model, else every command line (the rows name no model)."""
    blocks = step_blocks(lines)
    if stage in blocks:
        return blocks[stage]
    cmds = list(dict.fromkeys(commands(lines)))
    if not model:
        return cmds
    return [line for line in cmds if model in line]
