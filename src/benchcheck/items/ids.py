"""Item ids (pure): one column, several joined (``video+qid``), or ``{bench}_{index}``; and the
per-file tally that names repeated ids and notices ids numbered per video.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

ID_KEYS = ("item_id", "id", "qid", "question_id")


def _is_blank(v: Any) -> bool:
    return v is None or (isinstance(v, str) and not v.strip())


def id_columns(item_id: str | None, columns: Iterable[str] = ()) -> tuple[str, ...]:
    """The columns an id is made of: ``video+qid`` -> ``("video", "qid")``; a column whose own name
    holds a ``+`` is taken whole."""
    if not item_id:
        return ()
    return (item_id,) if item_id in columns or "+" not in item_id else tuple(item_id.split("+"))


def nextqa_layout(cols: Mapping[str, None], options: tuple[str, ...]) -> bool:
    """Whether a file's columns are NExT-QA's (``video``, ``qid``, options spread over ``a0..a4``)."""
    return "qid" in cols and "video" in cols and len(options) > 1


def default_id(cols: Mapping[str, None], options: tuple[str, ...]) -> str | None:
    """The id column when the map names none. The NExT-QA layout numbers its questions within
    each video (``qid`` restarts at 0), so its id is ``video+qid``."""
    found = next((k for k in ID_KEYS if k in cols), None)
    if found == "qid" and nextqa_layout(cols, options):
        return "video+qid"
    return found


def item_id_of(row: Mapping[str, Any], spec: str | None, bench: str, index: int) -> tuple[str, str | None]:
    """(item id, problem): one column as it is, several joined by ``_``, else ``{bench}_{index}``."""
    cols = id_columns(spec, row)
    if len(cols) <= 1:
        raw = row.get(cols[0]) if cols else None
        return (str(raw) if not _is_blank(raw) else f"{bench}_{index}"), None
    parts = []
    for c in cols:
        v = row.get(c)
        if _is_blank(v):
            return f"{bench}_{index}", f"item id column {c!r} (of {spec!r}) is empty or missing"
        parts.append(str(int(v)) if isinstance(v, float) and v.is_integer() else str(v).strip())
    return "_".join(parts), None


def gives_id(row: Mapping[str, Any], spec: str | None) -> bool:
    """True when the row names its own id (an id of ``{bench}_{index}`` is generated otherwise)."""
    cols = id_columns(spec, row)
    return len(cols) > 1 or (len(cols) == 1 and not _is_blank(row.get(cols[0])))


# ``items import --id-prefix``'s values: ``bench``, each id qualified by its item's benchmark
ID_PREFIXES = ("bench",)


def qualified_id(bench: str, item_id: str) -> str:
    """``BENCH/ID``: an id two benchmarks can share (both number their items 0..N) made the item's
    own, as an lmms-eval task's documents are keyed by task and index. A benchmark name holds no
    ``/`` (``checks.bench_name_problem``), so the first one splits it off; an id that already starts
    with its benchmark's prefix (an export imported back) is kept."""
    return item_id if item_id.startswith(f"{bench}/") else f"{bench}/{item_id}"


def duplicate_id_message(first: str, first_bench: str | None, bench: str) -> str:
    """A duplicate id, in one line naming the first item's ``FILE:LINE``; where the first is another
    benchmark's item, it names the way through: ids qualified by benchmark (``qualified_id``),
    written once into the item files."""
    if first_bench is None or first_bench == bench:
        return f"duplicate item_id (first in {first})"
    return (f"duplicate item_id (first in {first}, benchmark {first_bench}): two benchmarks number their "
            "items alike; write each benchmark's ids as BENCH/ID with benchcheck items import FILE --from "
            "hf-folder --id-prefix bench --out DIR for each item file (docs/items.md, \"Ids\")")


def free_id(base: str, taken: Collection[str]) -> str:
    """A generated id that no given id and no earlier item holds: ``base``, else ``base_2``, ``base_3``...

    A record without an id is never a duplicate, and a given id never loses to a generated one."""
    if base not in taken:
        return base
    k = 2
    while f"{base}_{k}" in taken:
        k += 1
    return f"{base}_{k}"


@dataclass(frozen=True, slots=True)
class IdRepeat:
    """An id a file gives twice: the record that repeats it and the one that gave it first (``where``
    as the loader names records: a line, ``row N``, ``#N``)."""

    item_id: str
    where: str
    first: str


@dataclass(slots=True)
class IdTally:
    """Within one file: the ids that repeat (where first, where again), and per item its (video, id)."""

    first_at: dict[str, str] = field(default_factory=dict)
    repeats: list[IdRepeat] = field(default_factory=list)
    pairs: list[tuple[str, str]] = field(default_factory=list)

    def add(self, row: Mapping[str, Any], id_spec: str | None, video: str | None, item_id: str, where: str,
            repeat_in_file: bool) -> None:
        if repeat_in_file:
            self.repeats.append(IdRepeat(item_id, where, self.first_at.get(item_id, "?")))
        else:
            self.first_at.setdefault(item_id, where)
        if video and len(id_columns(id_spec, row)) == 1:
            self.pairs.append((str(row.get(video)), item_id))

    def hint(self, path: str, id_spec: str | None, video: str | None) -> tuple[str, str] | None:
        """(where, one line) for a file whose ids repeat: where the first repeat is, and the line that
        names it and the item it repeats. It suggests ``--columns 'item_id=VIDEO+ID'`` only where that
        map makes every id unique and the repeats are the file's numbering, not a slip: most of its
        items share their id with an item of another video (NExT-QA's ``qid`` restarts at 0 in every
        video, so nearly all do; one id typed twice leaves the others unique). Otherwise the line says
        the later items are refused: a map would hide a real data error."""
        if not self.repeats:
            return None
        first = self.repeats[0]
        n = len(self.repeats)
        col = f"item_id column {id_spec!r}" if id_spec else "item_id"
        head = (f"{col} repeats: {first.item_id!r} here is the id of {path}:{first.first} too ({n} duplicate"
                f"{'s' * (n != 1)} in this file)")
        unique = bool(video and id_spec and self.pairs) and len(set(self.pairs)) == len(self.pairs)
        counts = Counter(i for _, i in self.pairs)
        shared = sum(c for c in counts.values() if c > 1)
        if unique and 2 * shared > len(self.pairs):
            return first.where, (f"{head} but {video}+{id_spec} is unique and {shared} of {len(self.pairs)} items "
                                 "share their id with an item of another video: the file numbers its questions per "
                                 f"video; pass --columns 'item_id={video}+{id_spec}'")
        return first.where, f"{head}: the later items are refused; give each item its own id"
