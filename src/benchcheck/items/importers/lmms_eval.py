"""An lmms-eval task: its YAML, the local dataset files it names, and its ``doc_to_*`` functions.

The YAML is loaded by lmms-eval's own ``load_yaml_config`` when lmms-eval is installed (``include:``
and the ``!function utils.name`` tags resolved its way), else by the same rules here. Loading a task
runs its ``utils.py``, as lmms-eval does: import tasks you trust. The documents come from
``dataset_path`` ``json`` / ``csv`` / ``parquet`` / ``arrow`` with ``dataset_kwargs.data_files``, or a
local ``save_to_disk`` folder (``load_from_disk: true``); a Hub dataset is not fetched (download it
and point ``dataset_path`` at the folder). ``process_docs`` is applied when the task has one.

Each document becomes a row: its own fields, plus ``doc_to_text``, ``doc_to_choice`` and
``doc_to_target`` computed as lmms-eval computes them (a function, a field name, a Jinja template or
a list), and ``doc_to_visual`` when the column map asks for it. The defaults: the question is the
document's ``question`` field when it has one (``doc_to_text`` is the whole prompt, options and
instruction included), else ``doc_to_text``; options ``doc_to_choice``; the gold ``doc_to_target``
(a letter for a ``generate_until`` task, an index or the option text for ``multiple_choice``).
"""

from __future__ import annotations

import ast
import glob
import importlib.util
import inspect
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchcheck.errors import first_line
from benchcheck.items.importers import Part, SourceError
from benchcheck.items.importers.hf_folder import read_data_file, read_folder
from benchcheck.items.load import ColumnMap, resolve_columns

LOCAL_BUILDERS = ("json", "csv", "parquet", "arrow")
VIRTUAL = ("doc_to_text", "doc_to_choice", "doc_to_target", "doc_to_visual")
_LETTER = re.compile(r"^\s*[\(\[]?([A-Z])[\)\]\.:]?\s*$")


def _own_loader(path: Path) -> dict[str, Any]:
    """lmms-eval's YAML rules without lmms-eval: ``include:`` (relative to the file) and ``!function``."""
    import yaml

    class Loader(yaml.SafeLoader):  # type: ignore[misc]
        pass

    def function(loader: yaml.Loader, node: yaml.Node) -> Callable[..., Any]:
        *module, name = str(loader.construct_scalar(node)).split(".")
        file = path.parent / f"{'.'.join(module)}.py"
        if not file.is_file():
            raise SourceError(f"{path}: !function {'.'.join([*module, name])}: no {file.name} beside the YAML")
        spec = importlib.util.spec_from_file_location(".".join(module), file)
        assert spec and spec.loader
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return getattr(mod, name)  # type: ignore[no-any-return]

    Loader.add_constructor("!function", function)
    cfg = yaml.load(path.read_text(encoding="utf-8"), Loader=Loader)  # a SafeLoader subclass
    if not isinstance(cfg, dict):
        raise SourceError(f"{path}: not a task YAML (top level is not a mapping)")
    includes = cfg.pop("include", None)
    merged: dict[str, Any] = {}
    for inc in reversed([includes] if isinstance(includes, str) else list(includes or [])):
        p = Path(inc) if Path(inc).is_file() else path.parent / inc
        merged.update(_own_loader(p))
    merged.update(cfg)
    return merged


def _check_mapping(path: Path) -> None:
    """A task YAML's top level is a mapping: checked before any loader runs (lmms-eval's, given a
    list, failed inside with an AttributeError that named nothing the user could act on)."""
    import yaml

    class Plain(yaml.SafeLoader):  # type: ignore[misc]
        pass

    Plain.add_constructor("!function", lambda loader, node: None)  # read, never imported here
    if not isinstance(yaml.load(path.read_text(encoding="utf-8"), Loader=Plain), dict):  # a SafeLoader subclass
        raise SourceError(f"{path}: not a task YAML (top level is not a mapping)")


def load_config(path: Path, use_lmms_eval: bool = True) -> dict[str, Any]:
    """The task's configuration (functions resolved), by lmms-eval's loader when it is installed."""
    try:
        _check_mapping(path)
        if use_lmms_eval:
            try:
                from lmms_eval.utils import load_yaml_config  # type: ignore[import-untyped, import-not-found, unused-ignore]
            except ImportError:
                pass
            else:
                # Given as absolute: lmms-eval (0.7+) resolves a local data_files path against the
                # YAML's folder as given, so a relative YAML path gave a relative result, which
                # _data_files joined to that folder a second time (task/task/data/x.csv).
                return dict(load_yaml_config(yaml_path=str(path.absolute()), mode="full"))
        return _own_loader(path)
    except SourceError:
        raise
    except Exception as e:  # YAML errors, a task's utils.py failing to import: one line naming the file
        raise SourceError(f"{path}: cannot load the task ({type(e).__name__}: {first_line(e, 200)})") from e


