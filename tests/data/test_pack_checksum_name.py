"""Seed gap 5: the local sha256sum file is ``pool_returns.sha256`` / ``fp_returns.sha256``, as the seeds'
``sha256sum … > pool_returns.sha256`` and upload commands expect; the upload keeps the dated name."""

from __future__ import annotations

import csv
import subprocess
from pathlib import Path

import pytest
from data_helpers import FakeHub
from test_data_pack import BENCHCHECK, TOKEN, _env, _pool

from benchcheck.data.pack import PackOptions, checksum_name, pack


def test_names() -> None:
    assert checksum_name("pool_returns_gpu7_20261129.tar.gz") == "pool_returns.sha256"
    assert checksum_name("fp_returns_gpu7_20261129.tar.gz") == "fp_returns.sha256"
    assert checksum_name("ret.tar.gz") == "ret.sha256"  # a name of your own keeps its stem
    assert checksum_name("pool_returnsX.tar.gz") == "pool_returnsX.sha256"


def test_pool_checksum_file_is_the_seeds_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    _pool(tmp_path)
    res = pack(PackOptions(Path("results/pool"), (Path("logs"),), None, "gpu box", "20261129"))
    assert res.tarball.name == "pool_returns_gpu-box_20261129.tar.gz"
    assert res.sha256_file.resolve() == tmp_path / "pool_returns.sha256"
    assert res.sha256_file.read_text() == f"{res.sha256}  pool_returns_gpu-box_20261129.tar.gz\n"
    assert not (tmp_path / "pool_returns_gpu-box_20261129.sha256").exists()
    ok = subprocess.run(["sha256sum", "-c", "pool_returns.sha256"], cwd=tmp_path, capture_output=True, text=True)
    assert ok.returncode == 0 and "OK" in ok.stdout


def test_sweep_checksum_file_is_fp_returns(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "results" / "p1_raw").mkdir(parents=True)
    with (tmp_path / "results" / "conditions_results.csv").open("w", newline="") as f:
        csv.writer(f).writerows([["condition", "bench", "item_id", "status"], ["v_1", "A", "A_0", "ok"]])
    res = pack(PackOptions(Path("results"), (), None, "gpu7", "20261129"))
    assert res.sha256_file.name == "fp_returns.sha256"
    assert res.sha256_file.read_text().endswith("  fp_returns_gpu7_20261129.tar.gz\n")


def test_the_upload_keeps_the_dated_name(tmp_path: Path, fake_hub: FakeHub) -> None:
    _pool(tmp_path)
    fake_hub.add_file("lab/pool", "README.md", b"pool")
    r = subprocess.run([BENCHCHECK, "pack", "--results", "results/pool", "--logs", "logs", "--upload", "lab/pool",
                        "--path-in-repo", "returns/"], cwd=tmp_path, env=_env(tmp_path, fake_hub, TOKEN),
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    [tarball] = tmp_path.glob("pool_returns_*.tar.gz")
    dated = tarball.name[: -len(".tar.gz")]
    files = fake_hub.repos["lab/pool"].files
    assert files[f"returns/{dated}.sha256"] == (tmp_path / "pool_returns.sha256").read_bytes()
    assert files[f"returns/{tarball.name}"] == tarball.read_bytes()
    assert "pool_returns.sha256" in r.stdout


def test_the_printed_check_command_runs_where_the_folder_has_spaces_and_dollars(tmp_path: Path) -> None:
    """The line ``pack`` prints to check the tarball is pasted into a shell: a folder named
    ``my $HOME runs`` must reach ``cd`` as it is, not split or expanded."""
    work = tmp_path / "my $HOME runs"
    work.mkdir()
    _pool(work)
    r = subprocess.run([BENCHCHECK, "pack", "--results", "results/pool", "--logs", "logs"], cwd=work,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    line = next(x for x in r.stdout.splitlines() if "(check: " in x)
    check = line.split("(check: ", 1)[1].removesuffix(")")
    ok = subprocess.run(["bash", "-c", check], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert ok.returncode == 0 and "OK" in ok.stdout, (check, ok.stdout, ok.stderr)
