"""Deterministic work units and their assignment to the tasks of an array (docs/PROTOCOL.md, "Sharding and leases").

Every task computes the same plan from the same inputs, so a Slurm array task (or a Ray actor,
or a local process) knows its share without talking to the others.

A shard is a path of shares, outermost first: ``i/n`` is share i of n of every unit, and
``i/n:j/m`` is share j of m of share i of n (``launch`` gives each server of an array's host
its part of the host's share). Nesting lets hosts with different GPU counts split an array
without knowing each other's counts: a flat ``host rank * servers + server`` of
``hosts * servers`` only agreed between hosts of equal size. But a host's share ``i/n`` is
``1/n`` of the work whatever its size; a ``launch`` host that names its servers' places among
all the array's servers (``a-b/N``, :class:`ServerRanks`) gets shares in proportion to them.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

Share = tuple[int, int]  # (index, count)
ShardPath = tuple[Share, ...]  # outermost share first; see nest_shards
WHOLE: ShardPath = ((0, 1),)


@dataclass(frozen=True, slots=True)
class Unit:
    """A slice of one benchmark's sorted item ids: part ``part`` of ``n_parts``."""

    bench: str
    part: int
    n_parts: int
    ids: tuple[str, ...]


def plan_units(work: Sequence[tuple[str, Sequence[str]]], max_unit: int = 20000) -> list[Unit]:
    """Split each benchmark into ``ceil(n / max_unit)`` equal parts of its sorted item ids.

    >>> [(u.part, len(u.ids)) for u in plan_units([("B", [str(i) for i in range(30000)])])]
    [(0, 15000), (1, 15000)]
    """
    units = []
    for bench, ids in work:
        srt = sorted(ids)
        n_parts = max(1, math.ceil(len(srt) / max_unit)) if srt else 1
        size = math.ceil(len(srt) / n_parts) if srt else 0
        for part in range(n_parts):
            units.append(Unit(bench, part, n_parts, tuple(srt[part * size : (part + 1) * size])))
    return units


def assign_units(
    units: Sequence[Unit], n_tasks: int, task_id: int, weight: Callable[[Unit], float] = lambda u: len(u.ids)
) -> tuple[list[Unit], list[float]]:
    """Deterministic LPT: units sorted by (-size, bench, part), each to the least-loaded task
    (ties to the lowest index). Returns this task's units and every task's load."""
    if not 0 <= task_id < n_tasks:
        raise ValueError(f"task id {task_id} is outside 0..{n_tasks - 1}")
    loads = [0.0] * n_tasks
    mine = []
    for u in sorted(units, key=lambda u: (-weight(u), u.bench, u.part)):
        t = min(range(n_tasks), key=lambda i: (loads[i], i))
        loads[t] += weight(u)
        if t == task_id:
            mine.append(u)
    return mine, loads


def nest_shards(*levels: Share) -> ShardPath:
    """The shard that takes ``levels`` in turn, each a share of the one before; shares of one
    (``0/1``) dropped, since taking all of a set changes nothing (``assign_units`` orders its units
    itself), so ``0/1:j/m`` is the flat ``j/m`` and a single host's clients keep the flat specs.

    >>> nest_shards((0, 1), (2, 4))
    ((2, 4),)
    >>> nest_shards((1, 2), (0, 1))
    ((1, 2),)
    """
    for i, n in levels:
        if not 0 <= i < n:
            raise ValueError(f"shard {i}/{n}: expected 0 <= i < n")
    kept = tuple((i, n) for i, n in levels if n > 1)
    return kept or WHOLE


def shard_units(units: Sequence[Unit], path: ShardPath,
                weight: Callable[[Unit], float] = lambda u: len(u.ids)) -> list[Unit]:
    """The units of ``path``: ``assign_units`` level by level over what the level before kept.
    For every path of one level this is ``assign_units``; the shares of one level together hold
    the set they split, each unit exactly once, so any tree of shares covers every unit once."""
    mine = list(units)
    for i, n in path:
        mine, _ = assign_units(mine, n, i, weight)
    return mine


def format_shard(path: ShardPath) -> str:
    """``i/n`` or ``i/n:j/m...``, what :func:`parse_shard_path` reads back.

    >>> format_shard(((1, 2), (3, 8)))
    '1/2:3/8'
    """
    return ":".join(f"{i}/{n}" for i, n in path)


