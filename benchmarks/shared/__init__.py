"""What several benchmarks share: the synthetic workloads (``workloads``), NVML readings
(``nvml``), the device's matrix-product rate and a forward's useful FLOPs (``device``) and the
result files every script writes (``results``)."""
