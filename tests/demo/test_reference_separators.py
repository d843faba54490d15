"""Hostile input 15: options holding Unicode line separators are read as text by the reference engine."""

from __future__ import annotations

import pytest

from benchcheck.engines.reference import decide
from benchcheck.protocol import build_prompt


@pytest.mark.parametrize("sep", ["\u2028", "\u2029", "\x85", "\x0b", "\x1c"])
def test_options_holding_unicode_line_separators_are_read(sep: str) -> None:
    """U+2028, U+2029 and U+0085 inside an option are text, not line ends (str.splitlines() breaks at them)."""
    opts = [f"green{sep}ball", "blue", f"yellow{sep}", "the red block"]
    d = decide(build_prompt("Select the best answer.", "Which one is the red block?", opts), ())
    assert d.n_options == 4
    assert d.pick == 3 and d.rule == "leak"
