"""pack: tarball + sha256sum file + report; upload to a loopback Hub; secrets stay out."""

from __future__ import annotations

import csv
import gzip
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from data_helpers import FakeHub

from benchcheck.data.pack import PackOptions, default_name, pack, repo_paths
from benchcheck.store import append_rows

M8, M2 = "Qwen/Qwen3-VL-8B-Instruct", "Qwen/Qwen3-VL-2B-Instruct"
TOKEN = "hf_" + "T0pSecretTokenValue1234"
BENCHCHECK = str(Path(sys.executable).with_name("benchcheck"))


def _row(iid: str, step: int, model: str, removed: bool = False, status: str | None = None) -> dict[str, object]:
    r: dict[str, object] = {"item_id": iid, "bench": iid.split("_")[0], "step": step, "model": model,
                            "removed": removed, "host": "gpu1", "latency_s": 0.2}
    if status:
        r["status"], r["error"] = status, "HTTP 500"
    return r


def _pool(root: Path) -> Path:
    res = root / "results" / "pool"
    s1 = [_row(f"MVBench_{i}", 1, M8, removed=i < 3) for i in range(8)]
    s1 += [_row("MVBench_8", 1, M8, status="timeout")]
    s1 += [_row("MVBench_9", 1, M8, status="server_error")] * 3
    s1 += [_row("MVBench_10", 1, M8, status="timeout"), _row("MVBench_10", 1, M8)]
    append_rows(res / "step1" / "MVBench.jsonl", s1)
    append_rows(res / "step1" / "NExTQA.p0.jsonl", [_row(f"NExTQA_{i}", 1, M8, removed=i == 0) for i in range(3)])
    append_rows(res / "step1" / "NExTQA.p1.jsonl", [_row(f"NExTQA_{i}", 1, M8) for i in range(3, 5)])
    with (res / "step1" / "NExTQA.p1.jsonl").open("a") as f:
        f.write('{"item_id": "NExTQA_9", "tor')  # a killed writer's torn tail
    append_rows(res / "step2" / "MVBench.jsonl", [_row(f"MVBench_{i}", 2, M8, removed=i == 4) for i in range(3, 8)])
    append_rows(res / "step3" / "MVBench.jsonl", [_row(f"MVBench_{i}", 3, M2) for i in range(3, 7)])
    append_rows(res / "run_log.jsonl", [
        {"step": 1, "shard": 0, "n_shards": 2, "gpus": 1, "started": "2026-11-29T10:00:00Z",
         "ended": "2026-11-29T10:10:00Z", "wall_s": 600.0, "items_attempted": 600, "rows_added": 12},
        {"step": 1, "shard": 1, "n_shards": 2, "gpus": [1], "started": "2026-11-29T10:05:00Z",
         "ended": "2026-11-29T10:15:00Z", "wall_s": 600.0, "items_attempted": 600, "rows_added": 8},
        {"step": 2, "gpus": [0, 1], "wall_s": 100.0, "items_attempted": 60, "ok": 50, "rows_added": 5},
        {"step": 3, "gpus": 0, "wall_s": 40.0, "ok": 4, "rows_added": 4},  # a CPU run
    ])
    (res / "pool_items.parquet").write_bytes(b"PAR1 assembled")
    (res / "pool_summary.md").write_text("# pool\n")
    (res / "items_copy.jsonl").write_text("{}\n")  # an input copied beside the results: not returned
    logs = root / "logs"
    logs.mkdir()
    (logs / "launch_params.txt").write_text(
        f"CUDA_VISIBLE_DEVICES=0 vllm serve {M8} --port 8001 --gpu-memory-utilization 0.85 --max-num-seqs 32 "
        f"--max-logprobs 20 --api-key {TOKEN}\n"
        f"CUDA_VISIBLE_DEVICES=0 vllm serve {M2} --port 8001 --gpu-memory-utilization 0.85 --max-logprobs 20\n")
    (logs / "client_s1_gpu0.log").write_text("items/s 1.0\n")
    return res


