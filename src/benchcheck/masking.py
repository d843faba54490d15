"""The one secret-masking helper: which variables are secrets, and how their values are masked.

Used by everything that writes text a person or another host may read: the QA harness's
result files and terminal lines, ``pack``'s logs and report, the launch lines in the returns
report, and the environment given to a child process (:func:`child_environment`).

Two kinds of masking, both applied by :meth:`Masker.text`:

- *known values*: the values of the secret-named environment variables (and any value passed
  in on purpose, such as the Hub token) that could be secrets (:func:`could_be_secret`: not too
  short, not one ordinary word), replaced wherever they occur in free text;
- *patterns*: ``--api-key X``, ``SOME_API_KEY=X``, ``api_key='X'`` (and ``'api_key': ['X']``, as vLLM
  logs its arguments), ``Authorization: Bearer X``, a header or YAML line ``x-api-key: X`` or
  ``SOME_API_KEY: X``/``SOME_TOKEN: X``, ``hf_…``
  tokens and the ``user:password@`` part of a URL (``http://***@host``), for secrets this process
  never saw (a log written on another machine, an endpoint variable with credentials). Only the
  secret itself is replaced: quotes and text around it are kept
  (``-H "Authorization: Bearer ***" http://x``).

JSON values are masked by structure (:meth:`Masker.value`): string values only, never keys.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Mapping
from typing import Any

MASK = "***"
JUDGE_PREFIX = "EVAL_LLM_JUDGE_"  # the LLM judge's variables (qa/judge.py): never a child's
# Which values of secret-named variables are masked in free text (docs/qa.md, "Secrets"): a value
# too short or too common to be a secret ("1", "true", "answer", "status", "password") would
# blank out ordinary words without protecting anything, and a run's outputs would change with
# the environment. A value is masked when it has at least MIN_SECRET_LEN characters and either
# SURE_SECRET_LEN or more, or characters of at least two classes (letters, digits, others).
MIN_SECRET_LEN = 8
SURE_SECRET_LEN = 16

# A variable is a secret when its name says so: ``*_API_KEY``/``*_KEY``, ``*_TOKEN``, ``*_SECRET``
# (``AWS_SECRET_ACCESS_KEY``), ``*PASSWORD*``, ``*_PASS``/``*_PASSWD``, ``*_CREDENTIALS``, ``*_AUTH``.
# Names that merely contain such a word (``TOKENIZERS_PARALLELISM``, ``SSH_AUTH_SOCK``) are not.
_SECRET_NAME = re.compile(
    r"(?:^|_)(?:API_?KEY|KEY|TOKEN|SECRET|PASS|PASSWD|CREDENTIALS?|AUTH|AUTHORIZATION)$"
    r"|(?:^|_)SECRET_|PASSWORD"
)

# Characters of a bearer token (RFC 6750 b64token) and of a bare command-line value: a quote,
# a backslash (a JSON escape), a space or a closing bracket ends the secret and is kept. No
# pattern crosses a line, so text can be masked in blocks of many lines.
_TOKEN = r"[A-Za-z0-9._~+/=\-]+"
_VALUE = r"[^\s\"'`,;)\]}\\]+"
# Each pattern with the literals (in the lower-cased text, or as is) one of which must be present
# for it to match: most log lines hold none, and a substring test is far cheaper than a regex scan
# (see decision 038).
_PATTERNS: tuple[tuple[tuple[str, ...], bool, re.Pattern[str]], ...] = (
    (("--api-key", "--api_key"), True, re.compile(rf"(--api[-_]key(?:=|[ \t]+)[\"']?)({_VALUE})", re.I)),
    (("API_KEY=", "TOKEN=", "SECRET=", "PASSWORD="), False,
     re.compile(rf"((?:API_KEY|TOKEN|SECRET|PASSWORD)=[\"']?)({_VALUE})")),
    (("authorization",), True,
     re.compile(rf"([Aa][Uu][Tt][Hh][Oo][Rr][Ii][Zz][Aa][Tt][Ii][Oo][Nn][ \t]*:[ \t]*"
                rf"(?:[Bb]earer|[Bb]asic|[Tt]oken)[ \t]+)({_TOKEN})")),
    (("hf_",), False, re.compile(r"()(?<![A-Za-z0-9_])(hf_[A-Za-z0-9]{16,})")),
    # A URL's userinfo, whole (a token may be the user name alone): it ends at the last ``@``
    # before the host, and holds no ``/?#`` nor a space, a quote or a bracket.
    (("://",), False, re.compile(r"(://)([^\s/?#@\"'`<>()\[\]{}]+)(?=@)")),
)


# A field named ``api_key`` (any case, ``-``/``_`` or none) given a quoted string or a list of them:
# vLLM's startup line ``non-default args: {..., 'api_key': ['sk-…']}``, an ``argparse.Namespace``
# dump ``api_key='sk-…'``, a JSON ``"api_key": "sk-…"``. Each quoted value is the secret; an
# unquoted one (``None``, ``null``) is not a key and stays.
_KEY_FIELD_LITERALS = ("api_key", "api-key", "apikey")
_KEY_FIELD = re.compile(r"api[-_]?key[\"']?[ \t]*[:=][ \t]*", re.I)
_QUOTED = re.compile(rf"[ \t]*([\"'])({_VALUE})\1")
_NEXT_ITEM = re.compile(r"[ \t]*,")


def _key_field_spans(text: str, at: int) -> list[tuple[int, int]]:
    """The quoted values of a key field that starts at ``at`` (none when it does not)."""
    m = _KEY_FIELD.match(text, at)
    if m is None:
        return []
    pos, spans = m.end(), []
    listed = text.startswith("[", pos)
    if listed:
        pos += 1
    while (q := _QUOTED.match(text, pos)) is not None:
        spans.append(q.span(2))
        pos = q.end()
        if not listed or (sep := _NEXT_ITEM.match(text, pos)) is None:
            break
        pos = sep.end()
    return spans


# A field written as a line of its own: an HTTP header (``x-api-key: sk-…``, any case, as sent by
# ``curl -H "…"``, shown by ``curl -v`` as ``> …`` or by ``http.client``'s debug lines after an
# escaped ``\r\n``) or a YAML/.env entry (``OPENAI_API_KEY: sk-…``, quoted or not). The field
# names are the ``api_key`` family in any case and ``*TOKEN``/``*SECRET``/``*PASSWORD`` in upper
# case only, as the ``NAME=X`` pattern: tokenizer configs write ``pad_token: <pad>``. The field must
# start its line (after indentation, a YAML list dash or curl's ``>``), an escaped newline or a
# quote, so prose that mentions one (``send the x-api-key: header``) stays. A null word is no key,
# and a list or mapping (``'api_key': ['sk-…']``) is the quoted fields' above.
_LINE_FIELD_LITERALS = ("TOKEN", "SECRET", "PASSWORD")  # as is; the api_key family's: lower-cased
_LINE_FIELD_ANY = re.compile("|".join(_LINE_FIELD_LITERALS))
_LINE_FIELD = re.compile(
    rf"(?:(?i:[a-z0-9_-]*api[-_]?key)|[A-Z0-9_]*(?:TOKEN|SECRET|PASSWORD))[\"']?[ \t]*:[ \t]*"
    rf"(?:([\"'])({_VALUE})\1|(?![\[{{])({_VALUE}))")
_LINE_START = re.compile(r"[ \t]*(?:[-<>][ \t]+)?")
_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-")
_NULL_WORDS = frozenset({"none", "null", "~"})


def _line_field_span(text: str, at: int) -> tuple[int, int] | None:
    """The value of a line field whose name holds ``at`` (None when there is none)."""
    start = at
    while start > 0 and text[start - 1] in _NAME_CHARS:
        start -= 1
    escaped_newline = start > 0 and text.startswith("\\n", start - 1)
    if escaped_newline:
        start += 1  # the ``n`` of ``\n`` is no part of the name
    # Only the few characters before the name are looked at: a log line may be megabytes long.
    line = start
    while line > 0 and text[line - 1] in " \t-<>":
        line -= 1
    starts_line = (line == 0 or text[line - 1] == "\n") and _LINE_START.fullmatch(text, line, start) is not None
    if not (starts_line or escaped_newline or text[start - 1:start] in ("\"", "'")):
        return None
    m = _LINE_FIELD.match(text, start)
    if m is None or (m.group(3) is not None and m.group(3).lower() in _NULL_WORDS):
        return None
    return m.span(2) if m.group(2) is not None else m.span(3)


def _find_all(hay: str, literals: tuple[str, ...]) -> list[int]:
    """Where each of ``literals`` starts in ``hay``."""
    found = []
    for lit in literals:
        i = hay.find(lit)
        while i != -1:
            found.append(i)
            i = hay.find(lit, i + 1)
    return found


def _fields(text: str, hay: str | None) -> list[tuple[int, int]]:
    """Every key field's quoted values and every line field's value (``hay``: the lower-cased
    ``text`` of the same length, to find the field names by substring; None to scan ``text`` with
    the regexes). The api_key family's names are found once for both kinds."""
    if hay is None:
        keys = [m.start() for m in _KEY_FIELD.finditer(text)]
        others = [m.start() for m in _LINE_FIELD_ANY.finditer(text)]
    else:
        keys, others = _find_all(hay, _KEY_FIELD_LITERALS), _find_all(text, _LINE_FIELD_LITERALS)
    spans = [span for i in keys for span in _key_field_spans(text, i)]
    return spans + [span for i in keys + others if (span := _line_field_span(text, i)) is not None]


