"""The ``c2v-rag`` command line."""

from c2v_rag.cli.app import build_parser, main

__all__ = ["build_parser", "main"]
