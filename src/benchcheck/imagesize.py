"""The size a Qwen-VL image processor resizes an image to (pure): one rule for the engine that
resizes and for the sweep's budget that counts the tokens of what the model will be shown.

Each side goes to the nearest multiple of ``factor`` (patch size x spatial merge: 32 pixels a
visual token for Qwen3-VL); an area outside ``[min_pixels, max_pixels]`` then scales both sides
down (floor) or up (ceil) by one factor. Transformers' ``smart_resize`` of the Qwen2-VL image
processor does the same (the engine's tests check it against that function), and refuses an
image more elongated than ``MAX_ASPECT``: so does this rule, for the engine and for the budget
alike (a sweep cell whose frames the processor would refuse is a failure of its plan, never a
request sent three times to be refused).
"""

from __future__ import annotations

import math

# Qwen3-VL's image processor (preprocessor_config.json: patch 16, merge 2, size.shortest_edge
# and size.longest_edge, which are areas in pixels).
QWEN3_VL_FACTOR = 32
QWEN3_VL_MIN_PIXELS = 65_536
QWEN3_VL_MAX_PIXELS = 16_777_216
MAX_ASPECT = 200  # the processor refuses images more elongated than this


def processor_size(height: int, width: int, factor: int, min_pixels: int, max_pixels: int) -> tuple[int, int]:
    """(height, width) the processor resizes a ``height`` x ``width`` image to; ``ValueError`` for
    an image it refuses (a side below 1 pixel, or the aspect ratio over ``MAX_ASPECT``)."""
    if min(height, width) < 1 or max(height, width) / min(height, width) > MAX_ASPECT:
        raise ValueError(f"aspect ratio of {width}x{height} is over {MAX_ASPECT}")
    h, w = round(height / factor) * factor, round(width / factor) * factor
    if h * w > max_pixels:
        beta = math.sqrt(height * width / max_pixels)
        h = max(factor, math.floor(height / beta / factor) * factor)
        w = max(factor, math.floor(width / beta / factor) * factor)
    elif h * w < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h, w = math.ceil(height * beta / factor) * factor, math.ceil(width * beta / factor) * factor
    return h, w
