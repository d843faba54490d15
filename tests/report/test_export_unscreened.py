"""``export`` never writes a video path that leaves the folder a harness reads it from (screening
refused it: ``video.resolve.path_problem``), names the kept items no visual step saw (the report's
"kept without a visual step"), and leaves them out with ``--drop-unscreened``. A real visual
step run by the real runner on a real frame cache."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from scripted_pool import cli


@pytest.fixture(scope="module")
def pool(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    from PIL import Image

    root = tmp_path_factory.mktemp("export_unscreened")
    cache, items = root / "frames", root / "items"
    items.mkdir()
    rows: list[dict[str, object]] = []
    for v in range(2):
        vid = f"{v:032x}"
        (cache / vid).mkdir(parents=True)
        for k in range(32):
            Image.new("RGB", (64, 36), (8 * k, 40 * v, 90)).save(cache / vid / f"frame_{k}.jpg")
        (cache / vid / "frames.json").write_text(json.dumps({"positions": list(range(32))}))
        rows.append({"item_id": f"q{v}", "question": f"What colour is clip {v}?", "options": ["red", "blue"],
                     "answer": 0, "video_id": vid})
    rows.append({"item_id": "q6", "question": "Lost clip?", "options": ["red", "blue"], "answer": 0,
                 "video": "does_not_exist.mp4"})
    rows.append({"item_id": "q7", "question": "Outside clip?", "options": ["red", "blue"], "answer": 1,
                 "video": "../../outside/secret.mp4"})
    (items / "LabBench.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    rules = root / "rules.json"
    rules.write_text(json.dumps([{"match": "", "letters": {"A": -0.9, "B": -1.0}}]))  # unsure: nothing removed
    res = root / "results"
    for step in (1, 2):
        r = cli("screen", "--items", str(items), "--step", str(step), "--results", str(res), "--engine", "scripted",
                "--rules", str(rules), "--frames", str(cache), "--no-progress")
        assert r.returncode == 0, r.stderr
        if step == 2:
            assert "leaves the videos folder" in r.stderr  # screening refused q7's path
    return items, res, cache


def export(pool: tuple[Path, Path, Path], out: Path, fmt: str, *extra: str) -> str:
    r = cli("export", "--results", str(pool[1]), "--items", str(pool[0]), "--frames", str(pool[2]), "--chain", "1,2",
            "--format", fmt, "--out", str(out), *extra)
    assert r.returncode == 0, r.stderr
    return r.stderr


def test_a_path_leaving_the_data_folder_is_never_written(pool: tuple[Path, Path, Path], tmp_path: Path) -> None:
    err = export(pool, tmp_path / "lmms", "lmms-eval")
    rows = [json.loads(x) for x in (tmp_path / "lmms" / "LabBench_kept.jsonl").read_text().splitlines()]
    assert {r["item_id"] for r in rows} == {"q0", "q1", "q6"}
    assert "outside" not in (tmp_path / "lmms" / "LabBench_kept.jsonl").read_text()
    assert "3 kept items of 1 benchmark" in err
    assert ("note: 1 kept item left out: a harness would open a file outside the folder it reads videos from, "
            "and screening refused the path too (first: q7: video path '../../outside/secret.mp4' leaves the "
            "folder a harness reads it from)") in err
    err = export(pool, tmp_path / "vlm", "vlmevalkit")
    with (tmp_path / "vlm" / "LabBench_kept.tsv").open(newline="") as f:
        tsv = list(csv.DictReader(f, delimiter="\t"))
    assert {r["item_id"] for r in tsv} == {"q0", "q1", "q6"}
    assert all("outside" not in r["video"] for r in tsv)


def test_kept_without_a_visual_step_is_named_and_can_be_left_out(pool: tuple[Path, Path, Path],
                                                                 tmp_path: Path) -> None:
    err = export(pool, tmp_path / "all", "inspect")
    assert "note: 1 kept item no visual step saw" in err and ": q6; --drop-unscreened leaves them out" in err
    err = export(pool, tmp_path / "seen", "inspect", "--drop-unscreened")
    ids = {json.loads(x)["id"] for x in (tmp_path / "seen" / "LabBench_kept.inspect.jsonl").read_text().splitlines()}
    assert ids == {"q0", "q1"}
    assert "2 kept items of 1 benchmark" in err
    assert "note: 1 kept item left out that no visual step saw (--drop-unscreened): q6" in err
    assert "--drop-unscreened leaves them out" not in err
