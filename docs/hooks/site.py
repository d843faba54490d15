"""mkdocs hooks of the documentation site: the pages that are generated, never written.

- ``index.md``: README.md, its links rewritten from the repository's view (``docs/x.md``) to the
  site's (``x.md``), so the start page and the README are one text.
- ``reference/cli.md``: every command's help, walked from ``benchcheck.cli:main`` at build time.
- ``reference/api.md``: the public records and functions of the engines, the store, the records,
  the run spec and the items, from their signatures and docstrings.
- the decision records (``decisions/*.md``) join the nav under Performance, whatever their number.

The build imports the package from ``src/`` beside this file's repository, so the pages describe
the code of the tree being built, not of some installed copy.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT / "src") not in sys.path:
    sys.path.insert(0, str(ROOT / "src"))

HELP_WIDTH = 88  # the text column of the site's theme, in monospace characters

# The modules of the Python API page, in page order: (module, one line on what it is for).
API_MODULES: tuple[tuple[str, str], ...] = (
    ("benchcheck.engines", "Engines: the async protocol every engine implements, its requests and results."),
    ("benchcheck.records", "Typed result rows: what one line of a step's (or condition's) JSONL file holds."),
    ("benchcheck.store", "The append-only row files: writing, reading, the state of a step."),
    ("benchcheck.spec", "RunSpec: everything that shapes an answer, and its hash."),
    ("benchcheck.items", "Items: the record, the loaders and validation."),
)

_README_LINK = re.compile(r"\]\((?:\./)?docs/([^)\s]*)\)")


# ---------------------------------------------------------------- the start page (README.md)


def readme_as_index(text: str) -> str:
    """README.md with its ``docs/...`` links pointing inside the site."""
    return _README_LINK.sub(lambda m: f"]({m.group(1)})", text)


# ---------------------------------------------------------------- the CLI reference


def walk_commands(cmd: click.Command, ctx: click.Context) -> Iterator[tuple[click.Command, click.Context]]:
    yield cmd, ctx
    if isinstance(cmd, click.Group):
        for name in sorted(cmd.commands):
            sub = cmd.commands[name]
            if sub.hidden:
                continue
            yield from walk_commands(sub, click.Context(sub, info_name=name, parent=ctx,
                                                        terminal_width=HELP_WIDTH, max_content_width=HELP_WIDTH))


def command_path(ctx: click.Context) -> str:
    return ctx.command_path


def cli_reference() -> str:
    from benchcheck.cli import main

    root = click.Context(main, info_name="benchcheck", terminal_width=HELP_WIDTH, max_content_width=HELP_WIDTH)
    out = [
        "# CLI reference",
        "",
        "Every command's `--help`, as the installed `benchcheck` prints it. This page is generated from the",
        "command definitions when the site is built, so it always matches the code.",
        "",
    ]
    for cmd, ctx in walk_commands(main, root):
        level = "#" * min(2 + command_path(ctx).count(" "), 4)
        out += [f"{level} `{command_path(ctx)}`", "", "```text", cmd.get_help(ctx).rstrip(), "```", ""]
    return "\n".join(out)


# ---------------------------------------------------------------- the Python API


def _doc(obj: Any) -> str:
    doc = inspect.getdoc(obj) or ""
    doc = doc.replace("``", "`")
    # a docstring's "\b" (click's no-rewrap marker) and indented blocks stay as text, not code
    return "\n".join(line.strip() for line in doc.splitlines())


class _Written:
    """An annotation as the source wrote it (``from __future__ import annotations`` keeps them as
    strings, which a signature would otherwise print quoted)."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text


def _unquoted(annotation: Any) -> Any:
    return _Written(annotation) if isinstance(annotation, str) else annotation


def _signature(obj: Any) -> str:
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):
        return "(...)"
    params = [p.replace(annotation=_unquoted(p.annotation)) for p in sig.parameters.values()]
    return str(sig.replace(parameters=params, return_annotation=_unquoted(sig.return_annotation)))


