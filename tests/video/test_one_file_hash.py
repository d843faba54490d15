"""One file hasher: the video store's content hash (a source's video id) and the data commands'
shard checks both come from ``benchcheck.filehash.sha256_file``, where ``video.normalize`` held a
twin of ``data.manifest``'s."""

from __future__ import annotations

import hashlib
from pathlib import Path

from benchcheck.data import manifest
from benchcheck.filehash import CHUNK, sha256_file
from benchcheck.video import resolve, store


def test_the_data_commands_and_the_video_store_hash_files_with_the_one_function() -> None:
    assert manifest.sha256_file is sha256_file
    assert store.sha256_file is sha256_file and resolve.sha256_file is sha256_file


def test_a_file_is_hashed_whole_across_its_chunks(tmp_path: Path) -> None:
    for size in (0, 1, CHUNK - 1, CHUNK, 2 * CHUNK + 7):
        data = bytes(range(256)) * (size // 256) + bytes(size % 256)
        (tmp_path / "f").write_bytes(data)
        assert sha256_file(tmp_path / "f") == hashlib.sha256(data).hexdigest(), size
