"""The records a sweep writes (pure): typed rows, their CSV rows, raw lines and failure lines.

An answer of a cell is a ``records.GenRow`` (``step`` = the condition, ``parse_status`` =
``ok``/``unparsed``/``NA``, ``meta.reused_from`` for a reused answer) made under the condition's
``config_hash``; an engine or decode failure is a ``records.ErrorRow``. The exchange file's row is
a pure function of the record (:func:`csv_row`, an error's :func:`csv_error_row`), and
:func:`record_of_csv` reads a CSV row back as a record (the origin's rows and folders made before
the typed rows existed).

These are the per-unit pieces a generate task calls: :func:`answer_record` (records from an
answer), :func:`na_record`, :func:`reuse_record`, :func:`engine_error`; the requests of a cell
are built by ``sweep.runner.prepare_unit``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from benchcheck.engines.base import Failure, Generation
from benchcheck.protocol import LETTERS
from benchcheck.records import NA, ErrorRow, GenRow, error_record, gen_row
from benchcheck.spec import RunSpec
from benchcheck.sweep.parse import RULESET, parse_answer
from benchcheck.sweep.plan import Cell, error_label, failure_label
from benchcheck.sweep.results import COLUMNS, CSV_NAME, now_stamp, row_status, settles
from benchcheck.unit_loop import retry_free


def _base(cell: Cell, spec: RunSpec) -> dict[str, Any]:
    it = cell.item
    return {"item_id": it.item_id, "bench": it.bench, "item_hash": it.fingerprint, "step": cell.condition,
            "condition": cell.condition,
            "video_id": it.video_id or "", "gold": LETTERS[it.answer],
            "config_hash": cell.config_hash or spec.config_hash}


def _meta(v: Any) -> dict[str, Any]:
    if isinstance(v, dict):
        return v
    try:
        d = json.loads(v or "{}")
    except (TypeError, ValueError):
        return {}
    return d if isinstance(d, dict) else {}


def answer_record(cell: Cell, spec: RunSpec, gen: Generation, decode_s: float,
                  engine_config: str | None = None) -> tuple[GenRow, dict[str, Any]]:
    """The typed row and the raw line of one generated answer; ``engine_config``: the hash of the
    engine's own configuration where it has one (hf: ``HFConfig.hash``), kept in the typed row."""
    parsed = parse_answer(gen.text, cell.item.options)
    plan = cell.plan
    meta: dict[str, Any] = dict(plan.extra) if plan is not None else {}
    meta["parser"] = RULESET
    model = gen.model or spec.model.name
    stamp = now_stamp()
    row = gen_row({**_base(cell, spec), "status": "ok", "text": gen.text, "parsed": parsed.letter,
                   "parse_status": parsed.status, "parse": parsed.rule, "correct": parsed.index == cell.item.answer,
                   "n_frames": len(plan.indices) if plan else 0, "width": plan.width if plan else "",
                   "height": plan.height if plan else "", "prompt_tokens": gen.prompt_tokens,
                   "infer_s": round(gen.latency_s, 4), "decode_s": round(decode_s, 4), "model": model,
                   "meta": meta, "written_at": stamp,
                   **({"engine_config_hash": engine_config} if engine_config is not None else {})})
    raw = {**_base(cell, spec), "text": gen.text, "status": parsed.status, "pred": parsed.letter,
           "parse": parsed.rule, "prompt_tokens": gen.prompt_tokens, "completion_tokens": gen.completion_tokens,
           "latency_s": gen.latency_s, "decode_s": decode_s, "model": model,
           "frames": plan.record() if plan else None, "meta": meta, "written_at": stamp}
    del raw["step"]
    return row, raw


def na_record(cell: Cell, spec: RunSpec) -> GenRow:
    """The condition does not apply to the item (a final answer, no text)."""
    return gen_row({**_base(cell, spec), "status": "ok", "text": "", "parsed": None, "parse_status": NA, "parse": "",
                    "correct": None, "meta": {"reason": cell.reason}, "written_at": now_stamp()})