def could_be_secret(value: str) -> bool:
    """Whether a value is worth masking in free text (the rule above): ``hunter2-x``, ``sk-12345678``
    and any 16 characters are; ``answer``, ``status``, ``password``, ``12345678`` are not."""
    if len(value) < MIN_SECRET_LEN:
        return False
    if len(value) >= SURE_SECRET_LEN:
        return True
    classes = (any(c.isalpha() for c in value), any(c.isdigit() for c in value),
               any(not c.isalnum() for c in value))
    return sum(classes) >= 2


def is_secret_name(name: str) -> bool:
    """Whether an environment variable's name marks its value as a secret."""
    return _SECRET_NAME.search(name.upper()) is not None


def child_environment(env: Mapping[str, str], keep: Iterable[str] = (), drop: Iterable[str] = ()) -> dict[str, str]:
    """``env`` without the judge's variables, the secret-named ones and ``drop`` (a key under a name
    of the user's choosing, ``--vlm-api-key-env``), except those in ``keep``: the environment of a
    child process (a ``--vlm-cmd`` child, the ``nvdataset`` download, an engine's decoding workers)."""
    wanted, unwanted = set(keep), set(drop)
    return {k: v for k, v in env.items()
            if k in wanted or not (k in unwanted or k.upper().startswith(JUDGE_PREFIX) or is_secret_name(k))}


