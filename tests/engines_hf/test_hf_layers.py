"""The ``hf`` engine's layers import one way, counting imports inside functions (docs/ARCHITECTURE.md).

kernels <- attention <- model <- forward <- schedule <- engine; inputs and runtime are leaves;
nothing under engines/ imports ``benchcheck.qa``; no module cycle in engines/, serve/ or testing/.
"""

from __future__ import annotations

import ast
from pathlib import Path

import benchcheck

SRC = Path(benchcheck.__file__).parent
HF = "benchcheck.engines.hf"
# Each layer may import the layers listed after it, never one before it.
ORDER = ["engine", "schedule", "forward", "model", "attention", "kernels"]
LEAVES = {"inputs", "runtime"}
NOT_HF = {"checkpoint"}  # model loading: imports no other layer


def module_name(path: Path) -> str:
    parts = path.relative_to(SRC.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path) -> set[str]:
    """Every ``benchcheck`` module ``path`` imports, at any depth (functions too, TYPE_CHECKING too)."""
    out: set[str] = set()
    here = module_name(path)
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.startswith("benchcheck"))
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                pkg = here.split(".")[: -node.level] if path.name != "__init__.py" else here.split(".")
                base = ".".join([*pkg, *([base] if base else [])])
            if not base.startswith("benchcheck"):
                continue
            for a in node.names:  # ``from pkg import module`` imports that module
                sub = f"{base}.{a.name}"
                out.add(sub if (SRC.parent / (sub.replace(".", "/") + ".py")).exists() else base)
    return out


def graph(root: Path) -> dict[str, set[str]]:
    return {module_name(p): imports(p) for p in sorted(root.rglob("*.py"))}


def layer(mod: str) -> str:
    return mod.removeprefix(HF + ".").split(".")[0]


def test_hf_layers_import_downward_only() -> None:
    bad = []
    for mod, deps in graph(SRC / "engines" / "hf").items():
        if mod == HF:
            continue
        mine = layer(mod)
        for dep in deps:
            if not dep.startswith(HF + ".") or layer(dep) == mine:
                continue
            theirs = layer(dep)
            if mine in LEAVES | NOT_HF:
                allowed = False
            elif theirs in LEAVES or (theirs in NOT_HF and mine == "engine"):
                allowed = True
            else:
                allowed = mine in ORDER and theirs in ORDER and ORDER.index(theirs) > ORDER.index(mine)
            if not allowed:
                bad.append(f"{mod} -> {dep}")
    assert not bad, "imports against the hf layers:\n" + "\n".join(sorted(bad))


def test_kernel_modules_import_no_other_layer_and_their_triton_half_only_their_contract() -> None:
    g = graph(SRC / "engines" / "hf" / "kernels")
    for mod, deps in g.items():
        assert all(d.startswith(f"{HF}.kernels") for d in deps if d.startswith(HF)), (mod, deps)
        if mod.endswith("_triton"):
            contract = mod.removesuffix("_triton")
            assert {d for d in deps if d.startswith(HF)} <= {contract}, (mod, deps)
        else:  # contract modules never import a Triton half (they must import without Triton)
            assert not any(d.endswith("_triton") for d in deps), (mod, deps)


def test_no_module_cycles_and_no_qa_under_engines() -> None:
    g: dict[str, set[str]] = {}
    for root in ("engines", "serve", "testing"):
        g.update(graph(SRC / root))
    assert not [m for m, deps in g.items() if m.startswith("benchcheck.engines") and any(
        d.startswith("benchcheck.qa") for d in deps)]
    assert not list((SRC / "engines").glob("hf_*.py"))
    # Tarjan's strongly connected components over the modules of these packages.
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    cycles: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in g.get(v, ()):
            if w not in g:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1 or v in g.get(v, ()):
                cycles.append(sorted(comp))

    for v in g:
        if v not in index:
            visit(v)
    assert not cycles, cycles
