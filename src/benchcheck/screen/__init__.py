"""Screening: step specs, the planner, the runner and assembly (docs/PROTOCOL.md; layout in docs/ARCHITECTURE.md)."""
