"""The ``--vlm-cmd`` child process: its environment, its watchdog, and nothing of it outliving its item.

- **Environment.** The child gets this process's environment minus the judge's variables
  (``EVAL_LLM_JUDGE_*``) and every variable whose name marks a secret
  (:func:`benchcheck.masking.is_secret_name`: ``*_API_KEY``, ``*_TOKEN``, ``*_SECRET``,
  ``*PASSWORD*``...), except the names passed on purpose (``--vlm-env NAME``). Everything else,
  the VLM CLI's own configuration included, passes as it is.
- **Output.** stdout and stderr are collected as they arrive (an asyncio subprocess protocol),
  so the answer is what the command printed by the time its main process exited, even when a
  background child keeps the pipes open: nothing waits for end-of-file.
- **Cleanup.** When the main process exits, or at the watchdog (``timeout + grace`` after the
  start), everything the command started is killed: its process group, its descendants, and
  processes that left the group and the tree (``setsid``, double fork). Those are found because
  every process of the item inherits a per-item token in its environment
  (``BENCHCHECK_QA_ITEM``). ``benchcheck qa run`` makes its process a child subreaper on Linux
  (:func:`enable_subreaper`, ``prctl(PR_SET_CHILD_SUBREAPER)``), so orphans are re-parented to it
  instead of init: its children that carry the item's token are the item's orphans, and they
  are killed with their descendants, then reaped. A ``kill -9`` of the run itself cannot be
  caught: on Linux the command is started through a small exec wrapper (:data:`_DIE_WITH_PARENT`)
  that sets its parent-death signal (``prctl(PR_SET_PDEATHSIG, SIGKILL)``), so the kernel kills the
  command when the run dies, however it dies. Library callers that do not want their process
  to become a subreaper (it would adopt every orphan below it) get the same result from a search
  of the whole process table for the token, at a few milliseconds per item. The item's
  descendants are also listed every ``SCAN_S`` while the command runs, so a child that clears
  its environment is still known by its parent. Only a process that both clears its
  environment and detaches within one scan interval can escape; cgroups would be needed for that.
- The pipes' transport is closed explicitly before returning, so no "Event loop is closed"
  noise appears when the loop ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import os
import secrets
import signal
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

ITEM_TOKEN_VAR = "BENCHCHECK_QA_ITEM"
SCAN_S = 0.25
# After the main process exits and its processes are killed, how long the pipes may take to close.
_DRAIN_S = 2.0
_PR_SET_CHILD_SUBREAPER = 36
_PR_SET_PDEATHSIG = 1
_subreaper: bool | None = None

# Run as ``python -I -S -c _DIE_WITH_PARENT PARENT_PID ERR_FD ARGV...``: set this process's
# parent-death signal, then exec the command, which keeps it (it survives execve, except into a
# set-user-ID program). Why a wrapper: Python's subprocess has no such option, and ``preexec_fn``
# runs Python between fork and exec, unsafe in a process with threads (the run has the event
# loop's and asyncio's child watcher); a fresh interpreter has one thread. SIGKILL because the run
# that would read the answer is gone, and a hung command could ignore SIGTERM. The signal follows
# the death of the *thread* that started the child: the event loop's, alive while its items run.
# The parent's PID is checked after the prctl: a run killed before it leaves the wrapper
# re-parented, and it exits. An exec that fails writes ``errno`` and the message to ERR_FD (closed
# by a successful exec) so the caller raises ``OSError`` as a direct start would.
_DIE_WITH_PARENT = f"""
import ctypes, os, sys
parent, err = int(sys.argv[1]), int(sys.argv[2])
try:
    ctypes.CDLL(None, use_errno=True).prctl({_PR_SET_PDEATHSIG}, {int(signal.SIGKILL)}, 0, 0, 0)
except (OSError, AttributeError):
    pass
if os.getppid() != parent:
    os._exit(1)
os.set_inheritable(err, False)
try:
    os.execvp(sys.argv[3], sys.argv[3:])
except OSError as e:
    os.write(err, f"{{e.errno}} {{e.strerror or ''}}".encode())
    os._exit(127)
"""


def enable_subreaper() -> bool:
    """Make this process the child subreaper of its descendants (Linux); once per process. Called
    by the ``qa run`` command, not by the library: a subreaper adopts every orphan below it."""
    global _subreaper
    if _subreaper is None:
        _subreaper = False
        if sys.platform.startswith("linux"):
            try:
                libc = ctypes.CDLL(None, use_errno=True)
                _subreaper = libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
            except (OSError, AttributeError):
                _subreaper = False
    return _subreaper


def _stat(pid: int) -> tuple[int, int, str] | None:
    """``(ppid, start time, state)`` of a process, or None when it is gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    rest = raw[raw.rfind(b")") + 2:].split()
    try:
        return int(rest[1]), int(rest[19]), rest[0].decode()
    except (IndexError, ValueError):
        return None


