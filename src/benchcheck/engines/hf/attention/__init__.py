"""Attention plans and backends (tree attention, masked SDPA kernels) and the KV cache of generation."""