def reuse_record(cell: Cell, spec: RunSpec, source: GenRow) -> GenRow:
    """The reused answer as its own row of this condition (its hash), marked ``meta.reused_from``."""
    keep = ("text", "parsed", "parse_status", "parse", "correct", "n_frames", "width", "height", "prompt_tokens",
            "model")
    meta = {**_meta(source.get("meta")), "reused_from": cell.reuse_from}
    return gen_row({**_base(cell, spec), "status": "ok", **{k: source.get(k, "") for k in keep}, "infer_s": 0,
                    "decode_s": 0, "meta": meta, "written_at": now_stamp()})


def engine_error(cell: Cell, spec: RunSpec, f: Failure) -> ErrorRow:
    """An engine failure as an error row: never done; three counted ones give the item up. A
    failure that says nothing about the item (unreachable server, refused key or model) is
    ``retry_free``."""
    row = {**_base(cell, spec), "status": "error", "error_kind": f.kind, "error_status": f.status,
           "error": str(f)[:500], "written_at": now_stamp()}
    if retry_free(f.kind, f.status):
        row["retry_free"] = True
    return error_record(row)


def plan_error(cell: Cell, spec: RunSpec) -> ErrorRow:
    """A cell that cannot be asked (no usable video, a frame plan that cannot be made) as an error
    row, as a decode failure is one, so the CSV shows it (``csv_error_row``: ``no video``, ``frame
    plan``). ``retry_free``: it says nothing of the engine's answer, so it never gives the item up;
    every run plans the cell again and asks it once the store holds its video."""
    kind, message = failure_label(cell)
    row = engine_error(cell, spec, Failure(cell.item.item_id, "internal", f"{kind}: {message}")).to_dict()
    return error_record({**row, "retry_free": True})


def csv_row(rec: GenRow) -> dict[str, Any]:
    """The exchange file's row of a record (seed 001's columns, ``results.COLUMNS``): pure, so the
    same rows always give the same CSV."""
    f = rec.fields
    correct = "" if rec.na or rec.correct is None else int(rec.correct)
    return {"bench": rec.bench, "item_id": rec.item_id, "condition": rec.step, "status": rec.parse_status,
            "pred": rec.parsed or "", "gold": f.get("gold", ""), "correct": correct, "parse": f.get("parse", ""),
            "video_id": f.get("video_id", ""), "n_frames": f.get("n_frames", ""), "width": f.get("width", ""),
            "height": f.get("height", ""), "prompt_tokens": f.get("prompt_tokens", ""),
            "infer_s": f.get("infer_s", ""), "decode_s": f.get("decode_s", ""), "model": rec.model or "",
            "config_hash": rec.config_hash or "", "meta": json.dumps(_csv_meta(rec), sort_keys=True),
            "written_at": f.get("written_at", "")}


def _csv_meta(rec: GenRow) -> dict[str, Any]:
    """The CSV's ``meta``: the row's, with its ``item_hash`` (seed 001's columns have no place of
    their own for it), so a CSV row of an item edited since is stale as its typed row is."""
    meta = _meta(rec.get("meta"))
    return meta if rec.item_hash is None else {**meta, "item_hash": rec.item_hash}


assert tuple(csv_row(gen_row({"item_id": "i", "text": ""}))) == COLUMNS


def csv_error_row(rec: ErrorRow) -> dict[str, Any]:
    """The exchange file's row of a cell our run could not answer (its frames did not decode, the
    engine failed): status ``error`` (no answer: ``results.settles``), which every reader of the
    file counts as an error row of its benchmark x condition; ``meta`` says why (``error_kind``:
    ``decode``, ``http 500``, ...) and carries the item's hash, as an answer's does."""
    f = rec.fields
    kind, message = error_label(rec)
    meta: dict[str, Any] = {"error_kind": kind, "error": message}
    if rec.retry_free:
        meta["retry_free"] = True
    if rec.item_hash is not None:
        meta["item_hash"] = rec.item_hash
    return {"bench": rec.bench, "item_id": rec.item_id, "condition": rec.step, "status": "error", "pred": "",
            "gold": f.get("gold", ""), "correct": "", "parse": "", "video_id": f.get("video_id", ""),
            "n_frames": "", "width": "", "height": "", "prompt_tokens": "", "infer_s": "", "decode_s": "",
            "model": "", "config_hash": rec.config_hash or "", "meta": json.dumps(meta, sort_keys=True),
            "written_at": f.get("written_at", "")}


