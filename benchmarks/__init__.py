"""BenchCheck's benchmarks: each module a script, run from the repository root as a module.

    PYTHONPATH=src python -m benchmarks.gpu_screen --tiny

They import each other and ``benchmarks.shared`` (workloads, NVML readings, the device's
matrix-product rate, result rows) as a package: no ``sys.path`` edits and no imports from tests/.
Every script has a CPU smoke run in tests/benchmarks/ (its ``--tiny`` or smallest size).
"""
