"""The VLM as a command line (``--vlm-cmd``), run under a watchdog.

The template is split into words once, as a POSIX shell would (``shlex.split``: quotes group,
no expansion), and every placeholder ``{video}``, ``{question}``, ``{num_frames}``,
``{timeout}`` or ``{inline_media}`` (``--inline-media`` with that option, else left out) must be a
whole word by itself (``{question}``, ``"{question}"``); a placeholder
inside a longer word (``--q={question}``, ``"Q: {question}"``) refuses the template. Each
placeholder word becomes exactly one argument holding the value verbatim and the command is
executed directly, never through ``/bin/sh``, so no text of the dataset is ever parsed by a
shell. Wrap the command in ``sh -c '...' sh {video} {question}`` to use shell features and read
the values as ``"$1"``, ``"$2"``. It prints ``{"answer": ..., "model": ...}`` on stdout. There
are no retries: ``--timeout`` is the command's own limit (pass it with ``{timeout}``) and the
watchdog kills everything of the command ``timeout + grace`` seconds after the start, so a
command that never returns costs one item, not the run. A killed item is an error naming the
watchdog. The child's environment and the cleanup of what it leaves behind are
:mod:`benchcheck.qa.proc`'s.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import time
from collections.abc import Callable, Mapping
from typing import Any

from benchcheck.masking import Masker, child_environment
from benchcheck.qa.dataset import QAItem, video_problem
from benchcheck.qa.proc import run_with_watchdog
from benchcheck.qa.records import VLMAnswer

PLACEHOLDERS = ("video", "question", "num_frames", "timeout", "inline_media")
REQUIRED_PLACEHOLDERS = ("video", "question")
_PLACEHOLDER = re.compile(r"\{(" + "|".join(PLACEHOLDERS) + r")\}")
_TAIL_CHARS = 500
INLINE_FLAG = "--inline-media"  # what {inline_media} becomes with --inline-media (dropped without it)
ENV_INLINE = "BENCHCHECK_QA_INLINE_MEDIA"  # "1" in the command's environment with --inline-media
INLINE_WARN_BYTES = 10 * 1024 * 1024


def split_template(template: str) -> list[str]:
    """The template's words (``shlex.split``); ``ValueError`` unless every placeholder is a whole
    word, the video and the question are both there, and the program itself is not a placeholder."""
    try:
        words = shlex.split(template)
    except ValueError as e:
        raise ValueError(f"--vlm-cmd cannot be split into words: {e}") from None
    if not words:
        raise ValueError("--vlm-cmd is empty")
    for word in words:
        if _PLACEHOLDER.fullmatch(word) is None and _PLACEHOLDER.search(word) is not None:
            raise ValueError(
                f"--vlm-cmd: the word {word!r} has a placeholder inside it; each placeholder must be a "
                "word by itself (e.g. `myvlm --question {question}`, not `--question={question}` or "
                "`\"Q: {question}\"`): it becomes exactly one argument and no shell ever parses it. "
                "For shell features use `sh -c '... \"$1\" ...' sh {question}`"
            )
    found = {m.group(1) for w in words if (m := _PLACEHOLDER.fullmatch(w)) is not None}
    missing = [p for p in REQUIRED_PLACEHOLDERS if p not in found]
    if missing:
        raise ValueError(
            f"--vlm-cmd must contain {', '.join('{' + m + '}' for m in missing)} "
            f"(placeholders: {', '.join('{' + p + '}' for p in PLACEHOLDERS)})"
        )
    if _PLACEHOLDER.fullmatch(words[0]) is not None:
        raise ValueError("--vlm-cmd must start with the program to run, not a placeholder")
    return words


def check_template(template: str) -> None:
    """Raise ``ValueError`` unless :func:`split_template` accepts the template."""
    split_template(template)


def fill_template(words: list[str], values: dict[str, str | None]) -> list[str]:
    """The argument vector: each placeholder word replaced by its value verbatim (one argument),
    or left out when its value is None (``{inline_media}`` without ``--inline-media``); every
    other word, braces included, stays as written."""
    out = []
    for w in words:
        m = _PLACEHOLDER.fullmatch(w)
        if m is None:
            out.append(w)
        elif (v := values[m.group(1)]) is not None:
            out.append(v)
    return out


def parse_vlm_output(stdout: str) -> tuple[str, str | None]:
    """``(answer, model)`` from the command's stdout: the whole text as one JSON object, or
    else the last line that is one (log lines before it are tolerated). Raises ``ValueError``."""
    candidates = [stdout.strip()] + [ln.strip() for ln in reversed(stdout.splitlines())]
    for text in candidates:
        if not text.startswith("{"):
            continue
        try:
            obj = json.loads(text)
        except (ValueError, RecursionError):  # not JSON, or nested past the decoder's depth: bad output
            continue
        if isinstance(obj, dict) and "answer" in obj:
            return _answer_fields(obj)
    raise ValueError("stdout holds no JSON object with an 'answer' field")


def _answer_fields(obj: dict[str, Any]) -> tuple[str, str | None]:
    answer = obj["answer"]
    if isinstance(answer, bool) or not isinstance(answer, str | int | float):
        raise ValueError(f"'answer' must be text, got {type(answer).__name__}")
    model = obj.get("model")
    return str(answer), (str(model) if model not in (None, "") else None)


def _tail(data: bytes) -> str:
    text = data.decode("utf-8", "replace").strip()
    return text[-_TAIL_CHARS:] if len(text) > _TAIL_CHARS else text


def _signal_name(num: int) -> str:
    try:
        return signal.Signals(num).name
    except ValueError:
        return str(num)


class CommandVLM:
    """Asks the VLM by running the ``--vlm-cmd`` template once per item."""

    kind = "command"

    def __init__(self, template: str, num_frames: int, timeout_s: float, watchdog_grace_s: float,
                 redactor: Masker, env: Mapping[str, str] | None = None, env_passed: tuple[str, ...] = (),
                 inline_media: bool = False, warn: Callable[[str], None] = lambda _m: None) -> None:
        self.argv = split_template(template)
        if shutil.which(self.argv[0]) is None:
            raise ValueError(f"--vlm-cmd: the program {self.argv[0]!r} is not found or not executable")
        self.template = template
        self.num_frames = num_frames
        self.timeout_s = timeout_s
        self.watchdog_grace_s = watchdog_grace_s
        self.redactor = redactor
        self.env_passed = env_passed
        self.env = child_environment(os.environ if env is None else env, env_passed)
        # --inline-media: the clip goes to the VLM inline (the old behaviour of `vss vlm run --file`):
        # {inline_media} becomes --inline-media and the command's environment says so.
        self.inline_media = inline_media
        self.warn = warn
        if inline_media:
            self.env[ENV_INLINE] = "1"
            if "{inline_media}" not in self.argv:
                warn(f"--inline-media: the --vlm-cmd template has no {{inline_media}} word; the command is told "
                     f"only by {ENV_INLINE}=1 in its environment (put {{inline_media}} where your VLM CLI takes "
                     f"its inline flag: it becomes {INLINE_FLAG})")

    def settings(self) -> dict[str, Any]:
        """What identifies this VLM in the run configuration (no secrets)."""
        # Only when used, so the configuration hash of earlier runs (and their stored answers) holds.
        passed = {"vlm_env_passed": sorted(self.env_passed)} if self.env_passed else {}
        inline = {"media": "inline"} if self.inline_media else {}
        return {"mode": self.kind, "vlm_cmd": self.redactor.text(self.template), **passed, **inline}

    def command_for(self, item: QAItem) -> list[str]:
        return fill_template(self.argv, {
            "video": str(item.video_path),
            "question": item.question,
            "num_frames": str(self.num_frames),
            "timeout": f"{self.timeout_s:g}",
            "inline_media": INLINE_FLAG if self.inline_media else None,
        })

    async def answer(self, item: QAItem) -> VLMAnswer:
        if (problem := video_problem(item)) is not None:
            return VLMAnswer(item.id, "error", 0.0, error=problem, error_kind="video")
        if self.inline_media and item.video_path.stat().st_size > INLINE_WARN_BYTES:
            size = item.video_path.stat().st_size / 2**20
            self.warn(f"{item.id}: {item.video} is {size:.1f} MB inline (--inline-media); VLMs commonly reject "
                      "clips over ~10 MB (HTTP 422 '... content ... valid string'): configure a routable "
                      "address so the clip is fetched by URL")
        limit = self.timeout_s + self.watchdog_grace_s
        t0 = time.monotonic()
        try:
            res = await run_with_watchdog(self.command_for(item), limit, self.env)
        except OSError as e:
            msg = self.redactor.text(f"VLM command could not start: {e}")
            return VLMAnswer(item.id, "error", time.monotonic() - t0, error=msg, error_kind="exit")
        if res.killed:
            msg = (f"killed by the watchdog after {res.elapsed_s:.1f} s (--timeout {self.timeout_s:g} + "
                   f"--watchdog-grace {self.watchdog_grace_s:g}): the VLM command never returned")
            return VLMAnswer(item.id, "error", res.elapsed_s, error=msg, error_kind="watchdog")
        if res.returncode != 0:
            rc = res.returncode or 0
            what = f"killed by signal {_signal_name(-rc)}" if rc < 0 else f"exited {rc}"
            if 128 < rc < 128 + 65:
                what += f" (a shell's child died of {_signal_name(rc - 128)}?)"
            tail = self.redactor.text(_tail(res.stderr) or _tail(res.stdout))
            msg = f"VLM command {what}" + (f": {tail}" if tail else "")
            return VLMAnswer(item.id, "error", res.elapsed_s, error=msg, error_kind="exit")
        try:
            answer, model = parse_vlm_output(res.stdout.decode("utf-8", "replace"))
        except ValueError as e:
            tail = self.redactor.text(_tail(res.stdout))
            return VLMAnswer(item.id, "error", res.elapsed_s, error=f"VLM command output: {e}: {tail!r}",
                             error_kind="bad_output")
        return VLMAnswer(item.id, "ok", res.elapsed_s, answer=answer, model=model)

    async def aclose(self) -> None:
        """Nothing to release: every command's process group is gone when its item ends."""
