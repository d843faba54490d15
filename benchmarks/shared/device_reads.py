"""Where the ``hf`` engine's host would wait for the device, found on the CPU.

On CUDA, reading a device tensor's values (``.item()``, ``.tolist()``, a tensor's truth value,
boolean indexing, ``nonzero``, ``unique``, ``repeat_interleave`` without its output size ...)
blocks the launching thread until the device has run everything queued before the read: the
queue drains, and the device idles while the host launches what follows (decisions 051, 105,
107: transformers' placeholder check alone held the mix's engine thread 24 s of 205). A short
prefill with a read in its middle is launch-bound twice over. The H200 is not always at hand, so
this finds those reads on the CPU, where every tensor lives on the host, by tracing which
tensors *would* live on the device:

- the model's parameters and buffers, and what the engine moves with ``to_device`` (its rule
  for host-to-device copies; here a copy, so the host tensor stays a host tensor) are the
  device's;
- the engine's host buffers (``pinned_empty``, and scoring's ``_to_host`` copies, here copies
  too) are the host's, also once a device tensor is copied into them: the engine reads them
  after waiting for an event of its own, the one wait it means to make;
- an operation's outputs are the device's when any of its tensor inputs is (in-place ones mark
  the tensor they write, unless it is a host buffer; a write through a view, ``t[i] = x``,
  marks the view, not ``t``);
- a read of a device tensor is recorded with the phase it happened in (the vision tower, the
  language model, the rest of the model's forward, or the engine outside the model; prefill or
  decode step) and the innermost frames of the project's or transformers' code.

Every read found is one on CUDA but one: ``t[mask] = 0.0`` (a number, one mask over ``t``'s
leading dimensions) is counted, where CUDA turns it into ``masked_fill_``, which reads nothing.
Waits this cannot see:

- a tensor made on the device by a factory function (``torch.zeros(..., device=dev)``) is a
  host tensor here until an operation with a device input writes it whole;
- copies the CPU cannot tell apart: ``Tensor.to("cpu")`` and a blocking ``copy_`` into a host
  tensor (device to host), and ``torch.tensor(data, device=dev)`` or ``.to(dev)`` from pageable
  memory (host to device: a blocking copy there waits for the stream, as
  ``runtime.transfer`` says);
- work that runs only on CUDA (Triton kernels, graph capture, ``torch.cuda.synchronize()``,
  event waits): the CPU runs other code there;
- operations whose kernel reads inside (``isin`` against many values, ``histc`` without bounds).
"""

from __future__ import annotations

import contextlib
import functools
import sys
import threading
import weakref
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

aten = torch.ops.aten

# Operations that wait for the device when an input of theirs is on it (their output's size or a
# Python value depends on the device's data). Under inference mode the dispatcher hands the mode
# composite operations undecomposed: ``item`` (a tensor given where a size or a number is taken,
# ``torch.arange(n)``), ``where`` of a condition alone, ``argwhere``, rather than what they call.
WAITS: frozenset[Any] = frozenset({
    aten._local_scalar_dense.default, aten.item.default, aten.is_nonzero.default, aten.equal.default,
    aten.allclose.default, aten.nonzero.default, aten.nonzero_numpy.default, aten.argwhere.default,
    aten.where.default, aten.masked_select.default, aten._unique2.default, aten.unique_dim.default,
    aten.unique_consecutive.default, aten.bincount.default,
})
# Indexing waits when an index is a boolean mask on the device (it becomes ``nonzero``).
INDEXING: frozenset[Any] = frozenset({aten.index.Tensor, aten.index_put.default, aten.index_put_.default,
                                      aten._index_put_impl_.default})
# ``repeat_interleave`` waits for a repeats tensor on the device unless told the output's size;
# under inference mode the dispatcher sees the composite overload (self, repeats) undecomposed.
REPEAT: dict[Any, int] = {aten.repeat_interleave.Tensor: 0, aten.repeat_interleave.self_Tensor: 1}
# ``masked_fill`` by a value tensor on the device: CUDA's kernel takes the value as a number.
FILL_VALUE: dict[Any, int] = {aten.masked_fill.Tensor: 2, aten.masked_fill_.Tensor: 2}
# Python-level reads: some dispatch nothing on the CPU (``tolist``, ``numpy``; ``repr``, which
# formats with the modes off); each is named as the reader wrote it; the operations they call
# are not counted again.
METHODS = ("tolist", "numpy", "cpu", "item", "__bool__", "__int__", "__float__", "__index__", "__repr__")
OURS = ("benchcheck", "transformers")


@dataclass(frozen=True, slots=True)
class Read:
    """One read: what read, where in the forward, and the innermost frames of ours or transformers'."""

    what: str
    phase: str
    where: tuple[str, ...]


