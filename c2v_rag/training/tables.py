"""Delimited text files (TSV, CSV) as rows: the one reader of the training data loaders and of ``--data``'s format
detection."""

from __future__ import annotations

import csv
from pathlib import Path

_HEADER_NAMES = {
    "anchor",
    "positive",
    "negative",
    "query",
    "passage",
    "pos",
    "neg",
    "question",
    "answer",
    "sentence1",
    "sentence2",
    "text",
    "label",
    "category",
    "label_name",
    "premise",
    "hypothesis",
    "score",
    "genre",
    "subset",
}


def _sniff_delimiter(path: Path, first_line: str) -> str:
    if path.suffix.lower() == ".tsv":
        return "\t"
    counts = {d: first_line.count(d) for d in ("\t", ",", ";", "|")}
    best = max(counts, key=counts.__getitem__)
    if counts[best] == 0:
        raise ValueError(f"{path}: cannot tell the column delimiter; set 'delimiter' in the dataset section")
    return best


def read_rows(path: Path, delimiter: str | None, has_header: bool | None) -> tuple[list[str] | None, list[list[str]]]:
    """(header or None, rows) of a delimited text file; the header is detected from its names."""
    with path.open(encoding="utf-8", newline="") as handle:
        first = handle.readline()
        handle.seek(0)
        delimiter = delimiter or _sniff_delimiter(path, first)
        # TSV text is rarely quoted, and sentences hold stray quote marks; CSV follows RFC 4180.
        reader = csv.reader(
            handle, delimiter=delimiter, quoting=csv.QUOTE_NONE if delimiter == "\t" else csv.QUOTE_MINIMAL
        )
        rows = [row for row in reader if row]
    if not rows:
        return None, []
    if has_header is None:
        has_header = all(cell.strip().lower() in _HEADER_NAMES for cell in rows[0])
    return (rows[0], rows[1:]) if has_header else (None, rows)