def _split(cfg: dict[str, Any], split: str | None) -> str:
    return split or cfg.get("test_split") or cfg.get("validation_split") or "test"


def _data_files(cfg: dict[str, Any], split: str, yaml_path: Path) -> list[Path]:
    files = (cfg.get("dataset_kwargs") or {}).get("data_files")
    if isinstance(files, dict):
        if split not in files:
            raise SourceError(f"{yaml_path}: data_files has no split {split!r} (splits: {', '.join(files)})")
        files = files[split]
    names = [files] if isinstance(files, str) else list(files or [])
    if not names:
        raise SourceError(f"{yaml_path}: dataset_path {cfg.get('dataset_path')!r} without dataset_kwargs.data_files")
    # each name is a glob pattern, as `datasets` (lmms-eval's loader) reads it: `data/*.jsonl`, or an
    # escaped `[[]` for a folder whose name has a bracket
    out = []
    for n in map(str, names):
        pattern = n if Path(n).is_absolute() else os.path.join(glob.escape(str(yaml_path.parent)), n)
        found = sorted(p for p in glob.glob(pattern, recursive=True) if Path(p).is_file())
        if not found:
            raise SourceError(f"{yaml_path}: data file {n} does not exist")
        out += [Path(p) for p in found]
    return out


def _documents(cfg: dict[str, Any], split: str | None, yaml_path: Path) -> list[dict[str, Any]]:
    dataset_path = cfg.get("dataset_path")
    kwargs = cfg.get("dataset_kwargs") or {}
    if dataset_path in LOCAL_BUILDERS:
        docs = [r for f in _data_files(cfg, _split(cfg, split), yaml_path) for r in read_data_file(f)]
    elif isinstance(dataset_path, str) and (folder := Path(os.path.expanduser(dataset_path))).is_dir():
        parts = read_folder(folder, split=_split(cfg, split) if (folder / "dataset_dict.json").is_file() else split)
        docs = [row for part in parts for _, row in part.rows if isinstance(row, dict)]
    elif isinstance(dataset_path, str) and kwargs.get("load_from_disk"):
        raise SourceError(f"{yaml_path}: dataset_path {dataset_path!r} (load_from_disk) is not a folder here")
    else:
        raise SourceError(f"{yaml_path}: dataset_path {dataset_path!r} is a Hub dataset: it is not downloaded here; "
                          "save it to disk (datasets' save_to_disk) and point dataset_path at the folder with "
                          "dataset_kwargs.load_from_disk: true, or import the folder with --from hf-folder")
    process = cfg.get("process_docs")
    if callable(process):
        try:
            docs = list(process(_as_dataset(docs)))
        except Exception as e:  # the task's own code
            raise SourceError(f"{yaml_path}: process_docs raised {type(e).__name__}: {first_line(e, 200)}") from e
    return docs


def _as_dataset(docs: list[dict[str, Any]]) -> Any:
    """A ``datasets.Dataset`` for ``process_docs`` when ``datasets`` is installed, else the list."""
    try:
        import datasets  # type: ignore[import-not-found, import-untyped, unused-ignore]
    except ImportError:
        return docs
    return datasets.Dataset.from_list(docs)


def _template(text: str, doc: dict[str, Any]) -> str:
    try:
        from lmms_eval.utils import apply_template
    except ImportError:
        import jinja2

        return jinja2.Environment(undefined=jinja2.StrictUndefined).from_string(text).render(**doc)
    return str(apply_template(text, doc))


def _kwargs(cfg: dict[str, Any]) -> dict[str, Any] | None:
    """``lmms_eval_specific_kwargs`` as lmms-eval prepares them for a model without its own entry."""
    kw = cfg.get("lmms_eval_specific_kwargs")
    if not isinstance(kw, dict):
        return None
    kw = dict(kw)
    if "default" in kw:
        kw.update(kw.get("default") or {})
    elif "dataset" in kw:
        kw.update(kw.get("dataset") or {})
    return kw


