"""Server launch lines from ``launch_params.txt``: secrets redacted, changes from the protocol found.

The report quotes the launch lines verbatim except for secrets (``--api-key``, ``HF_TOKEN=``,
``hf_…`` tokens, ``Authorization`` headers), and lists every server flag that differs from the
launcher docs/PROTOCOL.md fixes ("Launcher" for the screening steps, "Frame plans" for the sweep).
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Any

_VLLM = re.compile(r"\bvllm\b")
_STEP = re.compile(r"\bstep\s*(\d+)\b")

_SECRETS = [
    re.compile(r"(--api-key[= ]\s*)(\S+)"),
    re.compile(r"((?:HF_TOKEN|HUGGING_FACE_HUB_TOKEN|OPENAI_API_KEY|[A-Z_]*API_KEY)=)(\S+)"),
    re.compile(r"((?:Authorization|authorization):\s*Bearer\s+)(\S+)"),
    re.compile(r"()(hf_[A-Za-z0-9]{16,})"),
]

# The vLLM flags docs/PROTOCOL.md fixes per kind of run (only these may differ, and each difference is reported).
EXPECTED: dict[str, dict[str, str]] = {
    "pool": {"--gpu-memory-utilization": "0.85", "--max-logprobs": "20"},
    "pool:step1": {"--max-num-seqs": "64"},
    "sweep": {"--gpu-memory-utilization": "0.85", "--max-model-len": "65536",
              "--limit-mm-per-prompt": '{"image": 1024}', "--max-num-seqs": "32"},
}


def redact(line: str) -> str:
    """The line with every secret value replaced by ``***``."""
    for pat in _SECRETS:
        line = pat.sub(lambda m: m.group(1) + "***", line)
    return line


_SECRET_ENV = re.compile(r"(?:_API_KEY|_TOKEN|_SECRET)$")
_MIN_SECRET_LEN = 8  # shorter values ("1", "true") would mask ordinary text, and are no secret


def env_secrets(environ: Mapping[str, str] | None = None) -> list[str]:
    """The values of secret-looking environment variables (names ending in ``_API_KEY``,
    ``_TOKEN`` or ``_SECRET``, ``HF_TOKEN`` among them), longest first; short values are left out."""
    env = os.environ if environ is None else environ
    vals = {line.strip() for k, v in env.items() if _SECRET_ENV.search(k.upper()) for line in v.splitlines()}
    return sorted((v for v in vals if len(v) >= _MIN_SECRET_LEN), key=lambda v: (-len(v), v))


def mask_values(text: str, secrets: list[str]) -> str:
    """``text`` with every value in ``secrets`` replaced by ``***`` (nothing else touched)."""
    for value in secrets:
        text = text.replace(value, "***")
    return text


def mask(text: str, secrets: list[str]) -> str:
    """``text`` with every value in ``secrets`` replaced and :func:`redact` applied per line.

    For plain text (launch lines, server and client logs); JSON goes through :func:`mask_json`,
    since a ``--api-key`` value in a JSON string would otherwise take the closing quote with it.
    """
    return "".join(redact(line) for line in mask_values(text, secrets).splitlines(keepends=True))


def mask_json(obj: Any, secrets: list[str]) -> Any:
    """A parsed JSON value with :func:`mask` applied to every string in it (keys included)."""
    if isinstance(obj, str):
        return mask(obj, secrets)
    if isinstance(obj, list):
        return [mask_json(v, secrets) for v in obj]
    if isinstance(obj, dict):
        return {mask(str(k), secrets): mask_json(v, secrets) for k, v in obj.items()}
    return obj


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
