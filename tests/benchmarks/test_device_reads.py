"""Device reads found on the CPU (``benchmarks.shared.device_reads``): constructions whose reads
are known, then the engine's own forward with op ``visual_no_reads`` off and on."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from benchmarks.device_reads import main as device_reads_main
from benchmarks.device_reads import workloads
from benchmarks.shared.device_reads import tracing

from benchcheck.engines.hf.engine import HFEngine


class Shell(torch.nn.Module):
    """The attributes ``tracing`` hooks: ``model.visual`` and ``model.language_model``."""

    def __init__(self) -> None:
        super().__init__()
        self.model = torch.nn.Module()
        self.model.visual = torch.nn.Linear(3, 3)
        self.model.language_model = torch.nn.Linear(3, 3)


# (name, reads, the function of a device tensor x (3 x 3, some positive) and a host tensor h).
CASES: list[tuple[str, int, Callable[[torch.Tensor, torch.Tensor], object]]] = [
    ("item", 1, lambda x, h: x.sum().item()),
    ("truth value", 1, lambda x, h: 1 if x.sum() > 0 else 0),
    ("int and float", 2, lambda x, h: (int(x[0, 0]), float(x[0, 1]))),
    ("list index", 1, lambda x, h: [0, 1, 2][(x[0, 0] > 0).long()]),
    ("tolist, numpy, cpu", 3, lambda x, h: (x.tolist(), x.numpy(), (x * 2).cpu())),
    ("cpu, then its host copy read", 2, lambda x, h: (x.cpu().tolist(), int(x.cpu()[0, 0]))),
    ("boolean mask read", 1, lambda x, h: x[x > 0]),
    ("boolean mask written", 1, lambda x, h: x.clone().masked_fill(x > 0, 0)[x.sum(1) > 0]),
    ("nonzero and unique", 2, lambda x, h: (x.nonzero(), torch.unique(x))),
    ("torch._check of a tensor", 1, lambda x, h: torch._check_tensor_all(x.abs() >= 0)),
    ("a formatted tensor", 1, lambda x, h: f"{x.sum()}"),
    ("a printed matrix", 2, lambda x, h: (repr(x), f"{x}")),
    ("repeat_interleave", 1, lambda x, h: torch.repeat_interleave(x[0], (x[0] > 0).long())),
    ("where of a condition, argwhere", 2, lambda x, h: (torch.where(x > 0.5), torch.argwhere(x > 0.5))),
    ("a size and a fill value from a tensor", 2,
     lambda x, h: (torch.arange((x[0, 0] > 0).long() + 1), torch.full((2,), x[0, 0]))),
    ("allclose", 1, lambda x, h: torch.allclose(x, x)),
    ("masked_fill by a value on the device", 1, lambda x, h: x.masked_fill(x > 0.5, x[0, 0])),
    # No reads: sizes known on the host, masks on the host, host tensors read, writes without masks.
    ("repeat_interleave with its size", 0,
     lambda x, h: torch.repeat_interleave(x[0], (x[0] > 0).long(), output_size=3)),  # x > 0: size 3
    ("host mask, host reads", 0, lambda x, h: (x[torch.tensor([True, False, True])], h.tolist(), h[h > 0], int(h[0]))),
    ("masked_fill by a host value", 0, lambda x, h: x.masked_fill(x > 0.5, h[1].float())),
    ("device arithmetic", 0, lambda x, h: (torch.where(x > 0, x, 0).cumsum(0), x.shape[0] * 2, x.argmax(-1))),
]


@pytest.mark.parametrize("inference", [False, True])
@pytest.mark.parametrize(("name", "reads", "fn"), CASES, ids=[c[0] for c in CASES])
def test_each_construction_reads_as_known(name: str, reads: int, fn: Callable[[torch.Tensor, torch.Tensor], object],
                                          inference: bool) -> None:
    # Inference mode too: there some reads skip the dispatcher on the CPU (``item``, ``int()``).
    shell = Shell()
    gen = torch.Generator().manual_seed(len(name))
    with torch.inference_mode(inference), torch.no_grad(), tracing(shell) as tracer:
        x = shell.model.visual(torch.randn(3, 3, generator=gen)).abs() + 0.1  # the device's: a parameter's output
        h = torch.arange(3)
        fn(x, h)
    assert len(tracer.reads) == reads, tracer.reads
    assert all(r.phase == "engine" for r in tracer.reads)


def test_reads_are_labelled_with_the_part_of_the_forward() -> None:
    shell = Shell()
    tolist, item = torch.Tensor.tolist, torch.Tensor.item

    def visual_forward(_m: object, args: tuple[torch.Tensor, ...], out: torch.Tensor) -> None:
        out.sum().item()  # a read inside the vision tower's forward

    hook = shell.model.visual.register_forward_hook(visual_forward)
    try:
        with torch.no_grad(), tracing(shell) as tracer:
            y = shell.model.visual(torch.ones(2, 3))
            y.tolist()
    finally:
        hook.remove()
    assert [(r.what, r.phase) for r in tracer.reads] == [("item", "vision tower"), ("tolist", "engine")]
    # Everything put back: the methods, the engine's transfer functions, the hooks.
    from benchcheck.engines.hf.forward import batch, generate
    from benchcheck.engines.hf.runtime import transfer

    assert torch.Tensor.tolist is tolist and torch.Tensor.item is item
    assert batch.to_device is generate.to_device is transfer.to_device
    assert generate.pinned_empty is transfer.pinned_empty
    assert not shell.model.visual._forward_pre_hooks and not shell.model.visual._forward_hooks


def test_a_module_imported_while_tracing_gets_the_engines_functions_back() -> None:
    # A module of the engine imported for the first time inside the block takes the tracer's
    # stand-ins from ``transfer``; they are put back there too.
    import sys
    import types

    from benchcheck.engines.hf.runtime import transfer

    probe = types.ModuleType("benchcheck.engines.hf.probe_device_reads")
    try:
        with tracing(Shell()):
            sys.modules[probe.__name__] = probe
            exec("from benchcheck.engines.hf.runtime.transfer import pinned_empty, to_device", probe.__dict__)
        assert probe.to_device is transfer.to_device and probe.pinned_empty is transfer.pinned_empty
    finally:
        sys.modules.pop(probe.__name__, None)


def test_the_visual_forward_reads_the_device_unless_op_visual_no_reads(tiny_model: Path) -> None:
    # transformers' forward with images: the placeholder check reads twice (its count, and the
    # count formatted into its message), each DeepStack layer twice (boolean indexing, read then
    # written). With the op, the model's forward reads nothing: a scoring call reads nothing at
    # all (its results come back through host buffers and an event), a generation call reads
    # only its decode loop's finished flags (every step on the CPU, whose look-back is 0).
    base = HFEngine(tiny_model, device="cpu")
    base = base.with_config(base.config.with_ops("-visual_no_reads"))  # on by default (decision 116)
    base.stop_ids = set()
    deepstack = len(base.model.config.vision_config.deepstack_visual_indexes)
    calls = {w.name: w for w in workloads()}

    def reads(engine: HFEngine, name: str) -> tuple[dict[str, int], list[object]]:
        engine.stop_ids = set()
        calls[name].call(engine)
        with tracing(engine.model) as tracer:
            out = calls[name].call(engine)
        by_phase: dict[str, int] = {}
        for r in tracer.reads:
            by_phase[r.phase] = by_phase.get(r.phase, 0) + 1
        return by_phase, out

    on_engine = base.with_config(base.config.with_ops("+visual_no_reads"))
    for name in ("sweep", "video"):
        off, out_off = reads(base, name)
        on, out_on = reads(on_engine, name)
        assert off["prefill"] == 2 and off["prefill/language model"] == 2 * deepstack, name
        assert out_on == out_off
        if name == "sweep":
            steps = calls[name].generate[0].max_tokens
            assert on == {"engine": steps - 1} and off["engine"] == steps - 1
        else:
            assert on == {} and "engine" not in off


def test_the_script_prints_a_table_and_writes_it(tiny_model: Path, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    assert device_reads_main(["--model", str(tiny_model), "--config", "ops=+visual_no_reads",
                              "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "| ops=+visual_no_reads | sweep | **all** |" in out
    reads = [line for line in out.splitlines() if "| operations |" not in line]
    assert not any("prefill" in line for line in reads)  # no read inside a forward with the op
    assert "| ops=+visual_no_reads | blind | operations | engine " in out  # and the operations per phase
    assert (tmp_path / "device_reads.json").is_file()
    with pytest.raises(SystemExit) as exc:  # --depth-of builds its own model
        device_reads_main(["--model", str(tiny_model), "--depth-of", "qwen3-vl-2b"])
    assert exc.value.code == 2
    assert (tmp_path / "device_reads.md").read_text().strip() == out.strip()


@pytest.mark.slow
def test_at_a_real_models_depth_each_deepstack_layer_reads(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # The 2B's 28 layers, 24 vision blocks and 3 DeepStack layers at the tiny widths: the
    # placeholder check's 2 reads and 2 a DeepStack layer, 8 in each forward with images.
    import json

    assert device_reads_main(["--depth-of", "qwen3-vl-2b", "--config", "ops=-visual_no_reads",
                              "--out", str(tmp_path)]) == 0
    rows = json.loads((tmp_path / "device_reads.json").read_text())
    prefill = {w: sum(r["reads"] for r in rows if r["workload"] == w and r["phase"].startswith("prefill"))
               for w in ("sweep", "video", "blind")}
    assert prefill == {"sweep": 8, "video": 8, "blind": 0}
    with pytest.raises(SystemExit, match="choose from"):
        device_reads_main(["--depth-of", "qwen3-vl-9b"])


def test_reads_on_the_engines_launching_thread_are_seen() -> None:
    # Op launch_thread: the engine launches from a thread of its own, where the caller's dispatch
    # mode is not in force (PyTorch keeps modes per thread): none of its reads were seen.
    from benchcheck.engines.hf.runtime.launcher import Launcher

    shell = Shell()
    launcher = Launcher(torch.device("cpu"))

    def launch() -> object:
        y = shell.model.visual(torch.ones(2, 3))
        return y[y > 0], bool(y.sum() > 0)

    real = Launcher.run
    try:
        with torch.inference_mode(), tracing(shell) as tracer:
            launcher.run(launch)
    finally:
        launcher.close()
    assert [r.what for r in tracer.reads] == ["index (boolean mask)", "bool"]
    assert Launcher.run is real