def test_pool_pack_verifies_with_sha256sum_and_reports(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    results = _pool(tmp_path)
    res = pack(PackOptions(Path("results/pool"), (Path("logs"),), Path("out/ret.tar.gz"), "gpu-box", "20261129",
                           "MAX_SEQS 64 -> 32 (OOM at start-up)"))
    assert res.sha256_file.read_text() == f"{res.sha256}  ret.tar.gz\n"
    ok = subprocess.run(["sha256sum", "-c", res.sha256_file.name], cwd=res.tarball.parent,
                        capture_output=True, text=True)
    assert ok.returncode == 0 and "ret.tar.gz: OK" in ok.stdout
    with tarfile.open(res.tarball) as tf:
        names = set(tf.getnames())
    assert {"results/pool/step1/MVBench.jsonl", "results/pool/step1/NExTQA.p1.jsonl", "results/pool/run_log.jsonl",
            "results/pool/step3/MVBench.jsonl", "logs/launch_params.txt", "ret.report.json", "ret.report.md"} <= names
    assert {"results/pool/pool_items.parquet", "results/pool/pool_summary.md"} <= names
    assert "results/pool/items_copy.jsonl" not in names
    rep = json.loads(res.report_json.read_text())
    s = {st["name"]: st for st in rep["stages"]}
    assert list(s) == ["step1", "step2", "step3"]
    one = s["step1"]
    assert one["items_done"] == 8 + 1 + 5 and one["removed"] == 3 + 1
    assert one["error_rows"] == 5 and one["failed_items"] == 1
    assert one["error_examples"] == ["MVBench_8", "MVBench_9"]  # unresolved items come first
    assert one["wall_s"] == 900.0  # union of 10:00-10:10 and 10:05-10:15
    assert one["items_per_s_per_gpu"] == pytest.approx(1200 / 1200.0)
    assert one["rows_added"] == 20 and one["runs"] == 2
    assert all(M8 in line for line in one["launch_lines"]) and len(one["launch_lines"]) == 1
    assert one["launcher_changes"] == ["MAX_SEQS 64 -> 32 (OOM at start-up)", "--max-num-seqs 32 (SPEC: 64)"]
    assert s["step2"]["items_per_s_per_gpu"] == pytest.approx(50 / 200.0)
    assert s["step3"]["launch_lines"] == [line for line in rep["launch_params"] if M2 in line]
    assert s["step3"]["wall_s"] == 40.0 and s["step3"]["launcher_changes"] == ["MAX_SEQS 64 -> 32 (OOM at start-up)"]
    assert s["step3"]["cpu"] and s["step3"]["items_per_s_per_gpu"] is None and not s["step3"]["gpus_assumed"]
    md = res.report_md.read_text()
    assert "| step1 | 14 | 4 | - | 5 | 1 | MVBench_8, MVBench_9 | 0h15m00s | 1.00 | 20 | 2 |" in md
    assert "| step3 | 4 | 0 | - | 0 | 0 | - | 0h00m40s | CPU | 4 | 1 |" in md
    assert "assumed" not in md
    for f in res.files:
        assert TOKEN not in f.read_bytes().decode("latin-1")
    assert "--api-key ***" in md
    assert results.is_dir()


def test_sweep_pack_is_named_fp_and_reports_conditions(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    res_dir = tmp_path / "results"
    (res_dir / "p1_raw" / "v_8_s224").mkdir(parents=True)
    (res_dir / "p1_raw" / "v_8_s224" / "MVBench__DIAG_V.jsonl").write_text('{"item_id": "MVBench_0"}\n')
    (res_dir / "sweep_rows" / "v_8_s224").mkdir(parents=True)
    (res_dir / "sweep_rows" / "v_8_s224" / "MVBench.jsonl").write_text('{"item_id": "MVBench_0"}\n')
    with (res_dir / "conditions_results.csv").open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["condition", "bench", "item_id", "status", "pred"])
        w.writerows([["v_8_s224", "MVBench", f"MVBench_{i}", "ok", "A"] for i in range(4)])
        w.writerows([["v_128_s224", "MVBench", "MVBench_0", "NA", ""],
                     ["v_128_s224", "MVBench", "MVBench_1", "error", ""]])
    dl = tmp_path / "data" / "logs"
    dl.mkdir(parents=True)
    append_rows(dl / "p1_timing.jsonl", [
        {"condition": "v_8_s224", "infer": 4, "infer_s": 8.0, "decode_s": 2.0, "prompt_tokens": 4000},
        {"condition": "v_128_s224", "infer": 1, "infer_s": 5.0, "decode_s": 1.0, "prompt_tokens": 9000}])
    append_rows(dl / "failures.jsonl", [{"item_id": "LVBench_7", "reason": "no normalized video"}])
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "launch_params.txt").write_text(
        f"vllm serve {M8} --port 8011 --max-model-len 65536 --limit-mm-per-prompt '{{\"image\": 1024}}' "
        "--max-num-seqs 8 --gpu-memory-utilization 0.85\n")
    assert default_name(res_dir, "gpu box", "20261129") == "fp_returns_gpu-box_20261129.tar.gz"
    res = pack(PackOptions(Path("results"), (Path("logs"), Path("data/logs")), None, "gpu box", "20261129"))
    assert res.tarball.name == "fp_returns_gpu-box_20261129.tar.gz" and res.tarball.is_file()
    with tarfile.open(res.tarball) as tf:
        names = set(tf.getnames())
    assert {"results/conditions_results.csv", "results/p1_raw/v_8_s224/MVBench__DIAG_V.jsonl",
            "results/sweep_rows/v_8_s224/MVBench.jsonl",
            "logs/launch_params.txt", "data/logs/p1_timing.jsonl"} <= names
    rep = res.report
    st = {s.name: s for s in rep.stages}
    assert st["v_8_s224"].items_done == 4 and st["v_8_s224"].rows_added == 4 and st["v_8_s224"].removed is None
    assert st["v_128_s224"].na_rows == 1 and st["v_128_s224"].error_rows == 1
    assert st["v_128_s224"].error_examples == ["MVBench_1"]
    assert rep.failures == 1 and rep.failure_examples == ["LVBench_7"]
    assert rep.timing[0]["condition"] == "v_128_s224" and rep.timing[1]["infer_s_per_item"] == 2.0
    assert st["v_8_s224"].launcher_changes == ["--max-num-seqs 8 (SPEC: 32)"]


