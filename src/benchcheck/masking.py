"""The one secret-masking helper: which variables are secrets, and how their values are masked.

Used by everything that writes text a person or another host may read: the QA harness's
result files and terminal lines, ``pack``'s logs and report, the launch lines in the returns
report, and the environment given to a ``--vlm-cmd`` child (:func:`is_secret_name`).

Two kinds of masking, both applied by :meth:`Masker.text`:

- *known values*: the values of the secret-named environment variables (and any value passed
  in on purpose, such as the Hub token), replaced wherever they occur;
- *patterns*: ``--api-key X``, ``SOME_API_KEY=X``, ``Authorization: Bearer X`` and ``hf_…``
  tokens, for secrets this process never saw (a log written on another machine). Only the
  secret itself is replaced: quotes and text around it are kept
  (``-H "Authorization: Bearer ***" http://x``).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from typing import Any

MASK = "***"
# Short values ("1", "true", "yes") would blank out ordinary text without protecting anything.
MIN_SECRET_LEN = 6

# A variable is a secret when its name says so: ``*_API_KEY``/``*_KEY``, ``*_TOKEN``, ``*_SECRET``
# (``AWS_SECRET_ACCESS_KEY``), ``*PASSWORD*``, ``*_PASS``/``*_PASSWD``, ``*_CREDENTIALS``, ``*_AUTH``.
# Names that merely contain such a word (``TOKENIZERS_PARALLELISM``, ``SSH_AUTH_SOCK``) are not.
_SECRET_NAME = re.compile(
    r"(?:^|_)(?:API_?KEY|KEY|TOKEN|SECRET|PASS|PASSWD|CREDENTIALS?|AUTH|AUTHORIZATION)$"
    r"|(?:^|_)SECRET_|PASSWORD"
)

# Characters of a bearer token (RFC 6750 b64token) and of a bare command-line value: a quote,
# a space or a closing bracket ends the secret and is kept.
_TOKEN = r"[A-Za-z0-9._~+/=\-]+"
_VALUE = r"[^\s\"'`,;)\]}]+"
_PATTERNS = (
    re.compile(rf"(--api[-_]key(?:=|\s+)[\"']?)({_VALUE})", re.I),
    re.compile(rf"(\b[A-Z][A-Z0-9_]*(?:_API_KEY|_TOKEN|_SECRET|PASSWORD)=[\"']?)({_VALUE})"),
    re.compile(rf"(\bAuthorization\s*:\s*(?:Bearer|Basic|Token)\s+)({_TOKEN})", re.I),
    re.compile(r"()(\bhf_[A-Za-z0-9]{16,})"),
)


def is_secret_name(name: str) -> bool:
    """Whether an environment variable's name marks its value as a secret."""
    return _SECRET_NAME.search(name.upper()) is not None


def secret_values(env: Mapping[str, str] | None = None, extra: Iterable[str] = ()) -> list[str]:
    """The values of the secret-named variables of ``env`` (default ``os.environ``) and ``extra``,
    each line of a multi-line value on its own, longest first; short values are left out."""
    env = os.environ if env is None else env
    found = {line.strip() for k, v in env.items() if is_secret_name(k) for line in v.splitlines()}
    found |= {line.strip() for v in extra for line in (v or "").splitlines()}
    # Longest first, so a secret that contains another is masked whole.
    return sorted((v for v in found if len(v) >= MIN_SECRET_LEN), key=lambda v: (-len(v), v))


def redact(line: str) -> str:
    """``line`` with every secret-shaped value (the patterns) replaced by ``***``."""
    for pat in _PATTERNS:
        line = pat.sub(lambda m: m.group(1) + MASK, line)
    return line


class Masker:
    """Masks known secret values and secret-shaped values in strings and nested JSON values."""

    def __init__(self, secrets: Iterable[str]) -> None:
        values = {s for s in secrets if len(s) >= MIN_SECRET_LEN}
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
        s = self.values_only(s)
        if "\n" not in s:
            return redact(s)
        return "".join(redact(line) for line in s.splitlines(keepends=True))

    def value(self, obj: Any) -> Any:
        """A copy of a JSON-like value with every string masked (keys included), so JSON stays JSON."""
        if isinstance(obj, str):
            return self.text(obj)
        if isinstance(obj, Mapping):
            return {self.text(str(k)): self.value(v) for k, v in obj.items()}
        if isinstance(obj, list | tuple):
            return [self.value(v) for v in obj]
        return obj