def _table() -> dict[int, tuple[int, int, str]]:
    out = {}
    with contextlib.suppress(OSError):
        for name in os.listdir("/proc"):
            if name.isdigit() and (st := _stat(int(name))) is not None:
                out[int(name)] = st
    return out


def _children(pid: int) -> list[int]:
    """A process's children, from ``/proc/<pid>/task/<tid>/children`` (every thread's)."""
    out: list[int] = []
    with contextlib.suppress(OSError):
        for tid in os.listdir(f"/proc/{pid}/task"):
            with contextlib.suppress(OSError, ValueError):
                out += [int(c) for c in Path(f"/proc/{pid}/task/{tid}/children").read_text().split()]
    return out


# Linux kernels built with CONFIG_PROC_CHILDREN (most) list children per thread: a few small
# reads instead of the whole process table.
_CHILDREN_FILES = Path(f"/proc/{os.getpid()}/task/{os.getpid()}/children").exists()


def _has_token(pid: int, marker: bytes) -> bool:
    try:
        return marker in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return False  # another user's process, or gone


class ProcessTree:
    """Every process of one command: the main process, its descendants and token holders."""

    def __init__(self, root: int, token: str) -> None:
        self.root = root
        self.marker = f"{ITEM_TOKEN_VAR}={token}".encode()
        st = _stat(root)
        self.root_start = st[1] if st else 0
        self.known: dict[int, int] = {}  # pid -> start time (a recycled pid has another)

    def refresh(self) -> None:
        """Add the descendants of every known process, and the processes holding the item's token
        among this process's children (orphans re-parented to the subreaper)."""
        if not sys.platform.startswith("linux"):
            return
        if not (_CHILDREN_FILES and _subreaper):
            self._refresh_from_table()  # orphans went to init: only a search of every process finds them
            return
        me = os.getpid()
        found: dict[int, int] = {}
        stack = [self.root, *self.known]
        stack += [c for c in _children(me) if c != self.root and c not in self.known and _has_token(c, self.marker)]
        seen = {self.root}
        while stack:
            pid = stack.pop()
            if pid in seen and pid != self.root:
                continue
            seen.add(pid)
            if pid != self.root and (st := _stat(pid)) is not None and st[1] >= self.root_start:
                found[pid] = st[1]
            stack += [c for c in _children(pid) if c not in seen]
        for pid, start in found.items():
            self.known.setdefault(pid, start)

    def _refresh_from_table(self) -> None:
        """The same from the whole process table (kernels without ``/proc/<pid>/task/<tid>/children``)."""
        table = _table()
        me = os.getpid()
        children: dict[int, list[int]] = {}
        for pid, (ppid, start, _state) in table.items():
            if start >= self.root_start and pid != me:
                children.setdefault(ppid, []).append(pid)
        found = {pid: start for pid, (_p, start, _s) in table.items()
                 if start >= self.root_start and pid not in (me, self.root) and _has_token(pid, self.marker)}
        stack = [self.root, *self.known, *found]
        while stack:
            for child in children.get(stack.pop(), ()):
                if child not in found and child != self.root:
                    found[child] = table[child][1]
                    stack.append(child)
        for pid, start in found.items():
            self.known.setdefault(pid, start)

    def kill_all(self) -> None:
        """SIGKILL every known process still alive (re-reading until none is left), then reap the
        ones that became this process's children. The root is left to asyncio, which waits for it."""
        for _ in range(20):
            self.refresh()
            alive = [pid for pid, start in self.known.items()
                     if (st := _stat(pid)) is not None and st[1] == start and st[2] != "Z"]
            if not alive:
                break
            for pid in alive:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.01)
        pending = set(self.known)
        for _ in range(100):
            for pid in list(pending):
                try:
                    got, _status = os.waitpid(pid, os.WNOHANG)
                except OSError:  # not this process's child (re-parented elsewhere), or reaped
                    pending.discard(pid)
                    continue
                if got:
                    pending.discard(pid)
            if not pending:
                break
            time.sleep(0.01)


def kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def _read_all(fd: int) -> bytes:
    out = b""
    while chunk := os.read(fd, 4096):
        out += chunk
    return out


