"""Engines: one small async protocol (score letters, generate text), several providers."""

from benchcheck.engines.base import (
    Engine,
    Failure,
    GenerateRequest,
    Generation,
    ImageRef,
    LetterScores,
    ScoreRequest,
)
from benchcheck.engines.registry import ENGINES, create_engine

__all__ = [
    "ENGINES",
    "Engine",
    "Failure",
    "GenerateRequest",
    "Generation",
    "ImageRef",
    "LetterScores",
    "ScoreRequest",
    "create_engine",
]
