"""Log files on their way into the returns tarball: every file that is text is masked, the rest
is left out and listed (``pack --include-unchecked`` packs it as it is, still listed).

What is text is decided by the content, never the name (an extensionless ``stdout``, a
``notes.csv`` and a ``README.md`` are logs like any other):

- a UTF-8, UTF-16 or UTF-32 byte-order mark: text in that encoding, written back in it (BOM kept);
- NUL bytes in every other position of the first bytes and no BOM: UTF-16 (LE or BE) text;
- a gzip, bzip2 or xz stream: decompressed, checked as below, masked and compressed again;
- otherwise text when few bytes are control characters (a kill can leave a run of NULs in a
  log; ANSI colours are fine), read as UTF-8 with undecodable bytes passed through unchanged;
- anything else (images, zip, zstd, sqlite, a compressed stream of binary data) cannot be
  checked: it is *unchecked*.

Masking is :class:`benchcheck.masking.Masker` on blocks of whole lines. JSON needs no parsing:
the masker also knows each secret's JSON-escaped spelling, and its patterns stop at quotes and
backslashes, so a masked JSON line stays valid JSON, and a line without a secret is unchanged.
"""

from __future__ import annotations

import bz2
import codecs
import gzip
import io
import lzma
import tempfile
import zlib
from collections.abc import Callable
from typing import IO, Any

from benchcheck.masking import Masker

HEAD_BYTES = 64 << 10
_SPOOL = 16 << 20
_BLOCK_CHARS = 1 << 20
# Longest first: the UTF-32 LE mark starts with the UTF-16 LE one.
_BOMS = ((codecs.BOM_UTF32_LE, "utf-32-le"), (codecs.BOM_UTF32_BE, "utf-32-be"),
         (codecs.BOM_UTF8, "utf-8"), (codecs.BOM_UTF16_LE, "utf-16-le"), (codecs.BOM_UTF16_BE, "utf-16-be"))
# The openers return GzipFile / BZ2File / LZMAFile, which typeshed does not type as IO[bytes].
_COMPRESSED: dict[bytes, tuple[str, Callable[[IO[bytes]], Any], Callable[[IO[bytes]], Any]]] = {
    b"\x1f\x8b": ("gzip", lambda f: gzip.GzipFile(fileobj=f, mode="rb"),
                  lambda f: gzip.GzipFile(fileobj=f, mode="wb", filename="", mtime=0)),
    b"BZh": ("bzip2", lambda f: bz2.BZ2File(f, "rb"), lambda f: bz2.BZ2File(f, "wb")),
    b"\xfd7zXZ\x00": ("xz", lambda f: lzma.LZMAFile(f, "rb"), lambda f: lzma.LZMAFile(f, "wb")),  # noqa: SIM115
}
# Bytes that do not occur in text: C0 controls but tab, newlines, form feed and ESC (colours).
_CONTROL = bytes(b for b in range(32) if b not in (9, 10, 11, 12, 13, 27)) + b"\x7f"
_MAX_CONTROL_SHARE = 0.10


class Unchecked(Exception):
    """A file whose content cannot be checked for secrets; the message says why."""


def sniff(head: bytes) -> tuple[str, str]:
    """``("bom", codec)``, ``("text", codec)``, ``("compressed", name)`` or ``("binary", why)``."""
    for bom, codec in _BOMS:
        if head.startswith(bom):
            return "bom", codec
    for magic, (name, _r, _w) in _COMPRESSED.items():
        if head.startswith(magic):
            return "compressed", name
    sample = head[:4096]
    pairs = len(sample) // 2
    if pairs >= 2:
        odd, even = sample[1::2].count(0), sample[0::2].count(0)
        if odd >= 0.3 * pairs and even == 0:
            return "text", "utf-16-le"
        if even >= 0.3 * pairs and odd == 0:
            return "text", "utf-16-be"
    if head and len(head) - len(head.translate(None, _CONTROL)) > _MAX_CONTROL_SHARE * len(head):
        return "binary", "binary content (control bytes)"
    return "text", "utf-8"


def _errors(codec: str) -> str:
    # UTF-8 logs may hold stray bytes (a torn multi-byte character): pass them through as they are.
    return "surrogateescape" if codec == "utf-8" else "surrogatepass"


def _mask_text(src: IO[bytes], dst: IO[bytes], codec: str, bom: bytes, masker: Masker) -> None:
    """Decode, mask and re-encode in blocks of whole lines (no secret or pattern spans a line)."""
    errors = _errors(codec)
    dst.write(bom)
    reader = io.TextIOWrapper(src, encoding=codec, errors=errors, newline="")
    try:
        while lines := reader.readlines(_BLOCK_CHARS):
            dst.write(masker.text("".join(lines)).encode(codec, errors))
    except UnicodeError as e:
        raise Unchecked(f"not decodable as {codec}: {e}") from None
    finally:
        reader.detach()


def mask_stream(src: IO[bytes], dst: IO[bytes], masker: Masker, nested: bool = False) -> None:
    """Write ``src`` masked into ``dst``; raises :class:`Unchecked` when it cannot be checked."""
    head = src.read(HEAD_BYTES)
    src.seek(0)
    kind, what = sniff(head)
    if kind == "binary":
        raise Unchecked(what)
    if kind == "bom":
        bom = next(b for b, c in _BOMS if c == what)
        src.seek(len(bom))
        _mask_text(src, dst, what, bom, masker)
        return
    if kind == "text":
        _mask_text(src, dst, what, b"", masker)
        return
    if nested:
        raise Unchecked(f"{what} inside a compressed stream")
    name, open_read, open_write = _COMPRESSED[next(m for m in _COMPRESSED if head.startswith(m))]
    with tempfile.SpooledTemporaryFile(max_size=_SPOOL) as plain, \
            tempfile.SpooledTemporaryFile(max_size=_SPOOL) as masked:
        try:
            with open_read(src) as z:
                while chunk := z.read(1 << 20):
                    plain.write(chunk)
        except (OSError, EOFError, zlib.error, lzma.LZMAError) as e:
            raise Unchecked(f"unreadable {name} stream: {e}") from None
        plain.seek(0)
        try:
            mask_stream(plain, masked, masker, nested=True)
        except Unchecked as e:
            raise Unchecked(f"{name} of {e}") from None
        masked.seek(0)
        with open_write(dst) as z:
            while chunk := masked.read(1 << 20):
                z.write(chunk)
