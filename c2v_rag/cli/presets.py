"""``c2v-rag presets``: the variants shipped with the package, by the names ``--model`` takes."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from c2v_rag.cli.arguments import Subparsers


def add_parser(subparsers: Subparsers) -> argparse.ArgumentParser:
    return subparsers.add_parser("presets", help="list the shipped presets")


def run(args: argparse.Namespace) -> int:
    """Print one preset name a line, the default one marked."""
    from c2v_rag.hub.presets import DEFAULT_PRESET, list_presets

    for name in list_presets():
        print(name + ("  (default)" if name == DEFAULT_PRESET else ""))
    return 0
