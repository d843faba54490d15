"""The ``hf`` engine: Qwen3-VL in process with transformers, answering as a vLLM server would.

Layers, each importing only the ones below it (docs/ARCHITECTURE.md, "The hf engine"):
``kernels`` <- ``attention`` <- ``model`` <- ``forward`` <- ``schedule`` <- ``engine``;
``inputs`` (requests to token ids and frames) and ``runtime`` (device plumbing) are leaves.
The engine class is ``benchcheck.engines.hf.engine.HFEngine`` (registry name ``hf``).
"""
