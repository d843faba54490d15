"""Screening: step specs, the planner, the runner and assembly (SPEC section 3)."""
