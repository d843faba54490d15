"""The serving page's "Videos" paragraph quotes the 400s a bad ``video_url`` part gets: each quoted
form is what the server says for that case. It once put bad base64 among the clips that "cannot be
decoded", quoted as ``video part K (N bytes): not a readable video (...)``, while the server refuses
such a data URL before any decoding, as ``video part K: invalid base64 data``."""

from __future__ import annotations

import re

import pytest
from docs_text import DOCS

from benchcheck.serve.chat import RequestError, VideoPart, parse_chat
from benchcheck.serve.media import MediaOptions, load_video


def _videos_paragraph() -> str:
    text = (DOCS / "serve.md").read_text()
    start = text.index("**Videos**")
    return " ".join(text[start:text.index("Errors have vLLM", start)].split())


def _form(message: str) -> str:
    """A message as the page writes it: the part index as K, a byte count as N, a cause as (...)."""
    form = re.sub(r"^video part \d+", "video part K", message)
    form = re.sub(r"\(\d+ bytes\)", "(N bytes)", form)
    return re.sub(r"not a readable video \(.*\)$", "not a readable video (...)", form)


def _refusal(url: str) -> str:
    body = {"messages": [{"role": "user", "content": [{"type": "video_url", "video_url": {"url": url}},
                                                      {"type": "text", "text": "what happens?"}]}]}
    with pytest.raises(RequestError) as e:
        parse_chat(body, "id")
    return str(e.value)


def test_bad_base64_is_quoted_as_the_server_says_it() -> None:
    form = _form(_refusal("data:video/mp4;base64,@@@@"))
    assert form == "video part K: invalid base64 data"
    assert f"`{form}`" in _videos_paragraph()


def test_bytes_that_are_no_video_are_quoted_as_the_server_says_it() -> None:
    with pytest.raises(RequestError) as e:
        load_video(VideoPart(0, data=b"no video here"), MediaOptions.make(), 1 << 20)
    form = _form(str(e.value))
    assert form == "video part K (N bytes): not a readable video (...)"
    assert f"`{form}`" in _videos_paragraph()


def test_the_undecodable_list_names_only_what_reaches_the_decoder() -> None:
    paragraph = _videos_paragraph()
    undecodable = paragraph[paragraph.index("A clip that cannot be decoded ("):]
    undecodable = undecodable[:undecodable.index(")")]
    assert "base64" not in undecodable
