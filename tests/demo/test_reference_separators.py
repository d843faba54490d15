"""Hostile inputs 15 and 8 on the reference engine: Unicode line separators inside options are
text; a bad image fails its own request, naming it."""

from __future__ import annotations

import pytest

from benchcheck.engines.rules.reference import decide
from benchcheck.protocol import build_prompt


@pytest.mark.parametrize("sep", ["\u2028", "\u2029", "\x85", "\x0b", "\x1c"])
def test_options_holding_unicode_line_separators_are_read(sep: str) -> None:
    """U+2028, U+2029 and U+0085 inside an option are text, not line ends (str.splitlines() breaks at them)."""
    opts = [f"green{sep}ball", "blue", f"yellow{sep}", "the red block"]
    d = decide(build_prompt("Select the best answer.", "Which one is the red block?", opts), ())
    assert d.n_options == 4
    assert d.pick == 3 and d.rule == "leak"


def test_an_unreadable_image_fails_its_own_request_naming_it() -> None:
    import asyncio

    from benchcheck.engines.base import Failure, GenerateRequest, Generation
    from benchcheck.engines.rules.reference import ReferenceEngine

    prompt = build_prompt("Select the best answer.", "What colour is the block?", ["red", "blue"])
    reqs = [GenerateRequest("bad", prompt, (b"GIF89a\x01\x00",), 8), GenerateRequest("ok", prompt, (), 8)]
    bad, ok = asyncio.run(ReferenceEngine().generate(reqs))
    assert isinstance(bad, Failure) and bad.status == 400
    assert "image 0 (8 bytes): not a readable image" in bad.message
    assert isinstance(ok, Generation)
