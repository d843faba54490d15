"""A loopback Hugging Face Hub that answers what ``huggingface_hub`` 1.33 calls for a dataset (tests,
``benchmarks.data_io``).

Endpoints (read from huggingface_hub 1.33.0, ``hf_api.py``, ``file_download.py``, ``_commit_api.py``):
``GET /api/datasets/{repo}/revision/{rev}`` (``dataset_info``: ``id``, ``sha``),
``GET /api/datasets/{repo}/tree/{rev}`` (``list_repo_tree``: ``type``, ``path``, ``size``, ``oid``, ``lfs``),
``HEAD``/``GET /datasets/{repo}/resolve/{rev}/{path}`` (``X-Repo-Commit``, ``ETag``, ``Content-Length``,
``Range`` → 206 with ``Content-Range``), ``POST /api/datasets/{repo}/preupload/{rev}`` (every file
"regular") and ``POST /api/datasets/{repo}/commit/{rev}`` (NDJSON; base64 files).
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

_API = re.compile(r"^/api/datasets/(?P<repo>[^/]+/[^/]+)/(?P<op>revision|tree|preupload|commit)"
                  r"/(?P<rev>[^/]+)(?P<rest>/.*)?$")
_RESOLVE = re.compile(r"^/datasets/(?P<repo>[^/]+/[^/]+)/resolve/(?P<rev>[^/]+)/(?P<path>.+)$")


@dataclass
class Repo:
    """A dataset repository: one commit, files as bytes."""

    files: dict[str, bytes] = field(default_factory=dict)
    commit: str = ""

    def bump(self) -> None:
        h = hashlib.sha1()
        for p in sorted(self.files):
            h.update(p.encode() + b"\0" + hashlib.sha256(self.files[p]).digest())
        self.commit = h.hexdigest()


@dataclass
class Request:
    method: str
    path: str
    range: str | None
    authorization: str | None


class FakeHub:
    """State shared with the handler: repositories, recorded requests, injected connection drops."""

    def __init__(self) -> None:
        self.repos: dict[str, Repo] = {}
        self.requests: list[Request] = []
        self.drop_after: dict[str, int] = {}  # path -> bytes sent before the first GET is cut
        self.lock = threading.Lock()
        self.url = ""

    def add_file(self, repo: str, path: str, data: bytes) -> None:
        r = self.repos.setdefault(repo, Repo())
        r.files[path] = data
        r.bump()

    def add_dir(self, repo: str, src: Path, prefix: str = "") -> None:
        for p in sorted(src.rglob("*")):
            if p.is_file():
                self.add_file(repo, f"{prefix}{p.relative_to(src).as_posix()}", p.read_bytes())

    def gets(self, suffix: str) -> list[Request]:
        return [r for r in self.requests if r.method == "GET" and r.path.endswith(suffix)]


class HubHandler(BaseHTTPRequestHandler):
    hub: FakeHub
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _send_json(self, obj: Any, status: int = 200, headers: dict[str, str] | None = None) -> None:
        body = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _error(self, status: int, code: str, msg: str) -> None:
        self._send_json({"error": msg}, status, {"X-Error-Code": code, "X-Error-Message": msg})

    def _record(self) -> None:
        with self.hub.lock:
            self.hub.requests.append(Request(self.command, unquote(urlsplit(self.path).path),
                                             self.headers.get("Range"), self.headers.get("Authorization")))

    def _repo(self, name: str, rev: str) -> Repo | None:
        repo = self.hub.repos.get(name)
        if repo is None:
            self._error(404, "RepoNotFound", f"Repository {name} not found")
            return None
        if rev not in ("main", repo.commit):
            self._error(404, "RevisionNotFound", f"Invalid rev id: {rev}")
            return None
        return repo

    def do_HEAD(self) -> None:
        self._record()
        self._resolve(head=True)

    def do_GET(self) -> None:
        self._record()
        path = urlsplit(self.path).path
        m = _API.match(path)
        if m and m["op"] in ("revision", "tree"):
            repo = self._repo(m["repo"], unquote(m["rev"]))
            if repo is None:
                return
            if m["op"] == "revision":
                self._send_json({"id": m["repo"], "sha": repo.commit,
                                 "siblings": [{"rfilename": p} for p in sorted(repo.files)]})
                return
            entries = []
            for p, data in sorted(repo.files.items()):
                e: dict[str, Any] = {"type": "file", "path": p, "size": len(data),
                                     "oid": hashlib.sha1(data).hexdigest()}
                if p.endswith(".tar"):
                    e["lfs"] = {"oid": hashlib.sha256(data).hexdigest(), "size": len(data), "pointerSize": 134}
                entries.append(e)
            self._send_json(entries)
            return
        self._resolve(head=False)

    def _resolve(self, head: bool) -> None:
        m = _RESOLVE.match(urlsplit(self.path).path)
        if not m:
            self._error(404, "EntryNotFound", "no such route")
            return
        repo = self._repo(m["repo"], unquote(m["rev"]))
        if repo is None:
            return
        fpath = unquote(m["path"])
        data = repo.files.get(fpath)
        if data is None:
            self._error(404, "EntryNotFound", f"{fpath} does not exist", )
            return
        etag = hashlib.sha256(data).hexdigest() if fpath.endswith(".tar") else hashlib.sha1(data).hexdigest()
        start, status = 0, 200
        rng = self.headers.get("Range")
        if rng and not head:
            rm = re.match(r"bytes=(\d+)-$", rng)
            assert rm, rng
            start, status = int(rm.group(1)), 206
        body = data[start:]
        self.send_response(status)
        self.send_header("X-Repo-Commit", repo.commit)
        self.send_header("ETag", f'"{etag}"')
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("Content-Length", str(len(body)))
        if status == 206:
            self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
        self.end_headers()
        if head:
            return
        with self.hub.lock:
            cut = self.hub.drop_after.pop(fpath, None)
        if cut is not None:
            self.wfile.write(body[:cut])
            self.wfile.flush()
            self.close_connection = True
            self.connection.shutdown(2)
            return
        self.wfile.write(body)

    def do_POST(self) -> None:
        self._record()
        m = _API.match(urlsplit(self.path).path)
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        if not m or m["op"] not in ("preupload", "commit"):
            self._error(404, "EntryNotFound", "no such route")
            return
        if not (self.headers.get("Authorization") or "").startswith("Bearer "):
            self._error(401, "Unauthorized", "write token required")
            return
        repo = self._repo(m["repo"], unquote(m["rev"]))
        if repo is None:
            return
        if m["op"] == "preupload":
            files = json.loads(raw)["files"]
            self._send_json({"files": [{"path": f["path"], "uploadMode": "regular", "shouldIgnore": False}
                                       for f in files]})
            return
        for line in raw.decode().splitlines():
            op = json.loads(line)
            if op["key"] == "file":
                repo.files[op["value"]["path"]] = base64.b64decode(op["value"]["content"])
        repo.bump()
        self._send_json({"commitUrl": f"{self.hub.url}/datasets/{m['repo']}/commit/{repo.commit}",
                         "commitOid": repo.commit})
