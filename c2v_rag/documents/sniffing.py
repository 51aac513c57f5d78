"""Telling text files from binary ones before they are read as documents.

A folder a user points ``ingest`` at often holds a stray PDF renamed ``.txt``, a UTF-16 export
or a database dump. Embedding their bytes as text gives chunks of garbage that then rank in
search results, so such files are skipped with a warning instead. The checks, cheapest first:

- a size limit (a 2 GB log is not a document; it would also be held in memory whole);
- known binary magic numbers at the start (PDF, images, archives, executables, databases);
- NUL bytes, which no UTF-8 or ASCII text contains (UTF-16 and UTF-32 text does: with its byte-order mark, as
  Windows tools write it, it is read; without one, convert it);
- text that is not UTF-8 at all, with more invalid sequences than valid non-ASCII characters (a file saved by an older
  Windows editor as cp1252, or in Shift-JIS, GBK, KOI8-R): its encoding is guessed by charset-normalizer and it
  is read in that encoding. Western European code pages tie on short texts, and cp1252, the commonest, wins the tie;
- the share of bytes that are not valid UTF-8, above a threshold. Below it, a few stray bytes
  (a Latin-1 accent in an otherwise UTF-8 file) are replaced and the file is read.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

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


# Byte-order marks of the wide encodings, UTF-32's first (its little-endian mark starts with UTF-16's).
_WIDE_BOMS: tuple[tuple[bytes, str], ...] = (
    (b"\xff\xfe\x00\x00", "utf-32"),
    (b"\x00\x00\xfe\xff", "utf-32"),
    (b"\xff\xfe", "utf-16"),
    (b"\xfe\xff", "utf-16"),
)
# A guess whose mess (charset-normalizer's "chaos": odd characters, broken words) is above this is no text.
_MAX_CHAOS = 0.2
# The encodings files are written in today besides UTF-8: Windows' code pages, ISO 8859, KOI8 and the CJK ones.
# DOS and classic Mac code pages are left out: they read any Western text too, and won guesses they should not.
_LEGACY_ENCODINGS = (
    "cp1252", "cp1250", "cp1251", "cp1253", "cp1254", "cp1255", "cp1256", "cp1257", "cp1258", "cp874",
    "iso8859_2", "iso8859_5", "iso8859_7", "iso8859_9", "iso8859_15", "koi8_r", "koi8_u",
    "cp932", "euc_jp", "iso2022_jp", "gb18030", "big5", "cp949", "euc_kr",
)  # fmt: skip
# The Western European code page that short texts cannot tell from its neighbours (cp1250, cp1257): the commonest.
_WESTERN = "cp1252"


@dataclass(frozen=True)
class Decoded:
    """A file's text, the encoding it was read in (``utf-8`` unless the file said or showed otherwise), and how many
    invalid sequences were replaced (U+FFFD; a text may also hold that character itself, validly encoded)."""

    text: str
    encoding: str = "utf-8"
    replaced: int = 0


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


# How much of a file's start the signature and NUL-byte checks read.
HEAD_BYTES = 8192


def file_head(file: Path) -> bytes:
    """The first :data:`HEAD_BYTES` of ``file``, what :func:`binary_reason` judges it by."""
    with file.open("rb") as handle:
        return handle.read(HEAD_BYTES)


def binary_reason(head: bytes) -> str | None:
    """Why a file whose first bytes are ``head`` is no text (a known binary signature, NUL bytes), else None."""
    kind = binary_signature(head[:16])
    if kind is not None:
        return f"it is {kind}"
    return "it contains NUL bytes" if b"\x00" in head else None


def decode_text(data: bytes, max_undecodable_share: float = DEFAULT_MAX_UNDECODABLE_SHARE) -> Decoded | NotText:
    """``data`` as text with the encoding it was read in, or :class:`NotText` saying why it is not text.

    A byte-order mark is dropped (and decides UTF-16 or UTF-32). Data with no valid non-ASCII UTF-8 character is
    read in the encoding charset-normalizer finds for it (so is data whose invalid sequences outnumber its valid
    non-ASCII characters). Otherwise invalid UTF-8 sequences are replaced (U+FFFD)
    when their share of the bytes is at most ``max_undecodable_share``.
    """
    kind = binary_signature(data[:16])
    if kind is not None:
        return NotText(f"it is {kind}")
    for bom, wide in _WIDE_BOMS:
        if data.startswith(bom):
            try:
                return Decoded(data.decode(wide), wide)
            except UnicodeDecodeError:
                return NotText(f"it starts with a {wide.upper()} byte-order mark but is not {wide.upper()} text")
    if b"\x00" in data:
        return NotText("it contains NUL bytes (binary, or UTF-16/UTF-32 text without a byte-order mark: convert it)")
    try:
        return Decoded(data.decode("utf-8-sig"))
    except UnicodeDecodeError:
        pass
    text = data.decode("utf-8-sig", errors="replace")
    # Each replacement stands for one or more invalid bytes; compare with the byte count.
    replaced = text.count("\ufffd") - data.count("\ufffd".encode())
    if _utf8_characters_beyond_ascii(text) < replaced:
        legacy = legacy_encoding(data)
        if legacy is not None:
            return Decoded(data.decode(legacy), legacy)
    share = replaced / max(len(data), 1)
    if share > max_undecodable_share:
        return NotText(f"{share:.0%} of its bytes are not valid UTF-8 (limit {max_undecodable_share:.0%})")
    return Decoded(text, replaced=replaced)


def whole_lines(head: bytes) -> bytes:
    """A file's first bytes cut after their last line end, so that no character is cut in two (a head without one,
    and a UTF-16 or UTF-32 head, whose line ends are wider, as they are)."""
    if head.startswith(tuple(bom for bom, _ in _WIDE_BOMS)):
        return head
    return head[: head.rfind(b"\n") + 1] or head


def _utf8_characters_beyond_ascii(text: str) -> int:
    """How many valid non-ASCII characters ``text`` (decoded as UTF-8 with replacements) holds. More of them than
    invalid sequences: UTF-8 with stray bytes. Fewer: another encoding, whose bytes now and then form UTF-8 by
    chance (Shift-JIS and GBK do)."""
    return sum(1 for ch in text if ord(ch) > 127 and ch != "\ufffd")


def legacy_encoding(data: bytes) -> str | None:
    """The encoding charset-normalizer finds for ``data`` (not UTF-8), or None when none reads it as text."""
    from charset_normalizer import from_bytes

    found = from_bytes(data, threshold=_MAX_CHAOS, cp_isolation=list(_LEGACY_ENCODINGS))
    matches = [m for m in found if m.encoding not in ("utf_8", "ascii")]
    if not matches:
        return None
    best = min(matches, key=lambda m: (m.chaos, -m.coherence))
    # Short Western texts read alike in cp1252, cp1250 and cp1257 (charset-normalizer then names the first);
    # cp1252 wins where it reads the text as well.
    for match in matches:
        fits_as_well = match.chaos <= best.chaos and match.coherence >= best.coherence
        if fits_as_well and _WESTERN in match.could_be_from_charset:
            return _WESTERN
    return best.encoding
