"""Build a folder of real documentation text from what is installed with Python, as training text for the
decoder: Markdown pages to turn into pseudo-pairs (a heading against its section, a sentence against the
rest of its chunk) with ``format: corpus``.

Two kinds of text, both documentation and neither a benchmark's:
- every installed distribution's long description (its README on the package index), one page each;
- the standard library's docstrings: a module's, and each public class's and function's of at least
  ``--min-chars`` characters, one page per module (``# module``, then ``## module.name`` per member);
- with ``--package NAME`` (repeatable), the same for an installed package's public modules: its API reference,
  at most ``--max-modules`` modules a package (shallowest first) and ``--max-page-chars`` a page.

Nothing is read from man pages or dictionaries (``bench/ood`` scores on those); the folder is never a test set.
The same installed versions give the same bytes.

    python experiments/build_docs_corpus.py --out runs/docs-corpus
    python experiments/build_docs_corpus.py --out runs/docs-corpus-api --package numpy --package sqlalchemy
"""

from __future__ import annotations

import argparse
import email.message
import importlib
import importlib.util
import inspect
import pkgutil
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


def module_page(mod_name: str, min_chars: int, max_chars: int | None = None) -> str | None:
    """A module's page: its docstring, then each documented public member's; None when it has none or fails to
    import. ``max_chars`` keeps the parts, in order, while they fit (the first always)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            module = importlib.import_module(mod_name)
    except Exception:  # noqa: BLE001 - platform-specific or optional-dependency modules are absent here
        return None
    parts = []
    doc = inspect.getdoc(module) or ""
    if len(doc) >= min_chars:
        parts.append(doc)
    for name, member_doc in _members(module, min_chars):
        parts.append(f"## {mod_name}.{name}\n\n{member_doc}")
    header = page = f"# {mod_name}\n\n"
    for part in parts:
        if max_chars is not None and page != header and len(page) + len(part) > max_chars:
            break
        page += part + "\n\n"
    return page.rstrip("\n") + "\n" if parts else None


def stdlib_pages(min_chars: int) -> dict[str, str]:
    """One page per standard-library module with a docstring or documented members."""
    pages: dict[str, str] = {}
    for mod_name in sorted(sys.stdlib_module_names):
        if mod_name in _SKIP or mod_name.startswith("_"):
            continue
        page = module_page(mod_name, min_chars)
        if page:
            pages[f"stdlib/{_slug(mod_name)}.md"] = page
    return pages


def _public_modules(package: str) -> list[str]:
    """The package and its public submodules (no ``_private`` or test modules), shallowest first."""
    names = [package]
    spec = importlib.util.find_spec(package)
    if spec is not None and spec.submodule_search_locations:
        for info in pkgutil.walk_packages(
            spec.submodule_search_locations, prefix=f"{package}.", onerror=lambda _: None
        ):
            parts = info.name.split(".")
            if any(p.startswith("_") or p in {"tests", "test", "testing", "conftest"} for p in parts):
                continue
            names.append(info.name)
    return sorted(names, key=lambda n: (n.count("."), n))


def package_api_pages(packages: list[str], min_chars: int, max_modules: int, max_chars: int) -> dict[str, str]:
    """One page per public module of each package (its API reference), ``max_modules`` modules a package at most."""
    pages: dict[str, str] = {}
    for package in packages:
        if importlib.util.find_spec(package) is None:
            raise SystemExit(f"--package {package}: not installed in this environment (pip install {package})")
        kept = 0
        for mod_name in _public_modules(package):
            if kept >= max_modules:
                break
            page = module_page(mod_name, min_chars, max_chars)
            if page:
                pages[f"api/{_slug(mod_name)}.md"] = page
                kept += 1
    return pages


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True, help="folder to write (made if missing)")
    parser.add_argument("--min-chars", type=int, default=300, help="shortest description or docstring kept")
    parser.add_argument("--package", action="append", default=[], help="also an installed package's API docstrings")
    parser.add_argument("--max-modules", type=int, default=40, help="modules of each --package at most")
    parser.add_argument("--max-page-chars", type=int, default=20_000, help="characters of a --package page at most")
    args = parser.parse_args()
    pages = {**package_pages(args.min_chars * 2), **stdlib_pages(args.min_chars)}
    pages |= package_api_pages(args.package, args.min_chars, args.max_modules, args.max_page_chars)
    for rel, text in sorted(pages.items()):
        path = args.out / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    chars = sum(len(t) for t in pages.values())
    kinds = {k: sum(1 for r in pages if r.startswith(k)) for k in ("packages/", "stdlib/", "api/")}
    print(f"{len(pages)} pages ({kinds}), {chars / 1e6:.1f} M characters -> {args.out}")


if __name__ == "__main__":
    main()
