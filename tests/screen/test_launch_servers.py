"""Server command lines and GPU selection of `launch` (pure parts), and the taken-port refusal."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from benchcheck.launch.servers import ServerOptions, ServerSpec, server_specs, start, visible_gpus

OPTS = ServerOptions(model="Qwen/Qwen3-VL-8B-Instruct", served_name="Qwen/Qwen3-VL-8B-Instruct",
                     revision="0c351dd01ed87e9c1b53cbc748cba10e6187ff3b", use_vllm=True)


def test_vllm_lines_carry_the_spec_arguments() -> None:
    specs = server_specs(2, OPTS, ["0", "1"])
    line = specs[1].line()
    assert line.startswith("CUDA_VISIBLE_DEVICES=1 vllm serve Qwen/Qwen3-VL-8B-Instruct")
    for arg in ("--port 8002", "--gpu-memory-utilization 0.85", "--max-num-seqs 64", "--max-logprobs 20",
                "--revision 0c351dd01ed87e9c1b53cbc748cba10e6187ff3b", "--host 127.0.0.1",
                "--served-model-name Qwen/Qwen3-VL-8B-Instruct"):
        assert arg in line


def test_gpus_follow_cuda_visible_devices() -> None:
    assert visible_gpus({"CUDA_VISIBLE_DEVICES": "2,3"}) == ["2", "3"]
    assert visible_gpus({"CUDA_VISIBLE_DEVICES": ""}) == []
    assert [s.env for s in server_specs(2, OPTS, ["2", "3"])] == [{"CUDA_VISIBLE_DEVICES": "2"},
                                                                   {"CUDA_VISIBLE_DEVICES": "3"}]
    assert server_specs(2, OPTS, [])[0].env == {}
    with pytest.raises(ValueError):
        server_specs(3, OPTS, ["0", "1"])


def test_a_taken_port_is_refused(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        with pytest.raises(RuntimeError, match="already in use"):
            start(ServerSpec(0, port, ("true",)), tmp_path / "log")
