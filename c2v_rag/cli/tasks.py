"""``c2v-rag tasks``: the registered tasks, whose instructions ``--task`` names."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from c2v_rag.cli.arguments import Subparsers


def add_parser(subparsers: Subparsers) -> argparse.ArgumentParser:
    return subparsers.add_parser("tasks", help="list the registered task instructions")


def run(args: argparse.Namespace) -> int:
    """Print each task: its name, kind, which inputs get the instruction, the instruction, its examples."""
    from c2v_rag.core.instructions import list_tasks

    for task in list_tasks():
        side = "all inputs" if task.symmetric else "queries only"
        print(f"{task.name:40s} {task.kind.value:20s} {side:13s} {task.instruction}")
        for query, response in task.examples:  # in-context examples (register_task(..., examples=...))
            print(f"{'':40s} example: {query!r} -> {response!r}")
    return 0