def _public_names(mod: Any) -> list[str]:
    names = getattr(mod, "__all__", None)
    if names is None:
        names = [n for n, v in vars(mod).items()
                 if not n.startswith("_") and getattr(v, "__module__", None) == mod.__name__
                 and (inspect.isclass(v) or inspect.isfunction(v))]
    return sorted(names, key=lambda n: (not inspect.isclass(getattr(mod, n)), n.casefold()))


def _class_section(name: str, cls: type) -> list[str]:
    out = [f"### `{name}`", ""]
    if dataclasses.is_dataclass(cls):
        out += ["```python", "@dataclass", f"class {name}:"]
        for f in dataclasses.fields(cls):
            ann = f.type if isinstance(f.type, str) else getattr(f.type, "__name__", repr(f.type))
            out.append(f"    {f.name}: {ann}")
        out += ["```", ""]
    else:
        bases = ", ".join(b.__name__ for b in cls.__bases__ if b is not object)
        out += ["```python", f"class {name}{f'({bases})' if bases else ''}", "```", ""]
    doc = _doc(cls)
    if doc:
        out += [doc, ""]
    for mname, member in sorted(vars(cls).items()):
        if mname.startswith("_") or not (inspect.isfunction(member) or isinstance(member, (classmethod, staticmethod,
                                                                                          property))):
            continue
        if isinstance(member, property):
            line, doc = f"- `{mname}` (property)", _first_paragraph(_doc(member))
        else:
            fn = member.__func__ if isinstance(member, (classmethod, staticmethod)) else member
            line, doc = f"- `{mname}{_signature(fn)}`", _first_paragraph(_doc(fn))
        out.append(f"{line}: {doc}" if doc else line)
    out.append("")
    return out


def _first_paragraph(doc: str) -> str:
    return " ".join(doc.split("\n\n", 1)[0].split())


def api_reference() -> str:
    out = [
        "# Python API",
        "",
        "The records and functions other code builds on: the engines, the row store, the typed rows, the run",
        "spec and the items. Generated from the signatures and docstrings when the site is built.",
        "",
    ]
    for modname, what in API_MODULES:
        mod = importlib.import_module(modname)
        out += [f"## `{modname}`", "", what, ""]
        for name in _public_names(mod):
            obj = getattr(mod, name)
            if inspect.isclass(obj):
                out += _class_section(name, obj)
            elif inspect.isfunction(obj):
                out += [f"### `{name}`", "", "```python", f"def {name}{_signature(obj)}", "```", "", _doc(obj), ""]
            else:
                out += [f"### `{name}`", "", f"A constant: `{type(obj).__name__}`.", ""]
    return "\n".join(out)


# ---------------------------------------------------------------- mkdocs events


def on_files(files: Any, config: Any) -> Any:
    from mkdocs.structure.files import File

    generated = {
        "index.md": readme_as_index((ROOT / "README.md").read_text(encoding="utf-8")),
        "reference/cli.md": cli_reference(),
        "reference/api.md": api_reference(),
    }
    for uri, content in generated.items():
        old = files.get_file_from_path(uri)
        if old is not None:
            files.remove(old)
        files.append(File.generated(config, uri, content=content))
    return files


def decision_records(docs_dir: Path) -> list[str]:
    """The decision records' paths relative to the docs folder, in file (= number) order."""
    return sorted(p.relative_to(docs_dir).as_posix() for p in (docs_dir / "decisions").glob("*.md"))


def on_config(config: Any) -> Any:
    """The decision records join the nav under Performance, whatever their number: a new record
    needs no edit of mkdocs.yml, and none is left out of the nav (the build's check of omitted
    pages stays on)."""
    records = decision_records(Path(config["docs_dir"]))
    nav = config.get("nav") or []
    for section in nav:
        if isinstance(section, dict) and "Performance" in section and records:
            section["Performance"] = [*section["Performance"], {"Decision records": records}]
    return config
