"""Issue 39: `make lint`'s import check (lint-imports with pyproject's ``[tool.importlinter]``) fails on a
planted cycle or a broken layer, also when the import sits inside a function.

Each test copies the package and pyproject.toml into a temporary folder, plants one import, and runs
lint-imports on the copy (the copy first on the path, so the real tree is not what it reads).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("importlinter")

ROOT = Path(__file__).resolve().parents[2]
LINT = Path(sys.executable).with_name("lint-imports")


@pytest.fixture()
def copy(tmp_path: Path) -> Path:
    shutil.copytree(ROOT / "src" / "benchcheck", tmp_path / "src" / "benchcheck",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


def lint(tree: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(tree / "src")}
    return subprocess.run([str(LINT), "--no-cache", "--no-logo", str(tree / "pyproject.toml")], cwd=tree, env=env,
                          capture_output=True, text=True, timeout=120)


def plant(tree: Path, module: str, line: str) -> None:
    """Append ``line`` to ``module``'s file inside a function, where a top-of-file check would miss it."""
    path = tree / "src" / (module.replace(".", "/") + ".py")
    path.write_text(path.read_text(encoding="utf-8") + f"\n\ndef _planted() -> None:\n    {line}  # noqa\n",
                    encoding="utf-8")


def test_the_tree_as_committed_keeps_every_contract(copy: Path) -> None:
    r = lint(copy)
    assert r.returncode == 0, r.stdout + r.stderr
    assert " kept, 0 broken." in r.stdout


def test_a_core_module_importing_the_cli_breaks_the_layers_and_makes_a_cycle(copy: Path) -> None:
    plant(copy, "benchcheck.protocol", "from benchcheck.cli import main")
    r = lint(copy)
    assert r.returncode != 0
    assert "BROKEN" in r.stdout
    assert "benchcheck.protocol -> benchcheck.cli" in r.stdout
    assert "No cycles are allowed in benchcheck." in r.stdout


def test_a_cycle_inside_one_task_package_is_caught(copy: Path) -> None:
    # Two new modules of one task package that import each other (one of them inside a function): no
    # layer is crossed, so only the acyclic contract can see it.
    pkg = copy / "src" / "benchcheck" / "screen"
    (pkg / "planted_a.py").write_text("from benchcheck.screen import planted_b\n", encoding="utf-8")
    (pkg / "planted_b.py").write_text("def f() -> None:\n    from benchcheck.screen import planted_a  # noqa\n",
                                      encoding="utf-8")
    r = lint(copy)
    assert r.returncode != 0
    assert "No cycles are allowed in benchcheck.screen." in r.stdout
    assert ".planted_a -> .planted_b" in r.stdout or ".planted_b -> .planted_a" in r.stdout


def test_an_engine_importing_qa_breaks_its_contract(copy: Path) -> None:
    plant(copy, "benchcheck.engines.rules.scripted", "from benchcheck.qa.records import VLMAnswer")
    r = lint(copy)
    assert r.returncode != 0
    assert "nothing under benchcheck.engines imports benchcheck.qa BROKEN" in r.stdout
    assert "benchcheck.engines.rules.scripted -> benchcheck.qa.records" in r.stdout


def test_a_task_importing_an_executor_breaks_the_layers(copy: Path) -> None:
    plant(copy, "benchcheck.sweep.analysis", "import benchcheck.executors.ray_cluster")
    r = lint(copy)
    assert r.returncode != 0
    assert "benchcheck.sweep.analysis -> benchcheck.executors.ray_cluster" in r.stdout


def test_two_tasks_of_one_layer_may_not_import_each_other(copy: Path) -> None:
    plant(copy, "benchcheck.sweep.analysis", "from benchcheck.screen.steps import STEPS")
    r = lint(copy)
    assert r.returncode != 0
    assert "benchcheck.sweep is not allowed to import benchcheck.screen" in r.stdout
    assert "benchcheck.sweep.analysis -> benchcheck.screen.steps" in r.stdout
