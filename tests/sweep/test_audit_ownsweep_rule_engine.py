"""A rule program's sweep rows are its own: a model's run into the same folder redoes them.

``sweep run --engine reference`` (the README's way to see the flow on your own benchmark) wrote
its rows under the pinned model's spec, so a later run of the real model (or of the other rule
program) into the same results folder found every cell done, asked nothing and exited 0, and the
analysis and report read the rule program's answers as the model's.
"""

from __future__ import annotations

from pathlib import Path

from sweep_helpers import dry_rows, item, stored_video, sweep_cli, write_items


def _common(tmp_path: Path) -> list[str]:
    store = tmp_path / "store"
    stored_video(store, "clip16x9", 40, 320, 180)
    stored_video(store, "clip4x3", 36, 240, 180)
    items = write_items(tmp_path / "items", [item("Own", 0, "clip16x9"), item("Own", 1, "clip4x3"),
                                             item("Own", 2, "clip16x9", answer=2)])
    return ["--items", str(items[0]), "--store", str(store), "--results", str(tmp_path / "res"),
            "--conds", "v_blind,v_1"]


def _run(common: list[str], engine: str) -> str:
    run = sweep_cli("run", *common, "--engine", engine, "--decode-workers", "0", "--no-progress")
    assert run.returncode == 0, run.stderr
    assert "Traceback" not in run.stderr
    return run.stdout


def test_reference_rows_are_stale_to_the_model_and_to_the_other_rule_program(tmp_path: Path) -> None:
    common = _common(tmp_path)
    _run(common, "reference")
    # dry-run without --engine plans the model's run (hf, the pinned 8B): nothing of it is done
    for cond in ("v_blind", "v_1"):
        todo, _na, _reuse, _fail, _gaveup, stale, done = dry_rows(common)[("Own", cond)][:7]
        assert (todo, stale, done) == ("3", "3", "0"), cond
    # the engine that wrote them sees them done
    seen = dry_rows([*common, "--engine", "reference"])
    assert [seen[("Own", c)][6] for c in ("v_blind", "v_1")] == ["3", "3"]
    # the other rule program answers every cell again, with its own rows
    out = _run(common, "reference-prior")
    assert "ok=6" in out, out
    rows = (tmp_path / "res" / "sweep_rows" / "v_1" / "Own.jsonl").read_text()
    assert rows.count("reference:planted-prior-v1") == 3
    assert rows.count("reference:deterministic-rules-v1") == 3
