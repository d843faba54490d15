"""Keep secrets from the environment out of everything the QA harness writes or prints.

A VLM command's stderr, a server's error body or a command template can echo a key; every
string bound for a result file or the terminal goes through :meth:`Redactor.text` first.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from typing import Any

_SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH", re.I)
# Short values ("1", "true") would blank out ordinary text without protecting anything.
_MIN_SECRET_LEN = 6
MASK = "***"


class Redactor:
    """Replaces every known secret value with ``***`` in strings and nested JSON values."""

    def __init__(self, secrets: Iterable[str]) -> None:
        values = {s for s in secrets if len(s) >= _MIN_SECRET_LEN}
        # Longest first, so a secret that contains another is masked whole.
        self._values = sorted(values, key=len, reverse=True)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, extra: Iterable[str] = ()) -> Redactor:
        """Secrets are the values of variables whose names look like keys, tokens or passwords."""
        env = os.environ if env is None else env
        found = [v for k, v in env.items() if _SECRET_NAME.search(k)]
        return cls([*found, *extra])

    def text(self, s: str) -> str:
        for v in self._values:
            if v in s:
                s = s.replace(v, MASK)
        return s

    def value(self, obj: Any) -> Any:
        """A copy of a JSON-like value with every string redacted (keys included)."""
        if isinstance(obj, str):
            return self.text(obj)
        if isinstance(obj, Mapping):
            return {self.text(str(k)): self.value(v) for k, v in obj.items()}
        if isinstance(obj, list | tuple):
            return [self.value(v) for v in obj]
        return obj
