"""Which step-0 outcome a probe folder was made with, and whether it is a reader's own.

``benchcheck probe`` (and ``audit --probe``) leaves step 0's duplicates out when given ``--step0``.
Its folder outlives the run: a later ``audit --step0`` that appended a probe run without it (or with
another step-0 outcome) would show a probe over duplicates beside an audit without them. So the
probe writes ``probe_step0.json`` with its outputs, naming the items it left out at step 0 (a
digest of their ``(bench, item_id)`` pairs, as results name an item), and a reader shows the probe
only when it left out the same items as the reader (``stale_reason``), the one rule for it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Collection, Iterable
from pathlib import Path
from typing import Protocol

from benchcheck.atomic import write_text_atomic

STAMP_FILE = "probe_step0.json"

Pairs = Collection[tuple[str, str]]


class _Item(Protocol):  # an ``items.Item``, a layer this one does not import
    @property
    def bench(self) -> str: ...
    @property
    def item_id(self) -> str: ...
    @property
    def format(self) -> str: ...


def left_out(items: Iterable[_Item], removed: Collection[str] | None) -> set[tuple[str, str]]:
    """The multiple-choice items of ``items`` whose id step 0 removed (``removed``: the ids
    ``report.source.Step0.removed`` gives for these items; None: no step 0), as pairs."""
    if not removed:
        return set()
    return {(it.bench, it.item_id) for it in items if it.format == "mc" and it.item_id in removed}


def _digest(pairs: Pairs) -> str:
    text = "".join(f"{b}\t{i}\n" for b, i in sorted(pairs))
    return hashlib.sha256(text.encode()).hexdigest()


def write_stamp(probe_dir: str | Path, pairs: Pairs, source: str | None, complete: bool = True) -> Path:
    """Record, with the probe's outputs, the items it left out at step 0 and the ``--step0`` it
    was given (None: none). ``complete=False`` before the outputs are written: a run cut short
    then leaves a record every reader rejects, where a missing one would read as no ``--step0``."""
    path = Path(probe_dir) / STAMP_FILE
    write_text_atomic(path, json.dumps({"step0": source, "left_out": len(pairs), "digest": _digest(pairs),
                                        "complete": complete}) + "\n")
    return path


def _described(n: int, source: str | None) -> str:
    if source is None and not n:
        return "ran without --step0"
    return f"left out {n} item{'s' * (n != 1)} removed at step 0" + (f" (--step0 {source})" if source else "")


def stale_reason(probe_dir: str | Path, pairs: Pairs | None) -> str | None:
    """None when the probe in ``probe_dir`` left out at step 0 exactly ``pairs`` (None or empty:
    nothing, as a probe without ``--step0``); else why it is another step 0's, in one clause. A
    folder without the record was made before probes kept one: as a probe without ``--step0``. A
    record still marked in progress is a run cut short, its outputs part old, part new: stale for all."""
    pairs = pairs or ()
    try:
        stamp = json.loads((Path(probe_dir) / STAMP_FILE).read_text(encoding="utf-8"))
        n, source, digest = int(stamp["left_out"]), stamp.get("step0"), str(stamp["digest"])
        # records written before the in-progress mark have no "complete": they were written last
        complete = stamp.get("complete", True)
    except FileNotFoundError:
        n, source, digest, complete = 0, None, _digest(()), True
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return f"records its step-0 outcome in an unreadable {STAMP_FILE}"
    if complete is not True:
        return "comes from a probe run that was cut short before it wrote all its outputs; rerun it"
    if digest == _digest(pairs):
        return None
    mine = f"{len(pairs)} item{'s' * (len(pairs) != 1)}" if pairs else "none"
    return f"{_described(n, source if isinstance(source, str) else None)}, where this run leaves out {mine}"


def has_probe(probe_dir: str | Path | None) -> bool:
    """Whether ``probe_dir`` holds a probe's outputs at all (nothing to check, nothing to note else)."""
    return probe_dir is not None and any((Path(probe_dir) / name).is_file()
                                         for name in ("probe.md", "probe_items.parquet"))


def stale_note(probe_dir: str | Path | None, pairs: Pairs | None, fix: str) -> str | None:
    """The one note a reader shows in place of a probe made with another step-0 outcome than its
    own (``pairs``: the items the reader left out at step 0; ``stale_reason``), ending with how
    that reader matches them (``fix``, a sentence); None when there is no probe or it matches."""
    if probe_dir is None or not has_probe(probe_dir):
        return None
    why = stale_reason(probe_dir, pairs)
    return None if why is None else f"The probe in {probe_dir} is not included: it {why}. {fix}"
