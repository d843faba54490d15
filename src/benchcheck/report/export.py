"""``benchcheck export``: the kept (or removed) items of each benchmark in the form a harness reads.

- ``parquet``: a Hugging Face datasets folder: ``data/<bench>/test-00000-of-00001.parquet`` and a
  ``README.md`` whose ``configs`` front matter names one config per benchmark (the Hub's layout);
- ``lmms-eval``: a task folder: one ``<task>.yaml`` per benchmark (``dataset_path: json`` on a
  local JSONL, ``doc_to_visual/text/choice/target`` and ``process_results`` from ``utils.py``),
  and a group YAML over them;
- ``vlmevalkit``: one MCQ TSV per benchmark: ``index, question, A, B, ..., answer, video``
  (+ ``category``, ``item_id``); unused option cells are empty, as VLMEvalKit expects.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from benchcheck.atomic import write_bytes_atomic, write_text_atomic
from benchcheck.items import Item
from benchcheck.report.browser import slug
from benchcheck.report.source import StepProvenance, iter_benches
from benchcheck.screen.fates import KEPT, REMOVED

FORMATS = ("lmms-eval", "vlmevalkit", "parquet")
LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


@dataclass(frozen=True, slots=True)
class Selected:
    item: Item
    removed_at: int | None
    video: str | None


def select(results: Path, items: Sequence[Item], chain: Sequence[int], removed: bool,
           has_frames: Callable[[Item], bool], store: Path | None = None) -> dict[str, list[Selected]]:
    """Per benchmark, the items whose final fate is kept (or removed): pending, failed or open
    items are in neither set, so an export never claims an item that was not decided."""
    want = REMOVED if removed else KEPT
    out: dict[str, list[Selected]] = {}
    prov: dict[int, StepProvenance] = {}
    for bench in iter_benches(results, items, chain, has_frames, prov):
        out[bench.bench] = [Selected(ev.item, ev.removed_at, _video(ev.item, store)) for ev in bench.items
                            if ev.final == want]
    return out


def _video(item: Item, store: Path | None) -> str | None:
    from benchcheck.report.browser import safe_video_id

    vid = safe_video_id(item.video_id)
    if vid is None:
        return None
    return str((store / "normalized" / vid / "video.mp4").resolve()) if store is not None else vid


def record(s: Selected) -> dict[str, Any]:
    it = s.item
    return {"item_id": it.item_id, "bench": it.bench, "question": it.question, "options": list(it.options),
            "answer": it.answer, "answer_letter": LETTERS[it.answer], "video_id": it.video_id, "video": s.video,
            "task": it.task, "duration_s": it.duration_s, "removed_at": s.removed_at}


def write_parquet(out: Path, selected: Mapping[str, Sequence[Selected]], label: str) -> list[Path]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = pa.schema([("item_id", pa.string()), ("bench", pa.string()), ("question", pa.string()),
                        ("options", pa.list_(pa.string())), ("answer", pa.int64()), ("answer_letter", pa.string()),
                        ("video_id", pa.string()), ("video", pa.string()), ("task", pa.string()),
                        ("duration_s", pa.float64()), ("removed_at", pa.int64())])
    paths, configs = [], []
    for bench, rows in selected.items():
        rel = f"data/{slug(bench)}/test-00000-of-00001.parquet"
        table = pa.Table.from_pylist([record(s) for s in rows], schema=schema)
        buf = pa.BufferOutputStream()
        pq.write_table(table, buf)
        write_bytes_atomic(out / rel, buf.getvalue().to_pybytes())
        paths.append(out / rel)
        configs.append(f"- config_name: {json.dumps(slug(bench))}\n  data_files:\n  - split: test\n    path: {rel}")
    card = ("---\nconfigs:\n" + "\n".join(configs) + "\n---\n\n# BenchCheck export\n\n"
            f"The {label} items of {len(selected)} benchmarks after screening, one config per benchmark. "
            "`answer` is the index of the gold option in `options`.\n")
    write_text_atomic(out / "README.md", card)
    return [*paths, out / "README.md"]


def task_name(bench: str, label: str) -> str:
    return f"benchcheck_{slug(bench).lower().replace('-', '_').replace('.', '_')}_{label}"


def write_lmms_eval(out: Path, selected: Mapping[str, Sequence[Selected]], label: str) -> list[Path]:
    import yaml

    paths = []
    utils = resources.files("benchcheck.report").joinpath("lmms_eval_utils.py").read_text(encoding="utf-8")
    write_text_atomic(out / "utils.py", utils)
    tasks = []
    for bench, rows in selected.items():
        name = task_name(bench, label)
        data = out / f"{slug(bench)}.jsonl"
        write_text_atomic(data, "".join(json.dumps(record(s), ensure_ascii=False) + "\n" for s in rows))
        cfg = {"task": name, "dataset_path": "json",
               "dataset_kwargs": {"data_files": {"test": str(data.resolve())}}, "test_split": "test",
               "output_type": "generate_until",
               "generation_kwargs": {"max_new_tokens": 16, "temperature": 0, "do_sample": False},
               "metric_list": [{"metric": "accuracy", "aggregation": "mean", "higher_is_better": True}],
               "metadata": {"version": 0.0, "source": "benchcheck", "selection": label, "bench": bench,
                            "n_items": len(rows)}}
        text = yaml.safe_dump(cfg, sort_keys=False, allow_unicode=True)
        # lmms-eval names task functions with its `!function module.name` tag (not safe_dump-able)
        text += "".join(f"{k}: !function utils.{k}\n" for k in
                        ("doc_to_visual", "doc_to_text", "doc_to_choice", "doc_to_target", "process_results"))
        write_text_atomic(out / f"{name}.yaml", text)
        paths += [data, out / f"{name}.yaml"]
        tasks.append(name)
    group = {"group": f"benchcheck_{label}", "task": tasks}
    write_text_atomic(out / f"_benchcheck_{label}.yaml", yaml.safe_dump(group, sort_keys=False))
    return [*paths, out / "utils.py", out / f"_benchcheck_{label}.yaml"]


def tsv_text(rows: Sequence[Selected]) -> str:
    k = max((len(s.item.options) for s in rows), default=4)
    cols = ["index", "question", *LETTERS[:k], "answer", "video", "category", "item_id"]
    buf = io.StringIO()
    w = csv.writer(buf, delimiter="\t", lineterminator="\n", quoting=csv.QUOTE_MINIMAL)
    w.writerow(cols)
    for j, s in enumerate(rows):
        it = s.item
        opts = [*it.options, *[""] * (k - len(it.options))]
        w.writerow([j, it.question, *opts, LETTERS[it.answer], s.video or "", it.task or "", it.item_id])
    return buf.getvalue()


# pandas' default missing-value words: VLMEvalKit reads TSVs with plain ``pd.read_csv(sep="\t")``, so an
# option or question spelled exactly like one of these would come back as NaN (an option silently lost).
PANDAS_NA = frozenset({"", "#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN", "-NaN", "-nan", "1.#IND", "1.#QNAN",
                       "<NA>", "N/A", "NA", "NULL", "NaN", "None", "n/a", "nan", "null"})


def tsv_unsafe(item: Item) -> str | None:
    """Why an item cannot round-trip through a VLMEvalKit TSV, or None."""
    for j, text in enumerate([item.question, *item.options]):
        if text.strip() in PANDAS_NA:
            what = "question" if j == 0 else f"option {LETTERS[j - 1]}"
            return f"{what} {text!r} reads back as missing in pandas (VLMEvalKit's reader)"
    return None


def write_vlmevalkit(out: Path, selected: Mapping[str, Sequence[Selected]], label: str) -> list[Path]:
    """Items that would not read back whole are left out and listed in ``<name>.left_out.jsonl``."""
    paths = []
    for bench, rows in selected.items():
        p = out / f"{slug(bench)}_{label}.tsv"
        ok, bad = [], []
        for s in rows:
            why = tsv_unsafe(s.item)
            if why is None:
                ok.append(s)
            else:
                bad.append({"item_id": s.item.item_id, "bench": bench, "reason": why})
        write_text_atomic(p, tsv_text(ok))
        paths.append(p)
        side = p.with_suffix(".left_out.jsonl")
        if bad:
            write_text_atomic(side, "".join(json.dumps(b, ensure_ascii=False) + "\n" for b in bad))
            paths.append(side)
        else:
            side.unlink(missing_ok=True)
    return paths


WRITERS = {"parquet": write_parquet, "lmms-eval": write_lmms_eval, "vlmevalkit": write_vlmevalkit}


def export(fmt: str, out: Path, selected: Mapping[str, Sequence[Selected]], removed: bool) -> list[Path]:
    if fmt not in WRITERS:
        raise ValueError(f"format {fmt!r}: expected one of {', '.join(FORMATS)}")
    return WRITERS[fmt](out, selected, "removed" if removed else "kept")
