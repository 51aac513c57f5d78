"""GNU Info manuals (``.info``, as ``makeinfo`` writes them; Debian installs them gzipped in ``/usr/share/info``):
one document per node, as makeinfo's HTML output gives a page per node.

An Info file is a preamble, then nodes between unit separators (0x1F), each opening with a header line
(``File: sed.info,  Node: Regexp Addresses,  Next: ...``) that names the node: the document's id is the file's and
the node's (``/usr/share/info/sed.info.gz:Regexp Addresses``), and the line itself is left out. The node's
section heading, a title over a rule of ``*``, ``=``, ``-`` or ``.``, becomes a Markdown heading of that level
(``## 4.3 selecting lines by text matching``), which leads the node's later chunks. Cross-references read as an
Info reader shows them (``*note Overview::`` as ``see Overview``). The text is decoded in the encoding the manual
names at its end (``coding: iso-8859-1``; a split manual names it in its main file only), else as any text file is.

Left out: the preamble (the makeinfo line, the copyright and permission notice, the ``dir`` entry); menus, the list
of a node's subnodes at its end, and so the nodes that hold nothing else but their heading; index nodes (entries
that point at other nodes, marked by ``\\0\\b[index\\0\\b]``, the only NUL bytes in an Info file, which a reader of
plain text refuses as binary); the licence a manual carries (the same text in every GNU manual would answer any
question about copying); the tag table. A large manual is split into numbered files (``gnupg.info-1``,
``gnupg.info-2``) beside a main file that holds only the preamble and a table of its parts: each part is read as a
file of its own, and the main file gives no document.
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Iterator
from pathlib import Path

from c2v_rag.documents.formats.archives import CompressedFile, compressed_head
from c2v_rag.documents.formats.base import FileFormat, checked_text, within_size
from c2v_rag.documents.payload_keys import NODE_KEY
from c2v_rag.documents.reading import ReadLog, ReadOptions
from c2v_rag.documents.source_document import SourceDocument

_SEPARATOR = "\x1f"
# makeinfo's markers around an index node's menu and an image (``\0\b[index\0\b]``, ``\0\b[image src=...\0\b]``).
_MARKER = re.compile(rb"\x00\x08\[[^\x00]*\x00\x08\]")
_INDEX_MARKER = b"\x00\x08[index\x00\x08]"
_HEADER = re.compile(r"^File:[^,]*,\s*Node:\s*([^,\t\n]+)")
# A section heading: a line over a rule of one mark as long as the line. The mark gives the level.
_HEADING = re.compile(r"^(\S[^\n]*)\n([*=\-.])\2{2,}[ \t]*$", re.MULTILINE)
_LEVELS = {"*": "#", "=": "##", "-": "###", ".": "####"}
# The licence nodes of GNU manuals (the FDL, the GPL, "Copying This Manual").
_LICENCE = re.compile(
    r"^(?:GNU )?(?:Free Documentation|(?:Lesser |Library )?General Public) License$"
    r"|^Copying(?: This Manual| Conditions)?$",
    re.IGNORECASE,
)
# Cross-references: *note NODE:: and *note LABEL: NODE. (the node name up to the punctuation that ends it).
_NOTE_NODE = re.compile(r"\*([Nn])ote[ \t\n]+([^:*]+?)::")
_NOTE_LABEL = re.compile(r"\*([Nn])ote[ \t\n]+([^:*]+?):[ \t\n]+(?:\([^)]*\))?[^.,:*]*?([.,])")
_MENU = re.compile(r"^\* Menu:", re.MULTILINE)
# The encoding makeinfo names at the end of a manual (of its main file, where it is split).
_CODING = re.compile(rb"\x1f\nLocal Variables:\n(?:[^\x1f\n]*\n)*?coding: *([\w.-]+)")
_PART = re.compile(r"-[0-9]+$")
# How much of a split manual's main file is read for its encoding: the preamble and the tables of parts and tags.
_MAIN_FILE_BYTES = 4 << 20


class InfoManual(FileFormat):
    name = "GNU Info"
    suffixes = (".info",)
    numbered_parts = True  # gnupg.info-2: a part of a split manual

    def read(self, file: Path, root: str, options: ReadOptions, log: ReadLog) -> Iterator[SourceDocument]:
        if not within_size(file, options, log):
            return
        data = _MARKER.sub(_marker_kept, file.read_bytes())
        text = _decoded_as_declared(data, _declared_coding(data) or _main_file_coding(Path(log.shown(file))))
        if text is None:
            decoded = checked_text(file, data, options, log)
            if decoded is None:
                return
            text = decoded.text
        nodes = list(info_nodes(text))
        for n, (name, body) in enumerate(nodes, start=1):
            log.document_span = ((n - 1) / len(nodes), n / len(nodes))
            yield SourceDocument(
                f"{file.as_posix()}:{name}",
                body,
                {"source": str(file), "file_name": file.name, NODE_KEY: name},
                str(file),
                root,
            )


def _declared_coding(data: bytes) -> str | None:
    """The encoding an Info file names (``coding: iso-8859-1`` in its closing ``Local Variables``), else None."""
    match = _CODING.search(data, max(0, len(data) - 4096))
    return match.group(1).decode("ascii") if match else None


def _main_file_coding(part: Path) -> str | None:
    """The encoding the main file of a split manual names, read beside ``part`` (``gnupg.info-2.gz``: its
    ``gnupg.info.gz``, or the main file compressed otherwise or not at all); None for a file that is no numbered
    part, or whose main file is missing or names none."""
    compression = part.suffix if part.suffix.lower() in CompressedFile.suffixes else ""
    stem = part.name.removesuffix(compression)
    if not _PART.search(stem):
        return None
    main = _PART.sub("", stem)
    for suffix in ("", *CompressedFile.suffixes):
        candidate = part.with_name(main + suffix)
        try:
            if suffix:
                data = compressed_head(candidate, _MAIN_FILE_BYTES)
            else:
                with candidate.open("rb") as handle:
                    data = handle.read(_MAIN_FILE_BYTES)
        except OSError:
            continue
        return _declared_coding(data)
    return None


def _decoded_as_declared(data: bytes, coding: str | None) -> str | None:
    """``data`` in the encoding the manual names; None where it names none (or UTF-8, or one Python does not know),
    holds NUL bytes or is not valid in it: then the text is sniffed, and bytes replaced are warned of, as any text
    file's."""
    try:
        codec = codecs.lookup(coding) if coding else None
    except LookupError:
        return None
    if codec is None or codec.name == "utf-8" or b"\x00" in data:
        return None
    try:
        return data.decode(codec.name)
    except UnicodeDecodeError:
        return None


