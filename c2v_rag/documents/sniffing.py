"""Telling text files from binary ones before they are read as documents.

A folder a user points ``ingest`` at often holds a stray PDF renamed ``.txt``, a UTF-16 export
or a database dump. Embedding their bytes as text gives chunks of garbage that then rank in
search results, so such files are skipped with a warning instead. The checks, cheapest first:

- a size limit (a 2 GB log is not a document; it would also be held in memory whole);
- known binary magic numbers at the start (PDF, images, archives, executables, databases);
- NUL bytes, which no UTF-8 or ASCII text contains (UTF-16 and UTF-32 text does: convert it);
- the share of bytes that are not valid UTF-8, above a threshold. Below it, a few stray bytes
  (a Latin-1 accent in an otherwise UTF-8 file) are replaced and the file is read.
"""

from __future__ import annotations

from dataclasses import dataclass

# Defaults for IngestConfig.max_file_bytes / max_undecodable_share (kept here, with the checks).
DEFAULT_MAX_FILE_BYTES = 64 * 1024 * 1024
DEFAULT_MAX_UNDECODABLE_SHARE = 0.1

# Signatures whose bytes no plain-text document starts with.
_MAGIC: tuple[tuple[bytes, str], ...] = (
    (b"%PDF-", "a PDF"),
    (b"\x89PNG\r\n\x1a\n", "a PNG image"),
    (b"\xff\xd8\xff", "a JPEG image"),
    (b"GIF87a", "a GIF image"),
    (b"GIF89a", "a GIF image"),
    (b"PK\x03\x04", "a ZIP archive (or .docx/.xlsx/.epub)"),
    (b"\x1f\x8b", "a gzip archive"),
    (b"BZh9", "a bzip2 archive"),
    (b"\xfd7zXZ\x00", "an xz archive"),
    (b"7z\xbc\xaf\x27\x1c", "a 7-Zip archive"),
    (b"Rar!\x1a\x07", "a RAR archive"),
    (b"\x7fELF", "an ELF executable"),
    (b"SQLite format 3\x00", "an SQLite database"),
    (b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1", "an old Office document (.doc/.xls)"),
    (b"OggS\x00", "an Ogg media file"),
    (b"\x00asm", "a WebAssembly module"),
    (b"\xca\xfe\xba\xbe", "a Java class or Mach-O binary"),
)


@dataclass(frozen=True)
class NotText:
    """Why a file was not read as text, in words for the warning."""

    reason: str


def binary_signature(head: bytes) -> str | None:
    """What ``head`` (a file's first bytes) says the file is, when it is a known binary format."""
    for magic, kind in _MAGIC:
        if head.startswith(magic):
            return kind
    return None


def binary_reason(head: bytes) -> str | None:
    """Why a file whose first bytes are ``head`` is no text (a known binary signature, NUL bytes), else None."""
    kind = binary_signature(head[:16])
    if kind is not None:
        return f"it is {kind}"
    return "it contains NUL bytes" if b"\x00" in head else None


def decode_text(data: bytes, max_undecodable_share: float = DEFAULT_MAX_UNDECODABLE_SHARE) -> str | NotText:
    """``data`` as text, or :class:`NotText` saying why it is not.

    A UTF-8 byte-order mark is dropped. Invalid UTF-8 sequences are replaced (U+FFFD) when their
    share of the bytes is at most ``max_undecodable_share``.
    """
    kind = binary_signature(data[:16])
    if kind is not None:
        return NotText(f"it is {kind}")
    if b"\x00" in data:
        return NotText("it contains NUL bytes (binary, or UTF-16/UTF-32 text: convert it to UTF-8)")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        pass
    text = data.decode("utf-8-sig", errors="replace")
    # Each replacement stands for one or more invalid bytes; compare with the byte count.
    replaced = text.count("\ufffd") - data.count("\ufffd".encode("utf-8"))
    share = replaced / max(len(data), 1)
    if share > max_undecodable_share:
        return NotText(f"{share:.0%} of its bytes are not valid UTF-8 (limit {max_undecodable_share:.0%})")
    return text
