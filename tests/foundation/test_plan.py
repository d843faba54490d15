"""The step planner along the chain, and `screen --plan-only` from the CLI."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from benchcheck.items import Item
from benchcheck.screen.plan import plan_step
from benchcheck.screen.steps import DEFAULT_CHAIN
from benchcheck.store import StepState, append_rows


def item(i: str, video: str | None = None, n_opts: int = 4) -> Item:
    return Item(i, "B", "Q?", tuple(f"o{j}" for j in range(n_opts)), 0, video)


def state(rows: list[dict[str, object]]) -> StepState:
    s = StepState()
    for r in rows:
        s.add(r)
    return s


def test_chain_eligibility() -> None:
    items = [item("removed", "v1"), item("kept", "v1"), item("noframes", None), item("missing", "v9"),
             item("failed", "v1"), item("waiting", "v1"), item("open", "v1", 30), item("kvid", "k:abc")]
    s1 = state([{"item_id": "removed", "removed": True}, {"item_id": "kept", "removed": False},
                {"item_id": "noframes"}, {"item_id": "missing"}, {"item_id": "kvid"}]
               + [{"item_id": "failed", "status": "error"}] * 3)
    frames = {"v1"}
    plan2 = plan_step(items, 2, DEFAULT_CHAIN, {1: s1}, lambda it: it.video_id in frames)
    assert [i.item_id for i in plan2.todo] == ["kept"]
    assert plan2.counts == {"REMOVED_EARLIER": 1, "NO_VIDEO": 2, "MISSING_FRAMES": 1, "FAILED_EARLIER": 1,
                            "WAITING_EARLIER": 1, "OPEN_FORMAT": 1}
    assert [i.item_id for i in plan2.missing_frames] == ["missing"]
    # Step 4 is not visual: items without frames skipped 2 and 3 and are eligible again.
    s2 = state([{"item_id": "kept", "removed": False}])
    s3 = state([{"item_id": "kept", "removed": True}])
    plan4 = plan_step(items, 4, DEFAULT_CHAIN, {1: s1, 2: s2, 3: s3}, lambda it: it.video_id in frames)
    assert sorted(i.item_id for i in plan4.todo) == ["kvid", "missing", "noframes"]
    assert plan4.counts["REMOVED_EARLIER"] == 2


def test_done_and_failed_are_not_remaining() -> None:
    items = [item("a"), item("b"), item("c")]
    s1 = state([{"item_id": "a"}] + [{"item_id": "b", "status": "error"}] * 3 + [{"item_id": "c", "status": "x"}])
    plan = plan_step(items, 1, DEFAULT_CHAIN, {1: s1}, lambda it: False, keep={"a", "b", "c"})
    assert [i.item_id for i in plan.todo] == ["c"]
    assert plan.counts == {"DONE_TOTAL": 1, "FAILED_TOTAL": 1}
    assert plan_step(items, 1, DEFAULT_CHAIN, {}, lambda it: False, keep={"a"}).counts["NOT_KEPT"] == 2


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", "from benchcheck.cli import main; main()", *args],
                          capture_output=True, text=True, timeout=120)


def test_plan_only_cli_on_demo_pool(tmp_path: Path) -> None:
    r = cli("demo", "items", "--out", str(tmp_path / "items"))
    assert r.returncode == 0, r.stderr
    res = tmp_path / "results"
    out = cli("screen", "--items", str(tmp_path / "items"), "--step", "1", "--results", str(res), "--plan-only")
    assert out.returncode == 0, out.stderr
    lines = dict(line.split("=") for line in out.stdout.split())
    assert int(lines["REMAINING_TOTAL"]) == 269  # valid letter-screenable demo items
    assert lines["OPEN_FORMAT"] == "4" and lines["INVALID_ITEMS"] == "8"
    assert out.stdout.splitlines()[0].startswith("REMAINING_TOTAL=")
    # After every item has an ok row the step is complete.
    items_out = cli("items", "validate", str(tmp_path / "items"))
    assert items_out.returncode == 1  # the demo plants bad items
    from benchcheck.items import load_items

    loaded = load_items([tmp_path / "items"])
    for it in loaded.items:
        append_rows(res / "step1" / f"{it.bench}.jsonl", [{"item_id": it.item_id, "removed": False}])
    done = cli("screen", "--items", str(tmp_path / "items"), "--step", "1", "--results", str(res), "--plan-only")
    assert "REMAINING_TOTAL=0" in done.stdout and "DONE_TOTAL=269" in done.stdout
    step2 = cli("screen", "--items", str(tmp_path / "items"), "--step", "2", "--results", str(res), "--plan-only")
    assert "REMAINING_TOTAL=0" in step2.stdout  # no frame cache given: visual items lack frames


def test_version_and_help_examples() -> None:
    v = cli("--version")
    assert v.returncode == 0 and "benchcheck, version" in v.stdout
    h = cli("--help")
    assert h.returncode == 0
    examples = h.stdout.split("Examples")[1]
    for command in ("items validate", "items stats", "screen", "demo run"):
        assert f"benchcheck {command}" in examples


def test_rows_of_a_visual_step_count_even_without_frames_now() -> None:
    items = [item("gone", "v1"), item("failed", "v1"), item("never", "v1")]
    s1 = state([{"item_id": i} for i in ("gone", "failed", "never")])
    s2 = state([{"item_id": "gone", "removed": True}] + [{"item_id": "failed", "status": "error"}] * 3)
    no_frames = plan_step(items, 4, DEFAULT_CHAIN, {1: s1, 2: s2, 3: StepState()}, lambda it: False)
    assert [i.item_id for i in no_frames.todo] == ["never"]
    assert no_frames.counts == {"REMOVED_EARLIER": 1, "FAILED_EARLIER": 1}


def test_retry_free_error_rows_do_not_fail_an_item() -> None:
    s = state([{"item_id": "x", "status": "error", "retry_free": True}] * 5
              + [{"item_id": "y", "status": "error"}] * 3)
    assert not s.is_failed("x") and s.errors["x"] == 5
    assert s.is_failed("y")
