"""Every ``c2v-rag`` command the README and the guides show parses: a flag renamed or a value the parser refuses
(``--truncate-dim None``, which an error once suggested) fails here, not for a reader.

Only parsed, not run: running them takes the real weights and minutes (run them by hand from a fresh clone
with a fresh HOME to check them end to end).
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from c2v_rag.cli.app import build_parser

ROOT = Path(__file__).resolve().parents[2]
PAGES = ["README.md", "docs/getting-started.md", "docs/ingest-and-search.md", "docs/serving.md"]


def shown_commands() -> list[tuple[str, str]]:
    """(page, command) for each ``c2v-rag`` command in a page's bash blocks, continuation lines joined and
    comments and redirections dropped; commands with optional parts in brackets (a synopsis, not a command) are
    left out."""
    found = []
    for page in PAGES:
        for block in re.findall(r"```bash\n(.*?)```", (ROOT / page).read_text(encoding="utf-8"), flags=re.S):
            for line in block.replace("\\\n", " ").splitlines():
                for part in re.split(r"&&|;", line):
                    words = shlex.split(part, comments=True)
                    if words[:1] == ["c2v-rag"] or words[1:2] == ["c2v-rag"]:  # VAR=value c2v-rag ...
                        words = words[words.index("c2v-rag") + 1 :]
                        # The command's own words end where the shell's begin: a redirection or a pipe.
                        shell = [i for i, w in enumerate(words) if w in {"<", ">", ">>", "2>", "|"}]
                        words = words[: shell[0]] if shell else words
                        if not any(w.startswith("[") for w in words):
                            found.append((page, shlex.join(words)))
    return found


COMMANDS = shown_commands()


def test_the_pages_show_commands():
    assert len(COMMANDS) > 20 and any("--filter" in c for _, c in COMMANDS)


@pytest.mark.parametrize(("page", "command"), COMMANDS, ids=[f"{p}: {c[:60]}" for p, c in COMMANDS])
def test_a_shown_command_parses(page, command):
    try:
        build_parser().parse_args(shlex.split(command))
    except SystemExit as exit:
        if exit.code != 0:  # --help exits 0
            pytest.fail(f"{page}: `c2v-rag {command}` does not parse")
