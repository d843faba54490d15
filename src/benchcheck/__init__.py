"""BenchCheck: audit multiple-choice video QA benchmarks with vision-language models."""

__version__ = "0.1.0"
