"""One page in several formats in one folder: which copy a folder walk reads.

Documentation often ships as its source and as what was made of it side by side: Node.js's API pages as ``fs.md``
beside ``fs.html``, a FAQ as ``FAQ.txt`` beside ``FAQ.html``, a paper as ``paper.tex`` beside ``paper.pdf``. Read
both, and every search finds such a page twice: its second copy takes a place among the results, and among the
candidates a reranker reads. Files of one folder whose names differ only in a format's suffix (a compressed file's
inner one: ``FAQ.txt.gz``; documentation named without one, ``README``, as plain text) are taken for one page, and
the copy whose format ranks first (:attr:`~c2v_rag.documents.formats.base.FileFormat.page_rank`) is read. Copies
of the same rank are all read (``guide.md`` beside ``guide.rst`` may say different things), and so are files read
as plain text by ``text_suffixes`` (``parse.py`` is no copy of ``parse.html``).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from c2v_rag.documents.formats.archives import COMPRESSED_SUFFIXES
from c2v_rag.documents.formats.registry import AS_TEXT, format_for_suffix, is_documentation_name


def page_of(file: Path) -> tuple[Path, int] | None:
    """The page ``file`` is a copy of (its folder and its name less the format's suffix) and its format's rank, or
    None where its format has no rank (a table, an archive) or only ``text_suffixes`` reads it."""
    inner = Path(file.stem) if file.suffix.lower() in COMPRESSED_SUFFIXES else Path(file.name)
    suffix = inner.suffix.lower()
    if suffix:
        fmt = format_for_suffix(suffix)
        name = inner.stem
    else:  # README, INSTALL: documentation read as plain text by its name
        fmt = AS_TEXT if is_documentation_name(inner.name) else None
        name = inner.name
    if fmt is None or fmt.page_rank is None:
        return None
    return file.parent / name, fmt.page_rank


def copies_in_other_formats(files: Iterable[Path]) -> dict[Path, Path]:
    """Of ``files``, each that is a lower-ranked copy of a page another of them holds, with the copy read in its
    place (of the best rank, the first by path)."""
    pages: dict[Path, list[tuple[int, Path]]] = {}
    for file in files:
        page = page_of(file)
        if page is not None:
            pages.setdefault(page[0], []).append((page[1], file))
    left_out: dict[Path, Path] = {}
    for copies in pages.values():
        best = min(rank for rank, _ in copies)
        read = min(file for rank, file in copies if rank == best)
        left_out.update({file: read for rank, file in copies if rank > best})
    return left_out
