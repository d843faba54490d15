"""End-to-end video QA benchmark (SPEC section 6): a deployed VLM's accuracy by LLM judge and
its latency, with errors kept apart from scores.

Stages: ``dataset`` (VSS evaluation format) -> ``vlm_cmd`` / ``vlm_endpoint`` (answers, under a
watchdog) -> ``judge`` (verdicts, cached) -> ``summary`` and ``outputs``; ``runner`` ties them
together and ``state`` keeps what a rerun reuses. Entry points: :func:`benchcheck.qa.runner.run_qa`
and :func:`benchcheck.qa.runner.judge_stored` (``benchcheck qa run|judge``).
"""
