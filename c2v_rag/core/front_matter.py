"""A text's YAML front matter: the ``---`` lines around ``key: value`` pairs that Jekyll, Hugo, MkDocs, Obsidian and
the Hugging Face Hub's model cards open Markdown with. Where it is, not what it means: the Markdown reader turns its
fields into metadata, a published model card puts its own in its place."""

from __future__ import annotations

import re

# A first line of ---, YAML, and a line of --- (or ...) that closes it, with either line ending.
_FRONT_MATTER = re.compile(r"\A---[ \t]*\r?\n(.*?)^(?:---|\.\.\.)[ \t]*(?:\r?\n|\Z)", re.DOTALL | re.MULTILINE)


def split_front_matter(text: str) -> tuple[str | None, str]:
    """``(the front matter's YAML source, the text after it)``, blank lines after it dropped; ``(None, text)`` where
    the text opens with none."""
    match = _FRONT_MATTER.match(text)
    if match is None:
        return None, text
    return match.group(1), text[match.end() :].lstrip("\r\n")
