"""``--device`` (``benchcheck.devices``): one rule for the hf engine and step 0's embedder."""

from __future__ import annotations

import pytest
import torch

from benchcheck.devices import resolve_device


def test_auto_is_cuda_when_there_is_one() -> None:
    assert resolve_device("auto") == ("cuda" if torch.cuda.is_available() else "cpu")
    assert resolve_device("cpu") == "cpu"


@pytest.mark.parametrize("name", ["bogus", "tpu", "cuda:x", "CPU", ""])
def test_a_name_no_torch_device_has_is_a_one_line_error(name: str) -> None:
    with pytest.raises(ValueError, match=r"^--device '.*': choose auto, cpu, cuda or cuda:N$"):
        resolve_device(name)


def test_cuda_that_this_machine_lacks_is_a_one_line_error() -> None:
    if not torch.cuda.is_available():
        for name in ("cuda", "cuda:0"):
            with pytest.raises(ValueError, match=rf"^--device {name}: no CUDA device here \(torch "):
                resolve_device(name)
    else:
        n = torch.cuda.device_count()
        with pytest.raises(ValueError, match=rf"this machine has {n} CUDA device"):
            resolve_device(f"cuda:{n}")


def test_the_hf_engine_and_step_0_take_the_same_rule() -> None:
    from benchcheck.dedup.model import DedupError, SentenceEmbedder, resolve_model
    from benchcheck.engines.hf.checkpoint import pick_device

    with pytest.raises(ValueError, match="choose auto, cpu, cuda or cuda:N"):
        pick_device("bogus")
    with pytest.raises(DedupError, match=r"^--device 'bogus': choose auto, cpu, cuda or cuda:N$"):
        SentenceEmbedder(resolve_model("minilm", None), device="bogus")
