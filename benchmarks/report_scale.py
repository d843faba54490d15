"""The report on a full-size pool: 300,000 items in 139 benchmarks, rows like the scripted engine's.

No model runs: the rows are made directly with the protocol's own functions (permutations,
decisions), with a planted letter prior so the plots have something to show, written through
``store.append_rows`` exactly as the runner writes them. Then, side by side in one run:

  * the whole report (items loaded, rows read, figures, chunks, pages) with figures;
  * the same without figures (``--no-plots``), to show what the figures cost;
  * the bytes the item browser's first page loads (HTML + CSS + JS + index + first list chunk),
    against the 200 KB target, and the largest chunk of each kind.

    python -m benchmarks.report_scale --items 300000 --benches 139 --out /tmp/report_scale
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import random
import resource
import shutil
import time
from pathlib import Path
from typing import Any

from benchcheck.items import load_items
from benchcheck.protocol import decide_permutations, decide_single, gold_position, permutations_for
from benchcheck.report import ReportOptions, build_report
from benchcheck.screen.steps import DEFAULT_CHAIN, STEPS
from benchcheck.store import append_rows


def _lp(rng: random.Random, k: int, prior: int, gold: int | None, skill: float) -> list[float]:
    """Letter log-probs: a prior on one letter, sometimes a confident gold."""
    raw = [rng.gauss(0, 1) + (1.2 if j == prior else 0.0) + (skill if j == gold else 0.0) for j in range(k)]
    top = max(raw)
    z = top + math.log(sum(math.exp(x - top) for x in raw))
    return [round(x - z, 4) for x in raw]


def generate(root: Path, n_items: int, n_benches: int, seed: int = 0) -> tuple[Path, Path]:
    rng = random.Random(seed)
    items_dir, res = root / "items", root / "results"
    items_dir.mkdir(parents=True, exist_ok=True)
    per = n_items // n_benches
    for b in range(n_benches):
        bench = f"Bench{b:03d}"
        n = per + (1 if b < n_items - per * n_benches else 0)
        skill = rng.uniform(0.0, 3.0)  # how answerable without the video this benchmark is
        items: list[dict[str, Any]] = []
        rows_by_step: dict[int, list[dict[str, Any]]] = {s: [] for s in DEFAULT_CHAIN}
        for j in range(n):
            iid, k = f"{bench}_{j}", rng.choice((4, 4, 5, 3))
            gold = rng.randrange(k)
            vid = f"{rng.getrandbits(128):032x}" if rng.random() < 0.9 else None
            items.append({"item_id": iid, "question": f"Question {j} of {bench}: what happens after event {j % 97}?",
                          "options": [f"option {c} for {j}" for c in range(k)], "answer": gold, "video_id": vid,
                          "task": f"task{j % 12}"})
            base = {"schema_version": 1, "item_id": iid, "bench": bench, "status": "ok", "video_id": vid,
                    "n_options": k, "answer": gold, "engine": "scripted", "config_hash": "bench", "intro": "lmms-v1",
                    "host": "bench", "ts": 1.7e9 + j}
            for s in DEFAULT_CHAIN:
                spec = STEPS[s]
                if spec.visual and vid is None:
                    continue
                row = {**base, "step": s, "step_name": spec.name, "model": f"scripted:{spec.model}"}
                if spec.n_perm > 1:
                    perms = permutations_for(iid, k)
                    golds = [gold_position(p, gold) for p in perms]
                    lps = [_lp(rng, k, 0, g if rng.random() < 0.3 else None, skill) for g in golds]
                    d = decide_permutations(lps, golds)
                    row.update(n_perm=4, perms=perms, lp=lps, gold_pos=golds, picks=d.picks, margins=d.margins,
                               hits=d.hits, mean_margin=d.mean_margin, removed=d.removed, prompt_tokens=[80] * 4)
                else:
                    g = gold
                    lp = _lp(rng, k, 0, g if rng.random() < 0.15 else None, skill)
                    one = decide_single(lp, g)
                    row.update(perm=list(range(k)), lp=lp, gold_pos=g, pick=one.pick, margin=one.margin,
                               correct=one.correct, removed=one.removed, prompt_tokens=[900])
                    if spec.visual:
                        row["frames"] = {"plan": spec.frames, "positions": [16] if spec.frames == "mid"
                                         else list(range(32)), "n": 1 if spec.frames == "mid" else 32}
                rows_by_step[s].append(row)
                if row["removed"]:
                    break
        (items_dir / f"{bench}.jsonl").write_text("".join(json.dumps(i) + "\n" for i in items))
        for s, rows in rows_by_step.items():
            append_rows(res / f"step{s}" / f"{bench}.jsonl", rows)
    return items_dir, res


def first_page_bytes(out: Path) -> dict[str, int]:
    index = out / "data" / "index.js"
    first = json.loads(index.read_text().split(",", 1)[1].rsplit(");", 1)[0])["benches"][0]
    parts = {"items.html": out / "items.html", "browser.js": out / "static" / "browser.js",
             "app.css": out / "static" / "app.css", "index.js": index,
             "first list chunk": out / "data" / first["slug"] / f"{first['lists'][0]}.js"}
    sizes = {k: p.stat().st_size for k, p in parts.items()}
    sizes["total"] = sum(sizes.values())
    return sizes


def browser_timings(out: Path) -> dict[str, float]:
    """Headless Chromium on the built report: first list, a filter over one benchmark, over all."""
    from playwright.sync_api import sync_playwright

    done = "document.getElementById('status').getAttribute('data-busy') === '0'"
    res: dict[str, float] = {}
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path="/usr/bin/chromium", args=["--headless", "--no-sandbox", "--disable-gpu"])
        page = b.new_page()
        t = time.time()
        page.goto((out / "items.html").as_uri())
        page.wait_for_selector("#list tbody tr")
        res["first_list_s"] = round(time.time() - t, 2)
        index = json.loads((out / "data" / "index.js").read_text().split(",", 1)[1].rsplit(");", 1)[0])
        bench = index["benches"][len(index["benches"]) // 2]["name"]
        t = time.time()
        page.select_option("#f-bench", bench)
        page.select_option("#f-final", "removed")
        page.wait_for_function(done)
        res["filter_one_bench_removed_first_page_s"] = round(time.time() - t, 2)
        t = time.time()
        page.select_option("#f-bench", "")
        page.select_option("#f-step", "6")
        page.select_option("#f-final", "removed")
        page.wait_for_function(done, timeout=300_000)
        res["filter_all_benches_first_page_s"] = round(time.time() - t, 2)
        res["js_heap_mb"] = round(page.evaluate("performance.memory ? performance.memory.usedJSHeapSize : 0") / 1e6, 1)
        b.close()
    return res


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--items", type=int, default=300_000)
    ap.add_argument("--benches", type=int, default=139)
    ap.add_argument("--out", type=Path, default=Path("/tmp/report_scale"))
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--browser-only", action="store_true", help="only time Chromium on an existing report")
    args = ap.parse_args()
    pool = args.out / f"pool_{args.items}_{args.benches}"
    if args.browser_only:
        print(json.dumps(browser_timings(args.out / "report_with_plots"), indent=1))
        return
    if not (pool / "results").is_dir():
        t = time.time()
        partial = pool.with_name(pool.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True)
        generate(partial, args.items, args.benches)
        partial.rename(pool)  # a killed generation is never mistaken for a whole pool
        print(f"generated {args.items} items in {time.time() - t:.1f} s", flush=True)
    out: dict[str, object] = {"machine": f"{platform.machine()} {os.cpu_count()} cores, Python "
                                         f"{platform.python_version()}", "items": args.items, "benches": args.benches,
                              "workers": args.workers}
    t, c = time.time(), time.process_time()
    items = load_items([pool / "items"]).items
    out["load_items_s"] = round(time.time() - t, 1)
    out["load_items_cpu_s"] = round(time.process_time() - c, 1)
    for label, plots in (("no_plots", False), ("with_plots", True)):
        dest = args.out / f"report_{label}"
        k0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        t, c, kid0 = time.time(), time.process_time(), k0.ru_utime + k0.ru_stime
        built = build_report(ReportOptions(pool / "results", dest, items, plots=plots, workers=args.workers))
        out[f"report_{label}_s"] = round(time.time() - t, 1)
        # CPU seconds of this process and its workers (the dev VM is shared, so wall time varies with load)
        kids = resource.getrusage(resource.RUSAGE_CHILDREN)
        out[f"report_{label}_cpu_s"] = round(time.process_time() - c + kids.ru_utime + kids.ru_stime - kid0, 1)
        out[f"data_mb_{label}"] = round(built.data_bytes / 1e6, 1)
        out["first_page_bytes"] = first_page_bytes(dest)
        chunks = list((dest / "data").glob("*/*.js"))
        out["files"] = len(chunks)
        out["largest_list_chunk"] = max(p.stat().st_size for p in chunks if p.name.startswith("l"))
        out["largest_detail_chunk"] = max(p.stat().st_size for p in chunks if p.name.startswith("d"))
    out["total_with_items_s"] = round(float(str(out["load_items_s"])) + float(str(out["report_with_plots_s"])), 1)
    out["load_average_1min"] = round(os.getloadavg()[0], 1)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
