"""The records a sweep writes: CSV rows (ok / unparsed / NA / reused), raw lines, failures (pure)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from benchcheck.engines.base import Failure, Generation
from benchcheck.protocol import LETTERS
from benchcheck.spec import RunSpec
from benchcheck.sweep.parse import RULESET, parse_answer
from benchcheck.sweep.plan import Cell
from benchcheck.sweep.results import now_stamp


def _base(cell: Cell, spec: RunSpec) -> dict[str, Any]:
    it = cell.item
    return {"bench": it.bench, "item_id": it.item_id, "condition": cell.condition, "video_id": it.video_id or "",
            "gold": LETTERS[it.answer], "config_hash": spec.config_hash}


def answer_rows(cell: Cell, spec: RunSpec, gen: Generation, decode_s: float) -> tuple[dict[str, Any], dict[str, Any]]:
    """The CSV row and the raw line of one generated answer."""
    parsed = parse_answer(gen.text, cell.item.options)
    plan = cell.plan
    meta: dict[str, Any] = dict(plan.extra) if plan is not None else {}
    meta["parser"] = RULESET
    row = {**_base(cell, spec), "status": parsed.status, "pred": parsed.letter,
           "correct": int(parsed.index == cell.item.answer), "parse": parsed.rule,
           "n_frames": len(plan.indices) if plan else 0, "width": plan.width if plan else "",
           "height": plan.height if plan else "", "prompt_tokens": gen.prompt_tokens,
           "infer_s": round(gen.latency_s, 4), "decode_s": round(decode_s, 4), "model": gen.model or spec.model.name,
           "meta": json.dumps(meta, sort_keys=True), "written_at": now_stamp()}
    raw = {**_base(cell, spec), "text": gen.text, "status": parsed.status, "pred": parsed.letter,
           "parse": parsed.rule, "prompt_tokens": gen.prompt_tokens, "completion_tokens": gen.completion_tokens,
           "latency_s": gen.latency_s, "decode_s": decode_s, "model": gen.model or spec.model.name,
           "frames": plan.record() if plan else None, "meta": meta, "written_at": row["written_at"]}
    return row, raw


def na_row(cell: Cell, spec: RunSpec) -> dict[str, Any]:
    return {**_base(cell, spec), "status": "NA", "pred": "", "correct": "", "parse": "",
            "meta": json.dumps({"reason": cell.reason}, sort_keys=True), "written_at": now_stamp()}


def reuse_row(cell: Cell, spec: RunSpec, source: Mapping[str, Any]) -> dict[str, Any]:
    """The reused answer as its own row of this condition, marked ``meta.reused_from``."""
    try:
        meta = json.loads(source.get("meta") or "{}")
    except ValueError:
        meta = {}
    meta = {**(meta if isinstance(meta, dict) else {}), "reused_from": cell.reuse_from}
    keep = ("status", "pred", "correct", "parse", "n_frames", "width", "height", "prompt_tokens", "model")
    return {**_base(cell, spec), **{k: source.get(k, "") for k in keep}, "infer_s": 0, "decode_s": 0,
            "meta": json.dumps(meta, sort_keys=True), "written_at": now_stamp()}


def raw_of(row: Mapping[str, Any]) -> dict[str, Any]:
    """The raw line of an NA or reused row: the row with its ``meta`` as an object. A CSV made by
    another tool may have no ``meta`` column; the reason and ``reused_from`` then live here only."""
    try:
        meta = json.loads(row.get("meta") or "{}")
    except ValueError:
        meta = {}
    return {**row, "meta": meta}


def failure_line(cell: Cell, kind: str, message: str, spec: RunSpec | None = None) -> dict[str, Any]:
    return {"bench": cell.item.bench, "item_id": cell.item.item_id, "condition": cell.condition,
            "video_id": cell.item.video_id, "kind": kind, "message": message,
            "config_hash": spec.config_hash if spec else None, "at": now_stamp()}


def engine_failure(cell: Cell, spec: RunSpec, f: Failure) -> dict[str, Any]:
    return failure_line(cell, f.kind, str(f), spec)