def compute(name: str, spec: Any, doc: dict[str, Any], kwargs: dict[str, Any] | None) -> Any:
    """One ``doc_to_*`` value, by lmms-eval's rules for that key."""
    if callable(spec):
        if name in ("doc_to_text", "doc_to_visual") and kwargs is not None and (
                len(inspect.signature(spec).parameters) >= 2):
            return spec(doc, kwargs)
        return spec(doc)
    if isinstance(spec, (int, list)):
        return spec
    if isinstance(spec, dict):
        return list(spec.values())
    if isinstance(spec, str):
        if spec in doc:
            return doc[spec]
        text = _template(spec, doc)
        if name == "doc_to_choice" or (name == "doc_to_target" and text.startswith("[") and text.endswith("]")):
            return ast.literal_eval(text)
        return int(text) if name == "doc_to_target" and text.isdigit() else text
    raise TypeError(f"{name} is {type(spec).__name__}")


def _row(doc: dict[str, Any], cfg: dict[str, Any], wanted: set[str], kwargs: dict[str, Any] | None,
         generate: bool) -> dict[str, Any] | str:
    row = dict(doc)
    for name in VIRTUAL:
        if name in wanted and cfg.get(name) is not None:
            try:
                row[name] = compute(name, cfg[name], doc, kwargs)
            except Exception as e:  # the task's own functions and templates
                return f"{name} raised {type(e).__name__}: {first_line(e, 160)}"
    target = row.get("doc_to_target")
    if generate and isinstance(target, str) and (m := _LETTER.match(target)):
        row["doc_to_target"] = "ABCDEFGHIJKLMNOPQRSTUVWXYZ".index(m.group(1))  # a letter is the gold's position
    visual = row.get("doc_to_visual")
    if isinstance(visual, (list, tuple)):
        row["doc_to_visual"] = visual[0] if visual and isinstance(visual[0], str) else None
    return row


def defaults(cfg: dict[str, Any], columns: list[str]) -> ColumnMap:
    auto = resolve_columns(columns, ColumnMap())
    return ColumnMap(
        item_id=auto.item_id, bench=auto.bench,
        question="question" if "question" in columns else ("doc_to_text" if cfg.get("doc_to_text") else None),
        options=("doc_to_choice",) if cfg.get("doc_to_choice") is not None else auto.options,
        answer="doc_to_target" if cfg.get("doc_to_target") is not None else auto.answer,
        video_id=auto.video_id, video_key=auto.video_key, task=auto.task, duration_s=auto.duration_s)


def task_yamls(path: Path) -> list[Path]:
    """A task YAML; a group YAML's tasks (found by name among the YAMLs beside it); a folder's task YAMLs."""
    import yaml

    def peek(p: Path) -> dict[str, Any]:
        try:
            text = re.sub(r"!function\s+\S+", "null", p.read_text(encoding="utf-8"))
            data = yaml.safe_load(text)
        except (OSError, UnicodeDecodeError, yaml.YAMLError):
            return {}
        return data if isinstance(data, dict) else {}

    if path.is_dir():
        found = [p for p in sorted(path.glob("*.yaml")) if isinstance(peek(p).get("task"), str)
                 and (peek(p).get("dataset_path") or peek(p).get("include"))]
        if not found:
            raise SourceError(f"{path}: no lmms-eval task YAML in this folder")
        return found
    head = peek(path)
    if "group" in head and isinstance(head.get("task"), list):
        by_name = {str(peek(p).get("task")): p for p in sorted(path.parent.glob("*.yaml")) if p != path}
        names = [t for t in head["task"] if isinstance(t, str)]
        if missing := [t for t in names if t not in by_name]:
            raise SourceError(f"{path}: group task {missing[0]!r} has no YAML beside it")
        return [by_name[t] for t in names]
    return [path]


def read_task(path: Path, split: str | None = None, wanted: set[str] | None = None,
              use_lmms_eval: bool = True) -> list[Part]:
    """One part per task; ``wanted`` are the ``doc_to_*`` keys to compute (default: all but visual)."""
    parts = []
    for yaml_path in task_yamls(path):
        cfg = load_config(yaml_path, use_lmms_eval)
        docs = _documents(cfg, split, yaml_path)
        kwargs = _kwargs(cfg)
        generate = cfg.get("output_type", "generate_until") != "multiple_choice"
        want = wanted if wanted is not None else {"doc_to_text", "doc_to_choice", "doc_to_target"}
        rows: list[tuple[str, dict[str, Any] | str]] = [
            (f"doc {n}", _row(d, cfg, want, kwargs, generate) if isinstance(d, dict) else "document is not a mapping")
            for n, d in enumerate(docs)]
        columns = list(dict.fromkeys(c for _, r in rows if isinstance(r, dict) for c in r))
        name = str(cfg.get("task") or yaml_path.stem)
        parts.append(Part(name, str(yaml_path), rows, defaults(cfg, columns), columns))
    return parts
