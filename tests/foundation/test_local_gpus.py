"""What a plain `screen` records as its GPUs: the in-process engine's device, not a default of 0."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from benchcheck.engines.capabilities import local_gpus
from benchcheck.engines.options import EngineOptions
from benchcheck.engines.registry import from_options


@dataclass
class _OnDevice:
    device: Any


def test_a_model_on_a_cuda_device_counts_one_gpu() -> None:
    assert local_gpus(_OnDevice(torch.device("cuda", 0))) == 1  # type: ignore[arg-type]
    assert local_gpus(_OnDevice(torch.device("cuda"))) == 1  # type: ignore[arg-type]
    assert local_gpus(_OnDevice("cuda:1")) == 1  # type: ignore[arg-type]
    assert local_gpus(_OnDevice(torch.device("cpu"))) == 0  # type: ignore[arg-type]


def test_engines_without_a_device_count_none(tmp_path: Path) -> None:
    rules = tmp_path / "rules.json"
    rules.write_text(json.dumps([{"match": "", "letters": {"A": -0.1}}]))
    assert local_gpus(from_options("reference", EngineOptions())) == 0
    assert local_gpus(from_options("scripted", EngineOptions(rules=str(rules)))) == 0
