"""The pinned models, the prompt intros and the run defaults: the one home of each value.

Screening (``screen.steps``, ``screen.engine_args``), the sweep (``sweep.conditions``,
``sweep.engine``), ``launch``, ``dedup`` and the pack report's expected server flags
(``data.launch``) import these names instead of repeating the literals; docs/PROTOCOL.md states
the same values for people, and tests/imports/test_one_home.py checks that the docs and this
module agree. A model, revision or intro is hashed into the ``RunSpec`` of every step or
condition that uses it, so changing one here makes the old rows stale, never silently reused.
"""

from __future__ import annotations

from benchcheck.spec import ModelRef

# The hub models at their pinned revisions (docs/PROTOCOL.md, "Models"): the 8B model answers
# steps 1, 2, 4, 6 and every sweep condition; the 2B model answers steps 3 and 5.
QWEN3_VL_8B = ModelRef("Qwen/Qwen3-VL-8B-Instruct", "0c351dd01ed87e9c1b53cbc748cba10e6187ff3b")
QWEN3_VL_2B = ModelRef("Qwen/Qwen3-VL-2B-Instruct", "89644892e4d85e24eaac8bacfd4f463576704203")

# The sentence-embedding model of the step-0 near-duplicate check (docs/dedup.md): the origin's model.
DEDUP_MODEL = "BAAI/bge-large-en-v1.5"
DEDUP_REVISION = "d4aa6901d3a41ba39fb536a557fa166f842b0e09"

# The default intro set (docs/PROTOCOL.md, "Prompts"): its name is versioned and hashed into rows.
INTRO_NAME = "lmms-v1"
INTRO_BLIND = "Select the best answer to the following multiple-choice question."
INTRO_OPTIONS_ONLY = "Select the option that is most likely to be the correct answer."
INTRO_FRAMES = "Select the best answer to the following multiple-choice question based on the video."

# Requests in flight per served endpoint when --workers is not given: 32 / 16 / 8 for steps
# 1 / 2 / 3 in the original runs (the visual steps send larger requests); 6 client workers per
# GPU for the sweep (seed 001).
STEP_WORKERS: dict[int, int] = {1: 32, 2: 16, 3: 8, 4: 32, 5: 8, 6: 8}
SWEEP_WORKERS_PER_ENDPOINT = 6

# The launcher (docs/PROTOCOL.md, "Launcher"; seeds 000 and 001): one server per GPU on ports
# PORT0+i, with these vLLM settings.
STEP_PORT0 = 8001
SWEEP_PORT0 = 8011
GPU_UTIL = 0.85
STEP_MAX_SEQS = 64
SWEEP_MAX_SEQS = 32
SMALL_GPU_MAX_SEQS = 8  # the sweep on GPUs of 32 GB or less
SWEEP_MAX_MODEL_LEN = 65536
SWEEP_LIMIT_MM = '{"image": 1024}'
