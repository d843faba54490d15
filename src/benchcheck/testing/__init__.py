"""Model builders: a tiny random-weight Qwen3-VL checkpoint for tests, and random-weight
replicas of the real Qwen3-VL shapes for GPU benchmarks."""

from benchcheck.testing.config import SHAPES, Shape
from benchcheck.testing.tiny import build_tiny_model

__all__ = ["SHAPES", "Shape", "build_tiny_model"]
