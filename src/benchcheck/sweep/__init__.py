"""The frames x pixels sweep (SPEC section 5): conditions, answer parsing, runner, analysis."""
