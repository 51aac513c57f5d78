"""``--dry-run`` of ``ingest`` and ``embed``: the files a run would read, from the listing alone."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from c2v_rag.cli.errors import EXIT_OK

if TYPE_CHECKING:
    from c2v_rag.rag.ingestion.config import IngestConfig


def print_dry_run(paths: list[Path], config: IngestConfig, *, listed: bool) -> int:
    """Print the files a run over ``paths`` would read (each with its size, unless not ``listed``: -q) and a
    summary of them by format and of what it would leave out, from the listing alone (the checks a run makes
    before its model loads: a missing path, a folder with nothing to read, a missing package)."""
    from collections import Counter

    from c2v_rag.core.wording import counted, one_line, size_in_words
    from c2v_rag.documents.files import ReadLog, list_source, not_read_words
    from c2v_rag.documents.formats import format_of

    log, options = ReadLog(), config.read_options()
    files = [file for path in paths for file in list_source(path, options, log)[1]]
    count: Counter[str] = Counter()
    size: Counter[str] = Counter()
    for file in files:
        on_disk = file.stat().st_size
        kind = format_of(file, options.text_suffixes)
        name = kind.name if kind is not None else file.suffix
        count[name] += 1
        size[name] += on_disk
        if listed:
            print(f"{size_in_words(on_disk):>11}  {one_line(str(file))}")
    kinds = ", ".join(f"{name} {count[name]} ({size_in_words(size[name])})" for name, _ in count.most_common())
    parts = [f"would read {counted(len(files), 'file')}, {size_in_words(sum(size.values()))}: {kinds or 'none'}"]
    parts += [words for words in [not_read_words(log.not_read)] if words]
    if log.excluded:
        parts.append(f"left out by --exclude: {counted(log.excluded, 'file or folder', 'files and folders')}")
    if log.other_format_copies:
        parts.append(f"left out as copies of pages read in another format: {counted(log.other_format_copies, 'file')}")
    if log.files_skipped:
        parts.append(f"skipped: {counted(log.files_skipped, 'file')} (the warnings above)")
    print("; ".join(parts) + ". Nothing was read, embedded or stored (--dry-run)")
    return EXIT_OK
