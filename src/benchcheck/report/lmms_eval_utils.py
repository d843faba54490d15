"""Task functions for the lmms-eval task folder that ``benchcheck export --format lmms-eval`` writes.

This file is copied as ``utils.py`` beside the task YAMLs and imported by lmms-eval's own loader
(``!function utils.doc_to_text``), so it imports nothing from benchcheck. The prompt is the
screening protocol's: the question, one option per line as ``"A. text"``, then the instruction.
"""

from __future__ import annotations

import os
import re
import unicodedata
from typing import Any

LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
INSTRUCTION = "Answer with the option letter only."
_FIRST_LETTER = re.compile(r"^\s*[\(\[]?([A-Z])(?:[\)\]\.:,]|\s|$)")


def doc_to_visual(doc: dict[str, Any]) -> list[str]:
    """The item's video file (lmms-eval video models read paths) or URL as it is; none for an item
    without a video. A file named but not found stops the run, as lmms-eval's own video tasks do: an empty list
    would have the model answer the question without it."""
    path = doc.get("video")
    if not isinstance(path, str) or not path:
        return []
    if re.match(r"^[a-z][a-z0-9+.-]*://", path, re.IGNORECASE):
        return [path]  # a URL: the model reads it (API models take URLs), it is no file to check here
    if not os.path.isfile(path):
        raise FileNotFoundError(f"item {doc.get('item_id')}: video {path!r} is not a file here (cwd {os.getcwd()}); "
                                "re-export with --store for absolute paths, or run from the folder it is relative to")
    return [path]


def doc_to_choice(doc: dict[str, Any]) -> list[str]:
    return list(doc["options"])


def doc_to_text(doc: dict[str, Any], lmms_eval_specific_kwargs: dict[str, Any] | None = None) -> str:
    kw = lmms_eval_specific_kwargs or {}
    opts = "\n".join(f"{LETTERS[i]}. {o}" for i, o in enumerate(doc["options"]))
    pre, post = kw.get("pre_prompt", ""), kw.get("post_prompt", INSTRUCTION)
    return f"{pre}Question: {doc['question']}\nOptions:\n{opts}\n{post}"


def doc_to_target(doc: dict[str, Any]) -> str:
    return LETTERS[int(doc["answer"])]


def parse_letter(text: str, n_options: int) -> str | None:
    """The option letter a reply starts with ("B", "(B)", "B. text"); None when there is none.
    The reply is read in NFKC (full-width "Ｂ", "（B）"), without format characters (a zero-width
    space, a BOM) and without Markdown emphasis ("**B**")."""
    plain = "".join(c for c in unicodedata.normalize("NFKC", text or "") if unicodedata.category(c) != "Cf")
    m = _FIRST_LETTER.match(re.sub(r"[*`]", "", plain))
    return m.group(1) if m and LETTERS.index(m.group(1)) < n_options else None


def process_results(doc: dict[str, Any], results: list[str]) -> dict[str, float]:
    """1.0 when the reply's letter is the gold letter; a reply without a letter scores 0, never a guess."""
    pred = parse_letter(results[0] if results else "", len(doc["options"]))
    return {"accuracy": float(pred == doc_to_target(doc))}