def test_repo_paths() -> None:
    assert repo_paths("returns/", "a.tar.gz") == ("returns/a.tar.gz", "returns/a")
    assert repo_paths("returns/x_1.tar.gz", "a.tar.gz") == ("returns/x_1.tar.gz", "returns/x_1")
    for bad in ("../up", "", "a/../../b"):
        with pytest.raises(ValueError):
            repo_paths(bad, "a.tar.gz")


def _env(tmp_path: Path, hub: FakeHub, token: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN")}
    env.update({"HF_HOME": str(tmp_path / "hf_home"), "HF_ENDPOINT": hub.url})
    if token:
        env["HF_TOKEN"] = token
    return env


def test_upload_without_token_says_so_and_leaves_files(tmp_path: Path, fake_hub: FakeHub) -> None:
    _pool(tmp_path)
    fake_hub.add_file("lab/pool", "README.md", b"pool")
    r = subprocess.run([BENCHCHECK, "pack", "--results", "results/pool", "--logs", "logs", "--out", "ret.tar.gz",
                        "--upload", "lab/pool", "--path-in-repo", "returns/"], cwd=tmp_path,
                       env=_env(tmp_path, fake_hub, None), capture_output=True, text=True, timeout=120)
    assert r.returncode == 2, r.stderr
    assert "no Hugging Face token" in r.stderr and "files ready to send" in r.stderr
    for name in ("ret.tar.gz", "ret.sha256", "ret.report.json", "ret.report.md"):
        assert (tmp_path / name).is_file()
    assert not any(q.method == "POST" for q in fake_hub.requests)


def test_upload_with_token_commits_all_files(tmp_path: Path, fake_hub: FakeHub) -> None:
    _pool(tmp_path)
    fake_hub.add_file("lab/pool", "README.md", b"pool")
    r = subprocess.run([BENCHCHECK, "pack", "--results", "results/pool", "--logs", "logs", "--out", "ret.tar.gz",
                        "--upload", "lab/pool", "--path-in-repo", "returns/"], cwd=tmp_path,
                       env=_env(tmp_path, fake_hub, TOKEN), capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    files = fake_hub.repos["lab/pool"].files
    for name in ("ret.tar.gz", "ret.sha256", "ret.report.json", "ret.report.md"):
        assert files[f"returns/{name}"] == (tmp_path / name).read_bytes()
    assert {q.authorization for q in fake_hub.requests if q.method == "POST"} == {f"Bearer {TOKEN}"}
    assert TOKEN not in r.stdout + r.stderr
    assert "uploaded to" in r.stdout


def test_log_files_are_masked_in_the_tarball(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    _pool(tmp_path)
    hf = "hf_" + "LaunchLineToken0123456789"
    sk = "sk-" + "OpenAiStyleKey0123456789"
    env_only = "ZzEnvOnlySecretValue42"  # known only from the environment, in no recognisable form
    monkeypatch.setenv("MY_SERVICE_API_KEY", env_only)
    monkeypatch.setenv("HF_HUB_DISABLE_IMPLICIT_TOKEN", "1")  # a short value: must not mask every "1"
    logs = tmp_path / "logs"
    (logs / "launch_params.txt").write_text(
        f"# 2026-11-29T10:00:00Z step 1 shard 0/2\nHF_TOKEN={hf} CUDA_VISIBLE_DEVICES=0 vllm serve {M8} "
        f"--gpu-memory-utilization 0.85 --max-logprobs 20 --max-num-seqs 64 --api-key {sk}\n")
    (logs / "vllm").mkdir()
    (logs / "vllm" / "server_gpu0.log").write_bytes(
        f"INFO args: api_key='{env_only}'\nINFO Authorization: Bearer {sk}\n".encode()
        + b"\xff\xfe raw bytes stay\n" + f"served {hf}; 1 request\n".encode())
    # Not text: it cannot be checked, so it is left out (and listed).
    (logs / "vllm" / "blob.bin").write_bytes(bytes(range(32)) * 8 + env_only.encode())
    clean_row = '{"item_id": "MVBench_1",  "latency_s": 0.5}\n'
    (logs / "client.jsonl").write_text(
        clean_row + json.dumps({"cmd": f"vllm serve --api-key {sk}", "env": {"HF_TOKEN": hf}}) + "\n")
    (logs / "params.json").write_text(json.dumps({"headers": [f"Authorization: Bearer {sk}"]}, indent=2))
    res = pack(PackOptions(Path("results/pool"), (Path("logs"),), Path("out/ret.tar.gz"), "gpu-box", "20261129"))
    ok = subprocess.run(["sha256sum", "-c", res.sha256_file.name], cwd=res.tarball.parent,
                        capture_output=True, text=True)
    assert ok.returncode == 0 and "ret.tar.gz: OK" in ok.stdout
    dest = tmp_path / "unpacked"
    with tarfile.open(res.tarball) as tf:
        tf.extractall(dest, filter="data")
    launch = (dest / "logs" / "launch_params.txt").read_text()
    assert "HF_TOKEN=*** CUDA_VISIBLE_DEVICES=0 vllm serve" in launch and "--api-key ***" in launch
    log = (dest / "logs" / "vllm" / "server_gpu0.log").read_bytes()
    assert log == (b"INFO args: api_key='***'\nINFO Authorization: Bearer ***\n"
                   b"\xff\xfe raw bytes stay\nserved ***; 1 request\n")
    rows = (dest / "logs" / "client.jsonl").read_text().splitlines(keepends=True)
    assert rows[0] == clean_row  # a line without secrets is left byte for byte
    assert json.loads(rows[1]) == {"cmd": "vllm serve --api-key ***", "env": {"HF_TOKEN": "***"}}
    assert json.loads((dest / "logs" / "params.json").read_text()) == {"headers": ["Authorization: Bearer ***"]}
    assert not (dest / "logs" / "vllm" / "blob.bin").exists()
    assert res.unchecked == ("logs/vllm/blob.bin (binary content (control bytes))",)
    assert "logs/vllm/blob.bin" in res.report_md.read_text() and "--include-unchecked" in res.report_md.read_text()
    for p in dest.rglob("*"):
        if p.is_file():
            data = p.read_bytes()
            assert not any(s.encode() in data for s in (hf, sk, env_only, TOKEN)), p
    for f in (res.report_json, res.report_md):
        assert not any(s in f.read_text() for s in (hf, sk, env_only))
    assert (logs / "launch_params.txt").read_text().count(sk) == 1  # the originals are left as they were


def test_a_key_in_vllms_logged_arguments_is_masked_without_knowing_it(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """vLLM logs its arguments at start, a key given by ``--api-key`` with them
    (``non-default args: {..., 'api_key': ['sk-…']}``); packed from a shell where the key is in no
    variable, the server log went into the tarball with the key."""
    monkeypatch.chdir(tmp_path)
    _pool(tmp_path)
    key = "sk-" + "ServerSideKey0123456789"
    line = (f"INFO 11-29 10:00:01 [api_utils.py:271] non-default args: {{'model_tag': '{M8}', "
            f"'api_key': ['{key}'], 'port': 8001, 'max_logprobs': 20}}\n")
    (tmp_path / "logs" / "vllm_s1_gpu0.log").write_text("INFO starting\n" + line)
    res = pack(PackOptions(Path("results/pool"), (Path("logs"),), Path("out/ret.tar.gz"), "gpu-box", "20261129"))
    with tarfile.open(res.tarball) as tf:
        log = tf.extractfile("logs/vllm_s1_gpu0.log").read().decode()  # type: ignore[union-attr]
    assert log == "INFO starting\n" + line.replace(key, "***")
    assert key.encode() not in gzip.decompress(res.tarball.read_bytes())
    for f in (res.report_json, res.report_md):
        assert key not in f.read_text(), f


def test_a_key_in_a_header_or_yaml_line_is_masked_without_knowing_it(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """A curl -v trace sends the key as ``x-api-key: sk-…`` and a config copied into the logs holds
    ``OPENAI_API_KEY: sk-…``; packed from a shell where the key is in no variable, both went into
    the tarball with the key."""
    monkeypatch.chdir(tmp_path)
    _pool(tmp_path)
    key = "sk-" + "HeaderOrYamlKey0123456789"
    trace = f"> POST /v1/chat/completions HTTP/1.1\n> X-Api-Key: {key}\n> Content-Type: application/json\n"
    config = f"model: {M8}\nmax_tokens: 16\nenv:\n  OPENAI_API_KEY: {key}\n  HF_TOKEN: '{key}'\n"
    (tmp_path / "logs" / "curl_trace.log").write_text(trace)
    (tmp_path / "logs" / "config.yaml").write_text(config)
    res = pack(PackOptions(Path("results/pool"), (Path("logs"),), Path("out/ret.tar.gz"), "gpu-box", "20261129"))
    with tarfile.open(res.tarball) as tf:
        packed = {n: tf.extractfile(f"logs/{n}").read().decode()  # type: ignore[union-attr]
                  for n in ("curl_trace.log", "config.yaml")}
    assert packed == {"curl_trace.log": trace.replace(key, "***"), "config.yaml": config.replace(key, "***")}
    assert key.encode() not in gzip.decompress(res.tarball.read_bytes())


def _every_decoding(data: bytes) -> bytes:
    """The bytes, plus every compressed stream found in them decompressed (a tar of gz members)."""
    import bz2
    import gzip
    import io
    import lzma

    out = [data]
    with tarfile.open(fileobj=io.BytesIO(data)) as tf:
        for m in tf.getmembers():
            f = tf.extractfile(m)
            if f is None:
                continue
            raw = f.read()
            for magic, unpack in ((b"\x1f\x8b", gzip.decompress), (b"BZh", bz2.decompress),
                                  (b"\xfd7zXZ\x00", lzma.decompress)):
                if raw.startswith(magic):
                    out.append(unpack(raw))
    return b"\n".join(out)


def test_markers_in_logs_of_every_kind_never_reach_the_tarball(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """The review's files: an extensionless stdout, notes.csv, README.md, UTF-16 text and a .gz
    log went in verbatim; masking a curl line ate the closing quote."""
    import bz2
    import lzma

    monkeypatch.chdir(tmp_path)
    _pool(tmp_path)
    env_marker = "MarkerFromTheEnv-7f3a9c"
    monkeypatch.setenv("PACKTEST_API_KEY", env_marker)
    bearer = "BearerMarker_9f8e7d6c5b4a"
    logs = tmp_path / "logs"
    line = f'curl -H "Authorization: Bearer {bearer}" http://x -d key={env_marker}\n'
    (logs / "stdout").write_text(line)
    (logs / "notes.csv").write_text(f"when,what\n2026-11-29,{env_marker}\n")
    (logs / "README.md").write_text(f"# run\n\n`export PACKTEST_API_KEY={env_marker}`\n")
    (logs / "u16.txt").write_bytes(line.encode("utf-16"))  # with a BOM
    (logs / "u16be_nobom.txt").write_bytes(line.encode("utf-16-be"))
    (logs / "u8bom.log").write_bytes(b"\xef\xbb\xbf" + line.encode())
    (logs / "compressed.log.gz").write_bytes(gzip.compress(line.encode()))
    (logs / "compressed.log.bz2").write_bytes(bz2.compress(line.encode("utf-16")))
    (logs / "compressed.xz").write_bytes(lzma.compress(line.encode()))
    (logs / "picture.gz").write_bytes(gzip.compress(bytes(range(32)) * 64 + env_marker.encode()))
    res = pack(PackOptions(Path("results/pool"), (Path("logs"),), Path("out/ret.tar.gz"), "gpu-box", "20261129"))
    everything = _every_decoding(gzip.decompress(res.tarball.read_bytes()))
    for marker in (env_marker, bearer):
        for enc in ("utf-8", "utf-16-le", "utf-16-be"):
            assert marker.encode(enc) not in everything, (marker, enc)
    with tarfile.open(res.tarball) as tf:
        names = set(tf.getnames())
        masked = '-H "Authorization: Bearer ***" http://x -d key=***\n'
        assert tf.extractfile("logs/stdout").read().decode() == "curl " + masked  # type: ignore[union-attr]
        assert tf.extractfile("logs/u16.txt").read() == ("curl " + masked).encode("utf-16")  # type: ignore[union-attr]
        assert tf.extractfile("logs/u16be_nobom.txt").read() == (  # type: ignore[union-attr]
            "curl " + masked).encode("utf-16-be")
        assert gzip.decompress(tf.extractfile("logs/compressed.log.gz").read()) == (  # type: ignore[union-attr]
            "curl " + masked).encode()
        assert "logs/notes.csv" in names and "logs/README.md" in names
    assert "logs/picture.gz" not in names
    assert [u.split(" ")[0] for u in res.unchecked] == ["logs/picture.gz"]

    # Asked for: the unchecked file goes in as it is, and is still listed.
    res2 = pack(PackOptions(Path("results/pool"), (Path("logs"),), Path("out/ret2.tar.gz"), "gpu-box",
                            "20261129", include_unchecked=True))
    with tarfile.open(res2.tarball) as tf:
        assert tf.extractfile("logs/picture.gz").read() == (logs / "picture.gz").read_bytes()  # type: ignore[union-attr]
    assert "packed as they are" in res2.report_md.read_text()


def test_a_results_folder_with_nothing_to_pack_is_refused(tmp_path: Path) -> None:
    """`pack --results` on a folder without step*/ or conditions_results.csv (its parent, an empty one)
    wrote an empty tarball and its sha256 with exit 0 and only a note."""
    empty = tmp_path / "results"
    empty.mkdir()
    out = tmp_path / "out" / "r.tar.gz"
    argv = [sys.executable, "-m", "benchcheck", "pack", "--results", str(empty), "--out", str(out)]
    res = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert res.returncode == 2, res.stdout + res.stderr
    assert "Traceback" not in res.stderr and f"{empty}: no step folders" in res.stderr, res.stderr
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "screen.log").write_text("a line\n")
    res = subprocess.run([*argv, "--logs", str(logs)], capture_output=True, text=True, timeout=120)
    assert res.returncode == 2, res.stdout + res.stderr  # the launcher's --logs do not make it a results folder
    assert not (tmp_path / "out").exists()
    # A run that stopped before its first row left only its run log: that goes back.
    append_rows(empty / "run_log.jsonl", [{"step": 1, "wall_s": 1.0, "rows_added": 0}])
    res = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr
    with tarfile.open(out) as tar:
        assert any(n.endswith("run_log.jsonl") for n in tar.getnames())