@dataclass(slots=True)
class Tracer:
    """The device's tensors (by identity, held weakly) and the reads of them."""

    reads: list[Read] = field(default_factory=list)
    # Operations dispatched per phase, views included: on CUDA each launches at most a few
    # kernels, so a phase's count bounds its launches from the host's side.
    ops: Counter[str] = field(default_factory=Counter)
    _dev: dict[int, weakref.ref[torch.Tensor]] = field(default_factory=dict)
    _host: dict[int, weakref.ref[torch.Tensor]] = field(default_factory=dict)
    _phase: threading.local = field(default_factory=threading.local)

    def is_dev(self, t: object) -> bool:
        return _held(self._dev, t)

    def is_host(self, t: object) -> bool:
        return _held(self._host, t)

    def mark(self, t: torch.Tensor) -> torch.Tensor:
        """``t`` is the device's (unless it is a host buffer: a copy into one stays the host's)."""
        if not self.is_host(t):
            _hold(self._dev, t)
        return t

    def mark_host(self, t: torch.Tensor) -> torch.Tensor:
        self._dev.pop(id(t), None)
        _hold(self._host, t)
        return t

    def phase(self) -> str:
        stack: list[str] = getattr(self._phase, "stack", [])
        return "/".join(stack) if stack else "engine"

    def enter(self, label: str) -> None:
        """This thread is inside ``label`` (a module's forward) until the matching ``leave``."""
        self._phase.__dict__.setdefault("stack", []).append(label)

    def leave(self) -> None:
        stack: list[str] = self._phase.__dict__.get("stack", [])
        if stack:
            stack.pop()

    def record(self, what: str) -> None:
        self.reads.append(Read(what, self.phase(), frames()))

    @contextlib.contextmanager
    def reading(self) -> Iterator[None]:
        """Inside a Python-level read already counted: its own operations are not counted again."""
        before = getattr(self._phase, "reading", False)
        self._phase.reading = True
        try:
            yield
        finally:
            self._phase.reading = before

    def counting(self) -> bool:
        return not getattr(self._phase, "reading", False)

    def counts(self) -> Counter[tuple[str, str]]:
        """Reads by (phase, innermost site)."""
        return Counter((r.phase, r.where[0] if r.where else "?") for r in self.reads)


def _held(table: dict[int, weakref.ref[torch.Tensor]], t: object) -> bool:
    ref = table.get(id(t)) if isinstance(t, torch.Tensor) else None
    return ref is not None and ref() is t


def _hold(table: dict[int, weakref.ref[torch.Tensor]], t: torch.Tensor) -> None:
    """Held weakly: the entry goes with the tensor (and is left alone if its id was reused)."""
    key = id(t)

    def gone(_ref: object) -> None:
        ref = table.get(key)
        if ref is not None and ref() is None:
            del table[key]

    table[key] = weakref.ref(t, gone)


def frames(depth: int = 2) -> tuple[str, ...]:
    """The innermost ``depth`` frames in the project's or transformers' code, ``module:line function``."""
    out: list[str] = []
    f = sys._getframe(1)
    while f is not None and len(out) < depth:
        mod = f.f_globals.get("__name__", "")
        if mod.split(".", 1)[0] in OURS and mod != __name__:
            out.append(f"{mod}:{f.f_lineno} {f.f_code.co_name}")
        f = f.f_back  # type: ignore[assignment]
    return tuple(out)


class _Mode(TorchDispatchMode):
    def __init__(self, tracer: Tracer) -> None:
        super().__init__()
        self.tracer = tracer

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        self.tracer.ops[self.tracer.phase()] += 1
        flat, _ = tree_flatten((args, kwargs))
        dev = any(self.tracer.is_dev(a) for a in flat)
        if dev and self.tracer.counting():
            if func in WAITS:
                self.tracer.record(str(func.overloadpacket.__name__))
            elif func in INDEXING and _mask_on_device(self.tracer, args):
                self.tracer.record(f"{func.overloadpacket.__name__} (boolean mask)")
            elif (func in REPEAT and kwargs.get("output_size") is None and len(args) > REPEAT[func]
                  and self.tracer.is_dev(args[REPEAT[func]])):
                self.tracer.record("repeat_interleave (no output_size)")
            elif func in FILL_VALUE and len(args) > FILL_VALUE[func] and self.tracer.is_dev(args[FILL_VALUE[func]]):
                self.tracer.record("masked_fill (value on the device)")
        out = func(*args, **kwargs)
        if dev:
            for t in tree_flatten(out)[0]:
                if isinstance(t, torch.Tensor):
                    self.tracer.mark(t)
        return out


def _mask_on_device(tracer: Tracer, args: Any) -> bool:
    indices = args[1] if len(args) > 1 else ()
    return any(isinstance(i, torch.Tensor) and i.dtype in (torch.bool, torch.uint8) and tracer.is_dev(i)
               for i in (indices or ()))


