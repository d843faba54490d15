"""Executors apart from tasks: looked up by name, every option applied or refused with one line
(exit 2), ``launch --sweep`` plans without servers and passes ``--max-model-len``, and a server
that is down stops the run under the one policy (``unit_loop.Policy``)."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
from screen_helpers import cli, write_rules

from benchcheck.store import read_rows


@pytest.fixture(scope="module")
def pool(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("pool") / "items"
    r = cli("demo", "items", "--out", str(out))
    assert r.returncode == 0, r.stderr
    return out


def _one_line_error(r: object, needle: str) -> None:
    code, err = r.returncode, r.stderr  # type: ignore[attr-defined]
    lines = [x for x in err.splitlines() if x.strip()]
    assert code == 2, err
    assert len(lines) == 1 and lines[0].startswith("error: ") and needle in lines[0], err
    assert "Traceback" not in err


def test_the_registry_names_every_executor_and_the_cli_offers_the_selectable_ones() -> None:
    from benchcheck.executors.registry import EXECUTORS, choices, executor

    assert set(EXECUTORS) == {"local", "ray", "launch", "slurm"}
    assert choices() == ["local", "ray"]
    for name in ("local", "ray"):
        for task in ("screen", "sweep"):  # every entry resolves (the Ray ones import Ray lazily)
            assert callable(executor(name).function(executor(name).run, task))
    with pytest.raises(ValueError, match="unknown executor 'nope'; known: local, ray, launch, slurm"):
        executor("nope")


def test_no_task_module_imports_an_executor() -> None:
    import ast

    src = Path(__file__).resolve().parents[2] / "src" / "benchcheck"
    for pkg in ("screen", "sweep"):
        for f in (src / pkg).glob("*.py"):
            for node in ast.walk(ast.parse(f.read_text())):  # imports inside functions count too
                names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                         else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
                assert not any(n.startswith(("benchcheck.executors", "benchcheck.launch")) for n in names), f


def test_options_an_executor_cannot_apply_are_refused_in_one_line(pool: Path, tmp_path: Path) -> None:
    res = str(tmp_path / "res")
    _one_line_error(cli("screen", "--items", str(pool), "--step", "1", "--results", res, "--engine", "scripted",
                        "--ray-address", "auto"), "--ray-address needs --executor ray")
    _one_line_error(cli("sweep", "run", "--items", str(pool), "--results", res, "--engine", "scripted",
                        "--executor", "ray", "--decode-workers", "2"),
                    "--decode-workers has no meaning on --executor ray")
    _one_line_error(cli("sweep", "run", "--items", str(pool), "--results", res, "--engine", "scripted",
                        "--ray-address", "auto"), "--ray-address needs --executor ray")
    (tmp_path / "normalized").mkdir()  # an empty store, as `videos normalize` leaves it
    _one_line_error(cli("launch", "--sweep", "--step", "2", "--frames", res, "--items", str(pool), "--results", res,
                        "--store", str(tmp_path)), "launch --sweep: --step, --frames apply to screening steps only")
    _one_line_error(cli("launch", "--step", "1", "--conds", "v_1", "--items", str(pool), "--results", res),
                    "launch: --conds apply with --sweep only")
    assert not Path(res).exists()  # nothing ran


def test_launch_sweep_plan_only_plans_without_servers(tmp_path: Path) -> None:
    from benchcheck.demo.items import write_demo_items

    items = tmp_path / "items"
    write_demo_items(items)
    logs = tmp_path / "logs"
    (tmp_path / "store" / "normalized").mkdir(parents=True)
    r = cli("launch", "--sweep", "--plan-only", "--items", str(items), "--store", str(tmp_path / "store"),
            "--results", str(tmp_path / "res"), "--logs", str(logs), "--conds", "v_blind,v_1", "--limit", "2")
    assert r.returncode == 0, r.stderr
    assert "v_blind" in r.stdout and "todo" in r.stdout.lower()
    assert not list(logs.glob("vllm_*.log")) and not (logs / "launch_params.txt").exists()  # no server started
    assert not (tmp_path / "res" / "conditions_results.csv").exists()


def test_launch_sweep_passes_max_model_len_to_its_servers_and_client() -> None:
    from benchcheck.launch.sweep_servers import plan_sweep_launch, sweep_client_argv, sweep_server_specs

    p = plan_sweep_launch(2, "m", "m", None, "benchcheck", 8, ("--items", "i"), Path("logs"), max_model_len=131072)
    specs = sweep_server_specs(p)
    assert all("--max-model-len 131072" in s.line() for s in specs)
    argv = sweep_client_argv(p, specs)
    assert argv[argv.index("--max-model-len") + 1] == "131072"


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_down_server_stops_the_run_and_fails_no_item(pool: Path, tmp_path: Path) -> None:
    res = tmp_path / "res"
    url = f"http://127.0.0.1:{_closed_port()}/v1"
    r = cli("screen", "--items", str(pool), "--step", "1", "--results", str(res), "--engine", "openai",
            "--endpoint", url, "--model", "m", "--no-progress", "--workers", "2", timeout=240)
    assert r.returncode == 3 and "the engine is unreachable (8 calls in a row); stopping" in r.stdout, r.stdout
    errors = [x for f in (res / "step1").glob("*.jsonl") for x in read_rows(f)]
    assert errors and all(x["status"] == "error" and x["retry_free"] for x in errors)
    assert len(errors) < 40  # stopped: not the pool's 269 items
    plan = cli("screen", "--items", str(pool), "--step", "1", "--results", str(res), "--plan-only").stdout
    assert "FAILED_TOTAL=0" in plan  # the server's fault, not the items': nothing given up


def test_the_sweep_stops_on_a_down_server_too(tmp_path: Path) -> None:
    from benchcheck.demo.items import write_demo_items

    items = tmp_path / "items"
    write_demo_items(items)
    url = f"http://127.0.0.1:{_closed_port()}/v1"
    r = cli("sweep", "run", "--items", str(items), "--results", str(tmp_path / "res"), "--engine", "openai",
            "--endpoint", url, "--conds", "v_blind", "--workers", "2", "--no-progress", "--max-model-len", "262144",
            timeout=240)
    assert r.returncode == 3 and "sweep: the engine is unreachable (8 calls in a row); stopping" in r.stdout, (
        r.stdout + r.stderr)
    rows = [json.loads(x) for f in (tmp_path / "res" / "sweep_rows").glob("*/*.jsonl")
            for x in f.read_text().splitlines() if x.strip() and "status" in x]
    assert rows and all(x["status"] == "error" and x.get("retry_free") for x in rows)


def test_the_local_screen_extra_perms_rule_is_the_adapters(pool: Path, tmp_path: Path) -> None:
    """--extra-perms through the adapter's ``answer``: rows near the threshold carry N more forwards."""
    res = tmp_path / "res"
    r = cli("screen", "--items", str(pool), "--step", "1", "--results", str(res), "--engine", "scripted",
            "--rules", str(write_rules(tmp_path / "r.json")), "--no-progress", "--extra-perms", "3", "--limit", "10")
    assert r.returncode == 0, r.stderr
    rows = [x for f in (res / "step1").glob("*.jsonl") for x in read_rows(f)]
    near = [x for x in rows if "extra_n" in x]
    assert near and all(x["extra_n"] == 3 and len(x["extra_lp"]) == 3 for x in near)
