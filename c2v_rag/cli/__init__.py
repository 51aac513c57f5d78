"""The ``c2v-rag`` command line: :func:`main` runs it, :func:`build_parser` builds its parser."""

from c2v_rag.cli.app import build_parser, main

__all__ = ["build_parser", "main"]
