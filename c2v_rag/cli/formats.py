"""``c2v-rag formats``: the file formats ingest, embed and adapt read, and whether each one's reader is installed."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from c2v_rag.cli.arguments import Subparsers


def add_parser(subparsers: Subparsers) -> argparse.ArgumentParser:
    return subparsers.add_parser("formats", help="list the file formats read, and the extra each one needs")


def run(args: argparse.Namespace) -> int:
    """Print each format: its name, its suffixes, and ``ready`` or the command that installs its reader."""
    from c2v_rag.core.extras import extra_command, missing_requirements
    from c2v_rag.documents.formats import FORMATS
    from c2v_rag.documents.formats.registry import DOCUMENTATION_NAMES

    names = max(len(fmt.name) for fmt in FORMATS)
    suffixes = max(len(" ".join(fmt.suffixes)) for fmt in FORMATS)
    for fmt in FORMATS:
        absent = [r for r in fmt.requires if missing_requirements([r], fmt.name) is not None]
        status = f"needs {extra_command(absent[0].extra)}" if absent else "ready"
        print(f"{fmt.name:{names}s}  {' '.join(fmt.suffixes):{suffixes}s}  {status}")
    names_read = ", ".join(sorted(name.upper() for name in DOCUMENTATION_NAMES))
    print(f"\nAs plain text too: {names_read} without a suffix, and README.* (README.Debian).")
    print(
        "Other suffixes are read as plain text when named: --text-suffix .py, and --text-suffix '' for every file "
        "without a suffix (text_suffixes=[...] in Python)."
    )
    return 0