def _read_until_exec(fd: int) -> tuple[bytes, float]:
    """The wrapper's error report (empty when the exec succeeded) and the moment the pipe closed:
    the command's start. Closes ``fd``: a start cancelled meanwhile has left, and its thread must
    not read from an fd number the process may have given to another file."""
    try:
        data = _read_all(fd)
    finally:
        os.close(fd)
    return data, time.monotonic()


class _Collect(asyncio.SubprocessProtocol):
    """stdout and stderr as they arrive; events for the main process's exit and the pipes' close."""

    def __init__(self) -> None:
        self.out = bytearray()
        self.err = bytearray()
        self.exited = asyncio.Event()
        self.closed = asyncio.Event()
        self._open = 2

    def pipe_data_received(self, fd: int, data: bytes | str) -> None:
        chunk = data.encode() if isinstance(data, str) else data
        (self.out if fd == 1 else self.err).extend(chunk)

    def pipe_connection_lost(self, fd: int, exc: Exception | None) -> None:
        self._open -= 1
        if self._open <= 0:
            self.closed.set()

    def process_exited(self) -> None:
        self.exited.set()


@dataclass(frozen=True, slots=True)
class CommandResult:
    """What one run of the command did; ``killed`` when the watchdog ended it."""

    returncode: int | None
    stdout: bytes
    stderr: bytes
    elapsed_s: float
    killed: bool


async def run_with_watchdog(argv: list[str], hard_limit_s: float,
                            env: Mapping[str, str] | None = None) -> CommandResult:
    """Execute ``argv`` (no shell) in a new session with ``env`` (default: this environment, as
    it is) plus the item token; SIGKILL everything of it when the main process exits or at
    ``hard_limit_s``. ``OSError`` when the program cannot be started."""
    token = secrets.token_hex(12)
    child_env = {**(os.environ if env is None else env), ITEM_TOKEN_VAR: token}
    loop = asyncio.get_running_loop()
    start = time.monotonic()
    clock = start  # when the command itself started (the latency's origin)
    wrapped = sys.platform.startswith("linux") and bool(sys.executable) and bool(argv)
    if not wrapped:
        transport, proto = await loop.subprocess_exec(
            _Collect, *argv, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE, start_new_session=True, env=child_env)
    else:
        err_r, err_w = os.pipe()
        try:
            transport, proto = await loop.subprocess_exec(
                _Collect, sys.executable, "-I", "-S", "-c", _DIE_WITH_PARENT, str(os.getpid()), str(err_w), *argv,
                stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
                start_new_session=True, env=child_env, pass_fds=(err_w,))
        finally:
            os.close(err_w)
        try:
            failed, exec_at = await asyncio.to_thread(_read_until_exec, err_r)  # empty: the command runs
        except BaseException:
            # Cancelled (Ctrl-C, SIGTERM) while the command starts: it is ended here, as at its
            # watchdog, and its pipes closed while the loop runs. Else it ran on, and its
            # transport, closed by the garbage collector after the loop had ended, printed
            # "Event loop is closed" under the run's last line.
            kill_group(transport.get_pid())
            transport.close()
            raise
        # The item's clock starts at the command's exec, not at the wrapper's: the wrapper's own
        # interpreter start (15-40 ms) is the harness's time, not the VLM's. The watchdog's
        # deadline still counts from the launch.
        clock = exec_at
        if failed:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(proto.exited.wait(), timeout=_DRAIN_S)
            transport.close()
            code, _, message = failed.decode("utf-8", "replace").partition(" ")
            raise OSError(int(code) if code.isdigit() else 0, message, argv[0])
    pid = transport.get_pid()
    tree = ProcessTree(pid, token)
    killed = False
    try:
        deadline = start + hard_limit_s
        while not proto.exited.is_set():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                killed = True
                break
            try:
                await asyncio.wait_for(proto.exited.wait(), timeout=min(remaining, SCAN_S))
            except TimeoutError:
                tree.refresh()
        elapsed = time.monotonic() - clock
    finally:
        kill_group(pid)
        try:
            await asyncio.to_thread(tree.kill_all)
            # Every holder of the pipes is gone now: they close and the last bytes arrive.
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(proto.closed.wait(), timeout=_DRAIN_S)
            if killed or not proto.exited.is_set():
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(proto.exited.wait(), timeout=_DRAIN_S)
            returncode = transport.get_returncode()
        finally:
            # Also when cancelled again in these waits (a closing event loop cancels what is left
            # after Ctrl-C): closed while the loop runs, never by the garbage collector after it.
            transport.close()
    return CommandResult(None if killed else returncode, bytes(proto.out), bytes(proto.err), elapsed, killed)
