"""Test doubles and small runs shared by the test suite and the benchmarks (no pytest here)."""
