"""Build a folder of real documentation text from what is installed with Python, as training text for the
decoder: Markdown pages to turn into pseudo-pairs (a heading against its section, a sentence against the
rest of its chunk) with ``format: corpus``.

Two kinds of text, both documentation and neither a benchmark's:
- every installed distribution's long description (its README on the package index), one page each;
- the standard library's docstrings: a module's, and each public class's and function's of at least
  ``--min-chars`` characters, one page per module (``# module``, then ``## module.name`` per member).

Nothing is read from man pages or dictionaries (``bench/ood`` scores on those); the folder is never a test set.
The same installed versions give the same bytes.

    python experiments/build_docs_corpus.py --out runs/docs-corpus
"""

from __future__ import annotations

import argparse
import email.message
import importlib
import inspect
import re
import sys
import warnings
from importlib import metadata
from pathlib import Path
from types import ModuleType

# Modules that open windows, print, start servers or are aliases when imported (private ones are skipped anyway).
_SKIP = {"antigravity", "this", "idlelib", "tkinter", "turtle", "turtledemo", "pydoc_data", "lib2to3"}


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-").lower() or "page"


def package_pages(min_chars: int) -> dict[str, str]:
    """One page per installed distribution with a long description of at least ``min_chars``."""
    pages: dict[str, str] = {}
    for dist in metadata.distributions():
        meta = dist.metadata
        if not isinstance(meta, email.message.Message):  # what importlib.metadata returns: an email message
            continue
        name = meta.get("Name")
        if not name:
            continue
        payload = meta.get_payload()
        body = ((payload if isinstance(payload, str) else "") or meta.get("Description") or "").strip()
        if len(body) < min_chars:
            continue
        summary = (meta.get("Summary") or "").strip()
        title = f"# {name}\n\n{summary}\n\n" if summary and not body.lstrip().startswith("#") else ""
        pages.setdefault(f"packages/{_slug(name)}.md", f"{title}{body}\n")
    return pages


def _members(module: ModuleType, min_chars: int) -> list[tuple[str, str]]:
    out = []
    for name, value in sorted(vars(module).items()):
        documented = inspect.isclass(value) or inspect.isfunction(value) or inspect.isbuiltin(value)
        if name.startswith("_") or not documented:
            continue
        if getattr(value, "__module__", None) != module.__name__:
            continue
        doc = inspect.getdoc(value) or ""
        if len(doc) >= min_chars:
            out.append((name, doc))
    return out


def stdlib_pages(min_chars: int) -> dict[str, str]:
    """One page per standard-library module with a docstring or documented members."""
    pages: dict[str, str] = {}
    for mod_name in sorted(sys.stdlib_module_names):
        if mod_name in _SKIP or mod_name.startswith("_"):
            continue
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                module = importlib.import_module(mod_name)
        except Exception:  # noqa: BLE001 - platform-specific modules (winreg, msvcrt, ...) are absent here
            continue
        parts = []
        doc = inspect.getdoc(module) or ""
        if len(doc) >= min_chars:
            parts.append(doc)
        for name, member_doc in _members(module, min_chars):
            parts.append(f"## {mod_name}.{name}\n\n{member_doc}")
        if parts:
            pages[f"stdlib/{_slug(mod_name)}.md"] = f"# {mod_name}\n\n" + "\n\n".join(parts) + "\n"
    return pages


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True, help="folder to write (made if missing)")
    parser.add_argument("--min-chars", type=int, default=300, help="shortest description or docstring kept")
    args = parser.parse_args()
    pages = {**package_pages(args.min_chars * 2), **stdlib_pages(args.min_chars)}
    for rel, text in sorted(pages.items()):
        path = args.out / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    chars = sum(len(t) for t in pages.values())
    kinds = {k: sum(1 for r in pages if r.startswith(k)) for k in ("packages/", "stdlib/")}
    print(f"{len(pages)} pages ({kinds}), {chars / 1e6:.1f} M characters -> {args.out}")


if __name__ == "__main__":
    main()
