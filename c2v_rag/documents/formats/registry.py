"""Which format reads a file, by its suffix: the lookup that the folder walk and the readers of files inside files
(archives, mail attachments) share.

The formats are registered by :mod:`c2v_rag.documents.formats` (its ``FORMATS``); this module imports none of them
but plain text, so that a format that hands inner files on to other formats can look them up here without
importing the package that lists it.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable
from pathlib import Path

from c2v_rag.documents.formats.base import FileFormat
from c2v_rag.documents.formats.text import PlainText

# What text_suffixes read: files of other suffixes as plain text (source code, logs, configuration).
AS_TEXT = PlainText()

_BY_SUFFIX: dict[str, FileFormat] = {}
# Files that projects name for their documentation without a suffix (README, INSTALL, FAQ, as GNU and older projects
# write them), read as plain text; a README with a suffix no format reads too (README.Debian, README.1st). Not:
# licences (COPYING, LICENSE, Debian's copyright), whose same legal text in every folder would answer any question;
# lists of names (AUTHORS, THANKS); and change logs (ChangeLog, NEWS), each release's lines, which a Debian system
# holds 500 of (/usr/share/doc/*/changelog.gz). Their suffixed forms (CHANGELOG.md) are read as their format.
DOCUMENTATION_NAMES = frozenset(
    {"readme", "install", "faq", "todo", "hacking", "contributing", "bugs", "notes", "usage"}
)  # fmt: skip


def register(formats: Iterable[FileFormat]) -> None:
    """Make ``formats`` the ones :func:`format_of` finds, each by its suffixes."""
    _BY_SUFFIX.clear()
    _BY_SUFFIX.update({suffix: fmt for fmt in formats for suffix in fmt.suffixes})


def format_for_suffix(suffix: str) -> FileFormat | None:
    """The format registered for ``suffix`` (lower case, with its dot), whether or not it reads a given file."""
    return _BY_SUFFIX.get(suffix)


def format_of(path: Path, text_suffixes: Collection[str] = ()) -> FileFormat | None:
    """The format that reads ``path``, by its suffix: a format's own (where it accepts the file: a compressed file
    by the suffix under it, a shared suffix by the file's first bytes), else plain text for one of ``text_suffixes``
    (checked by :func:`~c2v_rag.documents.formats.checked_text_suffixes`) or for documentation by its name
    (:func:`is_documentation_name`); None: not one ingest reads."""
    suffix = path.suffix.lower()
    fmt = _BY_SUFFIX.get(suffix) or _numbered_part_format(suffix)
    if fmt is None:
        return AS_TEXT if suffix in text_suffixes or is_documentation_name(path.name) else None
    if fmt.accepts(path, text_suffixes):
        return fmt
    return AS_TEXT if suffix in fmt.shared_suffixes and suffix in text_suffixes else None


# The suffix of a numbered part of a split file: .info-2.
_NUMBERED_PART = re.compile(r"(\.[a-z]+)-[0-9]+")


def _numbered_part_format(suffix: str) -> FileFormat | None:
    """The format of a split file's numbered part (``.info-2``), where its format reads such parts."""
    match = _NUMBERED_PART.fullmatch(suffix)
    fmt = _BY_SUFFIX.get(match.group(1)) if match else None
    return fmt if fmt is not None and fmt.numbered_parts else None


def is_documentation_name(name: str) -> bool:
    """Whether a file named ``name``, whose suffix no format reads, is documentation read as plain text
    (:data:`DOCUMENTATION_NAMES`: ``README``, ``INSTALL``; ``README.Debian``)."""
    stem, dot, _ = name.partition(".")
    return stem.casefold() in DOCUMENTATION_NAMES and (not dot or stem.casefold() == "readme")