def csv_of(rec: GenRow | ErrorRow) -> dict[str, Any]:
    """The exchange file's row of a typed row: an answer's (:func:`csv_row`) or an error's."""
    return csv_row(rec) if isinstance(rec, GenRow) else csv_error_row(rec)


assert tuple(csv_error_row(error_record({"item_id": "i", "status": "error", "error_kind": "internal",
                                         "error": ""}))) == COLUMNS


def csv_standing(rec: GenRow | ErrorRow) -> dict[str, str]:
    """The columns of a record's CSV row (:func:`csv_of`) that decide which row of its key counts
    (``results.standing``: key, status, ``config_hash`` and the ``item_hash`` in ``meta``), as the
    file holds them; the whole row costs a JSON encoding of its meta, and a reader that only counts
    what a file lacks needs these (``sweep.state.unsynced``)."""
    status = rec.parse_status if isinstance(rec, GenRow) else "error"
    meta = json.dumps({"item_hash": rec.item_hash}) if rec.item_hash is not None else "{}"
    return {"bench": str(rec.bench), "item_id": rec.item_id, "condition": str(rec.step), "status": str(status),
            "config_hash": rec.config_hash or "", "meta": meta}


def record_of_csv(row: Mapping[str, str], judged: bool) -> GenRow | ErrorRow:
    """A CSV row as a record. ``judged``: the file is ours, so its ``config_hash`` is one of our
    spec hashes and a row under another one is stale; a foreign file's rows (the origin's) are
    not judged: their answers count as done, as seed 001 asks. A row of a status that settles
    nothing (``results.settles``: another tool's or an older run's ``error``) is an error row,
    read as screening reads one: the cell is asked again, and such rows count toward giving it up."""
    chash = (row.get("config_hash") or "").strip() if judged else ""
    correct = (row.get("correct") or "").strip()
    meta = _meta(row.get("meta"))
    item_hash = meta.pop("item_hash", None) if judged else None
    status = row_status(row)
    if not settles(status):
        return error_record({"item_id": row["item_id"], "bench": row["bench"], "step": row["condition"],
                             "condition": row["condition"], "config_hash": chash or None, "status": "error",
                             "error_kind": status, "error": f"status {status} in {CSV_NAME}", "source": "csv",
                             **({"item_hash": str(item_hash)} if item_hash else {})})
    return gen_row({"item_id": row["item_id"], "bench": row["bench"], "step": row["condition"],
                    "condition": row["condition"], "config_hash": chash or None, "status": "ok", "text": "",
                    "parsed": (row.get("pred") or "").strip() or None,
                    "parse_status": status,
                    "correct": {"1": True, "0": False}.get(correct), "source": "csv",
                    **{k: row.get(k, "") for k in COLUMNS if k not in ("bench", "item_id", "condition", "status",
                                                                        "pred", "correct", "config_hash", "meta")},
                    "meta": meta, **({"item_hash": str(item_hash)} if item_hash else {})})


def raw_of(rec: GenRow) -> dict[str, Any]:
    """The raw line of an NA or reused row: its CSV row with ``meta`` as an object. A CSV made by
    another tool may have no ``meta`` column; the reason and ``reused_from`` are also kept here."""
    return {**csv_row(rec), "meta": _meta(rec.get("meta"))}


def failure_line(cell: Cell, kind: str, message: str, spec: RunSpec | None = None) -> dict[str, Any]:
    return {"bench": cell.item.bench, "item_id": cell.item.item_id, "condition": cell.condition,
            "video_id": cell.item.video_id, "kind": kind, "message": message,
            "config_hash": spec.config_hash if spec else None, "at": now_stamp()}


def engine_failure(cell: Cell, spec: RunSpec, f: Failure) -> dict[str, Any]:
    return failure_line(cell, f.kind, str(f), spec)