@contextlib.contextmanager
def tracing(model: Any) -> Iterator[Tracer]:
    """Trace device reads while the block runs: ``model``'s parameters and buffers and whatever
    the engine's ``to_device`` returns are the device's, its host buffers the host's; phases
    from hooks on the model's vision tower and language model."""
    tracer = Tracer()
    for t in (*model.parameters(), *model.buffers()):
        tracer.mark(t)
    undo: list[Callable[[], None]] = []
    try:
        undo += _patch_transfers(tracer)
        undo += _patch_launcher(tracer)
        undo += _patch_methods(tracer)
        undo += _hook_phases(tracer, model)
        with _Mode(tracer):
            yield tracer
    finally:
        for u in reversed(undo):
            u()


def _patch_transfers(tracer: Tracer) -> list[Callable[[], None]]:
    """The engine's copies between host and device, as copies the tracer can tell apart."""
    from benchcheck.engines.hf.forward import score
    from benchcheck.engines.hf.runtime import transfer

    to_dev, pinned, to_host = transfer.to_device, transfer.pinned_empty, score._to_host

    def to_device(t: Any, device: torch.device, pinned: bool = False) -> torch.Tensor:
        x = to_dev(t, device, pinned)
        return x if tracer.is_dev(x) else tracer.mark(x.clone())

    def pinned_empty(shape: tuple[int, ...], dtype: torch.dtype, device: torch.device) -> torch.Tensor:
        return tracer.mark_host(pinned(shape, dtype, device))

    def to_host_copy(t: torch.Tensor) -> torch.Tensor:
        return tracer.mark_host(to_host(t).clone())

    undo: list[Callable[[], None]] = []
    for real, fake in ((to_dev, to_device), (pinned, pinned_empty), (to_host, to_host_copy)):
        _swap(real.__name__, real, fake)
        # Undone wherever the stand-in is found then: a module first imported while tracing took
        # it from ``transfer`` and would keep it (and a tracer gone) after the block.
        undo.append(functools.partial(_swap, real.__name__, fake, real))
    return undo


def _swap(name: str, old: object, new: object) -> None:
    """``new`` for ``old`` as ``name`` in every module of ours that holds ``old`` there."""
    for mod in list(sys.modules.values()):
        if getattr(mod, "__name__", "").startswith("benchcheck.") and getattr(mod, name, None) is old:
            setattr(mod, name, new)


def _patch_launcher(tracer: Tracer) -> list[Callable[[], None]]:
    """PyTorch keeps dispatch modes per thread: the engine's launching thread (op
    ``launch_thread``) runs each launch inside a mode of its own, or its operations go unseen."""
    from benchcheck.engines.hf.runtime.launcher import Launcher

    real = Launcher.run

    def run(self: Launcher, launch: Callable[[], Any]) -> Any:
        def traced() -> Any:
            with _Mode(tracer):
                return launch()

        return real(self, traced)

    Launcher.run = run  # type: ignore[method-assign]
    return [functools.partial(setattr, Launcher, "run", real)]


def _patch_methods(tracer: Tracer) -> list[Callable[[], None]]:
    undo: list[Callable[[], None]] = []
    for name in METHODS:
        real = getattr(torch.Tensor, name)

        def read(self: torch.Tensor, *a: Any, _real: Any = real, _name: str = name, **kw: Any) -> Any:
            if not tracer.is_dev(self) or not tracer.counting():
                return _real(self, *a, **kw)
            tracer.record(_name.strip("_"))
            with tracer.reading():
                out = _real(self, *a, **kw)
            # On CUDA ``cpu()`` returns a copy on the host, read without waiting again; here it
            # returns the tensor itself, whose later reads would be counted a second time.
            return tracer.mark_host(out.clone()) if _name == "cpu" and out is self else out

        setattr(torch.Tensor, name, read)
        undo.append(functools.partial(setattr, torch.Tensor, name, real))
    return undo


def _hook_phases(tracer: Tracer, model: Any) -> list[Callable[[], None]]:
    """Label reads by where in the forward they happen; a language model's input of one token
    a row is a decode step."""
    inner = model.model
    parts = [(inner, "model"), (inner.visual, "vision tower"), (inner.language_model, "language model")]
    handles = []
    for module, label in parts:
        def pre(_m: Any, args: Any, kwargs: Any, _label: str = label) -> None:
            ids = kwargs.get("input_ids") if kwargs.get("input_ids") is not None else kwargs.get("inputs_embeds")
            step = _label == "model" and ids is not None and ids.shape[1] == 1
            tracer.enter("decode step" if step else ("prefill" if _label == "model" else _label))

        def post(_m: Any, _args: Any, _kwargs: Any, _out: Any) -> None:
            tracer.leave()

        handles.append(module.register_forward_pre_hook(pre, with_kwargs=True))
        handles.append(module.register_forward_hook(post, with_kwargs=True, always_call=True))
    return [h.remove for h in handles]


def table(tracer: Tracer) -> list[tuple[str, str, int]]:
    """(phase, innermost site, reads), most first."""
    return [(phase, site, n) for (phase, site), n in tracer.counts().most_common()]
