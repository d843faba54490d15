"""The ``benchcheck`` command line: thin commands that parse arguments and call one function.

Every module of this package exposes ``COMMANDS`` (a list of click commands or groups); they
are discovered here, so adding a capability never edits a shared registry. Modules import
their heavy dependencies inside the command bodies, so ``benchcheck --help`` stays fast.
"""

from __future__ import annotations

import importlib
import pkgutil
import re

import click

from benchcheck import __version__

_EXAMPLE = re.compile(r"Example:\s*\n((?:[ \t]*\S.*(?:\n|$))+)")


def first_example(help_text: str) -> str | None:
    """The first example command of a help text, its ``\\``-continued lines joined into one line
    (the overview lists one line per command: a trailing backslash there would dangle)."""
    m = _EXAMPLE.search(help_text)
    if not m:
        return None
    parts: list[str] = []
    for line in m.group(1).splitlines():
        text = line.strip()
        parts.append(text.removesuffix("\\").strip())
        if not text.endswith("\\"):
            break
    return " ".join(parts)


def _examples(cmd: click.Command, prefix: str) -> list[str]:
    if isinstance(cmd, click.Group):
        out: list[str] = []
        for name in sorted(cmd.commands):
            out += _examples(cmd.commands[name], f"{prefix} {name}")
        return out
    example = first_example(cmd.help or "")
    return [f"  {example}"] if example else [f"  {prefix} --help"]


class _Main(click.Group):
    def invoke(self, ctx: click.Context) -> object:
        """A command's own errors are its one-line messages; a file or folder the system refuses
        (an output folder that cannot be made, a path that is a file, no permission) that reaches
        here unhandled is one line too, naming the path and the error's kind: never a traceback
        for a path a user typed. Exit 1, not the precondition's 2: it may come after work was
        written (what was written stays; the same command again resumes). Ctrl-C (and SIGTERM
        where a command turns it into Ctrl-C: ``qa``, ``launch``) is one line and exit 130, as
        ``launch`` gives, not click's "Aborted!" and 1, which read as a failed run."""
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:
            click.echo("interrupted: what was written stays; the same command again resumes", err=True)
            ctx.exit(130)
        except OSError as e:
            if e.filename is None:
                raise
            from benchcheck.errors import os_error_line

            click.echo(f"error: {os_error_line(e)}", err=True)
            ctx.exit(1)

    def format_epilog(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        lines = []
        for name in sorted(self.commands):
            if not self.commands[name].hidden:  # internal commands (``task run``) are not advertised
                lines += _examples(self.commands[name], f"benchcheck {name}")
        formatter.write_paragraph()
        formatter.write_text("Examples (one per command; see COMMAND --help):")
        for line in lines:
            formatter.write(line + "\n")


@click.group(cls=_Main, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 110})
@click.version_option(__version__, prog_name="benchcheck")
def main() -> None:
    """Audit multiple-choice video QA benchmarks with vision-language models."""


for _mod in pkgutil.iter_modules(__path__):
    for _cmd in getattr(importlib.import_module(f"{__name__}.{_mod.name}"), "COMMANDS", []):
        main.add_command(_cmd)