def _marker_kept(match: re.Match[bytes]) -> bytes:
    """An index node keeps its marker, as text with no NUL byte, to be known and left out; other markers (images)
    go."""
    return b"\x1a[index]" if match.group(0) == _INDEX_MARKER else b""


def info_nodes(text: str) -> Iterator[tuple[str, str]]:
    """The ``(node name, text)`` of each node of an Info file's text (index markers as ``_marker_kept`` leaves
    them), in order; index and licence nodes, nodes of headings alone and everything that is not a node (the
    preamble, the table of a split manual's parts, the tag table) left out."""
    for part in text.split(_SEPARATOR):
        header, _, body = part.lstrip("\n").partition("\n")
        match = _HEADER.match(header)
        if match is None or "\x1a[index]" in body:
            continue
        name = match.group(1).strip()
        text = node_text(body)
        # A chapter's node may hold its heading and a menu alone: nothing of its own to find.
        if not _LICENCE.match(name) and any(line and not line.startswith("#") for line in text.split("\n")):
            yield name, text


def node_text(body: str) -> str:
    """A node's text as it is embedded: its menu left out, its headings in Markdown, its cross-references as
    words."""
    menu = _MENU.search(body)
    if menu is not None:
        body = body[: menu.start()]
    body = _HEADING.sub(_heading, body)
    body = _NOTE_NODE.sub(lambda m: _reference(m, ""), body)
    body = _NOTE_LABEL.sub(lambda m: _reference(m, m.group(3)), body)
    return body.strip()


def _heading(match: re.Match[str]) -> str:
    title, mark = match.group(1).rstrip(), match.group(2)
    line, rule = match.group(0).split("\n")
    if len(rule.rstrip()) != len(title):
        # A rule of another length is a line of the text, not a heading's underline; in the Markdown a node is read
        # as, a line of "-" or "=" right under text would underline it, so a blank line keeps it a rule.
        return f"{line}\n\n{rule}" if mark in "-=" else match.group(0)
    return f"{_LEVELS[mark]} {title}"


def _reference(match: re.Match[str], end: str) -> str:
    """A cross-reference as words: ``see NAME``, and the punctuation that ended it (``end``) where it is the
    sentence's. Not "see" again after the text's own ("See *note Installing: 4." reads "See Installing"), and no
    period where makeinfo put one only because a reference must end in one, mid-sentence ("*note Installing: 4.
    to try it", as Sphinx's texinfo output has it)."""
    text, start = match.string, match.start()
    see = "" if _SEE_BEFORE.search(text, max(0, start - 16), start) else ("See " if match.group(1) == "N" else "see ")
    if end == "." and _LOWER_AFTER.match(text, match.end()):
        end = ""
    return f"{see}{match.group(2)}{end}"


# The text's own "see" just before a reference, and a sentence going on after one (a lower-case word next).
_SEE_BEFORE = re.compile(r"\b[Ss]ee[ \t\n]+\Z")
_LOWER_AFTER = re.compile(r"[ \t\n]+[a-z]")