def slurm_task(env: Mapping[str, str] | None = None) -> tuple[int, int]:
    """(task rank, task count) of a Slurm job array; (0, 1) outside one.

    The rank is ``(SLURM_ARRAY_TASK_ID - SLURM_ARRAY_TASK_MIN) // SLURM_ARRAY_TASK_STEP``.
    The reference subtracted the minimum only when ``SLURM_ARRAY_TASK_COUNT`` was unset, so with
    ``--array=1-4`` the ranks were 1..4 of 4 and rank 0's share never ran; it also ignored a
    step (``--array=0-6:2``). Both are fixed here.
    """
    env = os.environ if env is None else env
    if "SLURM_ARRAY_TASK_ID" not in env:
        return 0, 1
    tid = _env_int(env, "SLURM_ARRAY_TASK_ID", None)
    lo = _env_int(env, "SLURM_ARRAY_TASK_MIN", 0)
    step = _env_int(env, "SLURM_ARRAY_TASK_STEP", 1) or 1
    if "SLURM_ARRAY_TASK_COUNT" in env:
        n = _env_int(env, "SLURM_ARRAY_TASK_COUNT", 1)
    elif "SLURM_ARRAY_TASK_MAX" in env:
        n = (_env_int(env, "SLURM_ARRAY_TASK_MAX", 0) - lo) // step + 1
    else:
        n = 1
    rank = (tid - lo) // step
    if not 0 <= rank < n:
        raise ValueError(f"Slurm array task {tid} gives rank {rank}, outside 0..{n - 1}")
    return rank, n


def _env_int(env: Mapping[str, str], name: str, default: int | None) -> int:
    """An array variable as an integer (``default`` when it is empty and optional); a one-line
    ValueError naming the variable and its value otherwise, where ``int`` said only "invalid
    literal" and left the user to guess which of the array's variables it was."""
    value = env.get(name, "").strip()
    if not value and default is not None:
        return default
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"--shard auto: {name}={env[name]!r} is not an integer (a Slurm array task's "
                         "variables are set by Slurm; unset them to run outside an array)") from None


def parse_shard(spec: str | None, env: Mapping[str, str] | None = None) -> tuple[int, int]:
    """``None`` -> (0, 1); ``"auto"`` -> :func:`slurm_task`; ``"i/n"`` -> (i, n)."""
    if spec is None:
        return 0, 1
    if spec == "auto":
        return slurm_task(env)
    return _share(spec, spec)


def _share(part: str, spec: str) -> Share:
    """One ``i/n`` of the ``--shard`` given as ``spec``; a one-line ValueError naming it otherwise."""
    i, sep, n = part.partition("/")
    if not sep or not i.isdigit() or not n.isdigit() or not 0 <= int(i) < int(n):
        raise ValueError(f"--shard {spec!r}: expected auto, i/n with 0 <= i < n, or shares of shares i/n:j/m")
    return int(i), int(n)


def parse_shard_path(spec: str | None, env: Mapping[str, str] | None = None) -> ShardPath:
    """``None`` -> the whole; ``"auto"`` -> :func:`slurm_task`; ``"i/n"`` or nested ``"i/n:j/m..."``
    (see :func:`nest_shards`).

    >>> parse_shard_path("1/2:3/8")
    ((1, 2), (3, 8))
    """
    if spec is None or spec == "auto":
        return nest_shards(parse_shard(spec, env))
    return nest_shards(*(_share(part, spec) for part in spec.split(":")))


@dataclass(frozen=True, slots=True)
class ServerRanks:
    """A ``launch`` host's servers as ranks ``first..last`` of ``total`` servers on all hosts
    (``--shard a-b/N``): server j works the flat share ``first + j`` of ``total``, so each host
    gets work in proportion to its servers, as data-parallel ranks do. ``i/n`` gives every host
    ``1/n`` whatever its size, and hosts cannot scale it without each other's server counts."""

    first: int
    last: int
    total: int

    @property
    def count(self) -> int:
        return self.last - self.first + 1

    def server(self, index: int) -> ShardPath:
        """Server ``index``'s shard: share ``first + index`` of ``total``."""
        if not 0 <= index < self.count:
            raise ValueError(f"server {index} is outside the {self.count} servers of --shard {self}")
        return nest_shards((self.first + index, self.total))

    def __str__(self) -> str:
        return f"{self.first}-{self.last}/{self.total}"


HostShard = ShardPath | ServerRanks


def parse_host_shard(spec: str | None, env: Mapping[str, str] | None = None) -> HostShard:
    """``launch --shard``: a :class:`ServerRanks` ``a-b/N``, else :func:`parse_shard_path`.

    >>> parse_host_shard("8-11/12")
    ServerRanks(first=8, last=11, total=12)
    """
    if spec is None or "-" not in spec:
        return parse_shard_path(spec, env)
    ranks, sep, total = spec.partition("/")
    first, _, last = ranks.partition("-")
    if not (sep and first.isdigit() and last.isdigit() and total.isdigit()
            and 0 <= int(first) <= int(last) < int(total)):
        raise ValueError(f"--shard {spec!r}: expected auto, i/n, i/n:j/m, or a-b/N (this host's servers as ranks a "
                         "to b of N servers on all hosts, 0 <= a <= b < N)")
    return ServerRanks(int(first), int(last), int(total))


def format_host_shard(shard: HostShard) -> str:
    """What :func:`parse_host_shard` reads back."""
    return str(shard) if isinstance(shard, ServerRanks) else format_shard(shard)
