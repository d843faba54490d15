"""Whether a video file that declares no duration (MPEG transport and program streams) ends
whole: such a file cut short decodes as a shorter video, and only its bytes can tell. Read-only;
``normalize`` fails a source this finds cut.

A file cut exactly where one of its units ends reads whole to these checks; the frame whose data
the cut split is what is left to tell it (:func:`last_frame_cut`): ``normalize`` decodes it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

# MPEG-TS packet layouts FFmpeg reads, as (packet size, offset of the sync byte): plain, a timecode
# before each packet (Blu-ray m2ts), error correction after each.
TS_LAYOUTS = ((188, 0), (192, 4), (204, 0))
TS_SYNC = 0x47
# Transport packets whose sync bytes must sit at the end of a whole file: with fewer, a cut could
# leave a stray sync byte where a packet would start.
TS_TAIL_PACKETS = 4
# MPEG program stream start codes (after the prefix 00 00 01): a pack header, the program end code;
# every code from the system header's up begins a packet that gives its own length.
PS_PREFIX = b"\x00\x00\x01"
PS_PACK = 0xBA
PS_END = 0xB9
PS_SYSTEM_HEADER = 0xBB


def cut_end(format_name: str, path: Path) -> str | None:
    """Why the file at ``path``, of FFmpeg's demuxer ``format_name``, does not end whole, or None
    (None too for a format that declares its duration: the decoded frames are checked against it)."""
    check = {"mpegts": _ts_problem, "mpeg": _ps_problem}.get(format_name)
    return check(path) if check is not None else None


def _truncated(kind: str, what: str) -> str:
    return (f"truncated: the {kind} file {what} (cut or damaged at its end; "
            f"{kind} declares no duration, so how much is missing is unknown)")


def last_frame_cut(format_name: str) -> str | None:
    """The failure of a program or transport stream (FFmpeg's demuxer ``format_name`` "mpeg",
    "mpegts") whose last frame does not decode whole, or None for any other format. A stream cut
    exactly between two of its units (a program stream's packs, a transport stream's 188-byte
    packets) leaves every unit whole, so :func:`cut_end` reads it as whole. But a program stream's
    muxers fill each packet to its size whatever the frames, and a transport stream's frames span
    many of its small packets, so such a cut almost always splits the last frame's data, which the
    demuxer hands on as it is and the decoder conceals or refuses. Only a cut that also falls
    between two frames goes unseen (or that leaves out no more than a frame's last bytes, which
    the decoder may not miss)."""
    kind = {"mpeg": "MPEG-PS", "mpegts": "MPEG-TS"}.get(format_name)
    return _truncated(kind, "ends inside its last frame") if kind is not None else None


def _ts_problem(path: Path) -> str | None:
    """Why an MPEG-TS file's end is not whole, or None. A transport stream declares no duration, so
    a cut file read as a shorter video; but every muxer writes whole fixed-size packets, each
    starting with a sync byte, so a file cut (or zeroed) at its end no longer ends on them."""
    size = path.stat().st_size
    span = max(n for n, _ in TS_LAYOUTS) * TS_TAIL_PACKETS
    with path.open("rb") as f:
        f.seek(max(0, size - span))
        tail = f.read()
    for n, sync in TS_LAYOUTS:
        k = min(TS_TAIL_PACKETS, len(tail) // n)
        if k and all(tail[len(tail) - j * n + sync] == TS_SYNC for j in range(1, k + 1)):
            return None
    return _truncated("MPEG-TS", "does not end on a whole transport packet")


def _ps_unit_end(data: Any, i: int) -> int | None:
    """Where the program-stream unit (pack header, end code or packet) starting at ``i`` ends, or
    None when no unit starts there (bytes between units: the demuxer skips them to the next pack)."""
    if data[i:i + 3] != PS_PREFIX or i + 4 > len(data):
        return None
    code = data[i + 3]
    if code == PS_END:
        return i + 4
    if code == PS_PACK:
        if i + 5 > len(data):
            return len(data) + 1
        if data[i + 4] >> 6 == 1:  # MPEG-2: longer, and its last byte counts stuffing after it
            return i + 14 + (data[i + 13] & 7) if i + 14 <= len(data) else len(data) + 1
        return i + 12  # MPEG-1
    if code >= PS_SYSTEM_HEADER:
        return i + 6 + int.from_bytes(data[i + 4:i + 6], "big") if i + 6 <= len(data) else len(data) + 1
    return None


def _ps_problem(path: Path) -> str | None:
    """Why an MPEG program stream's end is not whole, or None. A program stream declares no
    duration (and FFmpeg writes no end code), so a cut file read as a shorter video; but every unit
    of it says how long it is, so a file cut inside one ends before that unit does. The units are
    walked from the start: only that way is a unit's start known, not guessed from bytes that look
    like one. A cut that falls exactly between two units ends whole here (:func:`last_frame_cut`)."""
    import mmap

    with path.open("rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
        size, i = len(data), 0
        while i < size:
            end = _ps_unit_end(data, i)
            if end is None:  # bytes no unit starts at: the demuxer reads on from the next pack
                nxt = data.find(PS_PREFIX + bytes([PS_PACK]), i + 1)
                if nxt < 0:
                    break
                end = nxt
            if end > size:
                break
            i = end
        whole = i == size
    if whole:
        return None
    return _truncated("MPEG-PS", "does not end on a whole packet")