def drop_secret_variables(*names: str) -> None:
    """Remove the judge's, the secret-named and ``names``' variables (a key under a name of the
    user's choosing, ``--api-key-env``) from this process's ``os.environ``: the initializer of a
    pool of workers that decode untrusted files. What they start, and code that asks for their
    environment, never sees the keys; the values stay in the environment the process was started
    with (``/proc/<pid>/environ``), which only the same user can read, as the parent's own."""
    keep = child_environment(os.environ)
    for name in [k for k in os.environ if k not in keep or k in names]:
        del os.environ[name]


def secret_values(env: Mapping[str, str] | None = None, extra: Iterable[str] = ()) -> list[str]:
    """The values of the secret-named variables of ``env`` (default ``os.environ``) and ``extra``,
    each line of a multi-line value on its own, longest first; short values are left out."""
    env = os.environ if env is None else env
    found = {line.strip() for k, v in env.items() if is_secret_name(k) for line in v.splitlines()}
    found |= {line.strip() for v in extra for line in (v or "").splitlines()}
    # Longest first, so a secret that contains another is masked whole.
    return sorted((v for v in found if could_be_secret(v)), key=lambda v: (-len(v), v))


def _secret_spans(text: str, hay: str, literals: tuple[str, ...], pat: re.Pattern[str]) -> list[tuple[int, int]]:
    """Where ``pat``'s secret (group 2) is, trying the pattern only where one of its literals
    starts in ``hay`` (a substring search runs at memory speed; a regex scan of every position
    of a log does not)."""
    spans = []
    for lit in literals:
        i = hay.find(lit)
        while i != -1:
            m = pat.match(text, i)
            if m is not None:
                spans.append(m.span(2))
            i = hay.find(lit, i + 1)
    return spans


def redact(text: str) -> str:
    """``text`` with every secret-shaped value (the patterns) replaced by ``***``."""
    low = text.lower()
    if len(low) != len(text):  # a few characters lower-case to two: positions would not line up
        for _lits, _lowered, pat in _PATTERNS:
            text = pat.sub(lambda m: m.group(1) + MASK, text)
        return _replace_spans(text, _fields(text, None))
    spans = _fields(text, low)
    for literals, lowered, pat in _PATTERNS:
        spans += _secret_spans(text, low if lowered else text, literals, pat)
    return _replace_spans(text, spans)


def _replace_spans(text: str, spans: list[tuple[int, int]]) -> str:
    """``text`` with each span (overlapping ones once) replaced by the mask."""
    if not spans:
        return text
    out, at = [], 0
    for start, end in sorted(spans):
        if end <= at:
            continue
        out += [text[at:max(start, at)], MASK]
        at = end
    out.append(text[at:])
    return "".join(out)


def _spellings(value: str) -> set[str]:
    """A secret as written in text and inside JSON strings (escaped, ASCII-escaped)."""
    return {value, json.dumps(value)[1:-1], json.dumps(value, ensure_ascii=False)[1:-1]}


class Masker:
    """Masks known secret values and secret-shaped values in strings and nested JSON values."""

    def __init__(self, secrets: Iterable[str]) -> None:
        # A secret written in JSON with escapes (a quote, a backslash, non-ASCII) is masked in that
        # spelling too, so JSON text can be masked as text and stays valid JSON.
        values = {sp for s in secrets if could_be_secret(s) for sp in _spellings(s)}
        self.values = sorted(values, key=lambda v: (-len(v), v))

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, extra: Iterable[str] = ()) -> Masker:
        return cls(secret_values(env, extra))

    def values_only(self, s: str) -> str:
        for v in self.values:
            if v in s:
                s = s.replace(v, MASK)
        return s

    def text(self, s: str) -> str:
        """Known values first (they may contain pattern-like text), then the patterns."""
        return redact(self.values_only(s))

    def value(self, obj: Any) -> Any:
        """A copy of a JSON-like value with every string value masked. Keys are structure, never
        masked: a record read back must have the fields it was written with (``answer``, ``status``)."""
        if isinstance(obj, str):
            return self.text(obj)
        if isinstance(obj, Mapping):
            return {k: self.value(v) for k, v in obj.items()}
        if isinstance(obj, list | tuple):
            return [self.value(v) for v in obj]
        return obj
