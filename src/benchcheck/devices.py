"""The ``--device`` every torch-backed part takes (the hf engine, step 0's embedder): one rule.

``auto`` is CUDA when this torch sees a GPU, else the CPU; ``cpu``, ``cuda`` and ``cuda:N`` are
checked against the machine, so a typo or a CPU-only build is a one-line error naming the value,
not torch's traceback from somewhere inside a model load. torch is imported only when needed.
"""

from __future__ import annotations

import re


def resolve_device(device: str) -> str:
    """``device`` as torch names it (``auto`` resolved); ``ValueError`` for a name this machine cannot use."""
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if not re.fullmatch(r"cpu|cuda(:\d+)?", device):
        raise ValueError(f"--device {device!r}: choose auto, cpu, cuda or cuda:N")
    if device.startswith("cuda"):
        if not torch.cuda.is_available():
            raise ValueError(f"--device {device}: no CUDA device here (torch {torch.__version__})")
        index = int(device.partition(":")[2] or 0)
        if index >= torch.cuda.device_count():
            raise ValueError(f"--device {device}: this machine has {torch.cuda.device_count()} CUDA device(s)")
    return device
