"""What the tests and the benchmarks share (no pytest here). Model builders: a tiny random-weight
Qwen3-VL checkpoint for tests, and random-weight replicas of the real Qwen3-VL shapes for GPU
benchmarks; a loopback Hugging Face Hub (``hub``); screening and sweep runs in this process
(``runs``)."""

from benchcheck.testing.config import SHAPES, Shape
from benchcheck.testing.tiny import build_tiny_model

__all__ = ["SHAPES", "Shape", "build_tiny_model"]
