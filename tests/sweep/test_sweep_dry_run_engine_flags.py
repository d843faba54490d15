"""`sweep dry-run` takes the engine flags `sweep run` takes (one engine string for both), and uses none."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner
from sweep_helpers import mixed_items

from benchcheck.cli import main


def test_the_run_s_engine_string_fits_the_dry_run_and_sends_nothing(tmp_path: Path, store: Path) -> None:
    # init prints E="--engine openai --endpoint ... --model NAME" for `sweep run`; the same $E given
    # to the dry run was "no such option: --endpoint". Port 9 (discard) is never asked: nothing listens.
    items = mixed_items(tmp_path)[0].parent
    base = ["sweep", "dry-run", "--items", str(items), "--store", str(store), "--results", str(tmp_path / "res")]
    for engine in (["--engine", "openai", "--endpoint", "http://127.0.0.1:9/v1", "--model", "judge",
                    "--api-key-env", "BENCHCHECK_TEST_UNSET_KEY"],
                   ["--engine", "hf", "--model", str(tmp_path / "ckpt"), "--device", "cuda"]):
        r = CliRunner().invoke(main, base + engine, catch_exceptions=False)
        assert r.exit_code == 0, r.output
        assert "TOTAL todo=" in r.output
