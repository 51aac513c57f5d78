"""experiments/build_docs_corpus.py: the broader training text is real documentation from this Python, one page per
package or module, with the headings adapt's pseudo-pairs read."""

from __future__ import annotations

import inspect
import json
import subprocess
import sys
from pathlib import Path

from script_loading import load_script

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "experiments" / "build_docs_corpus.py"


def _load():
    return load_script(SCRIPT, "build_docs_corpus")


def test_stdlib_page_holds_each_documented_member_under_its_own_heading():
    pages = _load().stdlib_pages(300)
    page = pages["stdlib/json.md"]
    assert page.startswith("# json\n\n")
    # independent of the builder: the docstring inspect gives for json.dumps sits under its heading
    assert f"## json.dumps\n\n{inspect.getdoc(json.dumps)}" in page
    assert not any(rel.startswith("stdlib/tkinter") or rel.startswith("stdlib/_") for rel in pages)


def test_cli_writes_package_readmes_and_is_repeatable(tmp_path):
    for out in (tmp_path / "a", tmp_path / "b"):
        result = subprocess.run(
            [sys.executable, str(SCRIPT), "--out", str(out)], capture_output=True, text=True, check=True
        )
        assert "pages" in result.stdout
    a = {p.relative_to(tmp_path / "a"): p.read_bytes() for p in (tmp_path / "a").rglob("*.md")}
    b = {p.relative_to(tmp_path / "b"): p.read_bytes() for p in (tmp_path / "b").rglob("*.md")}
    assert a == b and len(a) > 50
    # pydantic is a dependency, and its README is long: it must be one of the package pages
    assert Path("packages/pydantic.md") in a


def _parts(page: str | None) -> tuple[str, list[str]]:
    """A page's header line and its parts (the module's docstring or a member's section), split at the headings."""
    assert page is not None
    header, body = page.split("\n\n", 1)
    first, *members = body.rstrip("\n").split("\n\n## ")
    return header, [first] + ["## " + member for member in members]


def _join(header: str, parts: list[str]) -> str:
    return header + "\n\n" + "\n\n".join(parts) + "\n"


def test_package_api_pages_hold_public_modules_docstrings_within_the_caps():
    import click.core

    builder = _load()
    pages = builder.package_api_pages(["click"], 300, max_modules=3, max_chars=5_000)
    names = [rel.removeprefix("api/").removesuffix(".md") for rel in pages]
    # click's own __init__ documents nothing of its own (its members are click.core's): the first pages are the
    # shallowest submodules, in name order
    assert names == sorted(names) and len(names) == 3 and all(name.startswith("click.") for name in names)
    assert not any(part.startswith("_") for name in names for part in name.split("."))
    # the cap keeps whole parts, in order, while the text fits, and the first part always: each capped page is the
    # uncapped one cut at a part boundary, and the next part would have taken it past the cap
    for rel, page in pages.items():
        header, parts = _parts(builder.module_page(rel.removeprefix("api/").removesuffix(".md"), 300))
        kept = next(k for k in range(1, len(parts) + 1) if page == _join(header, parts[:k]))
        assert kept == 1 or len(page.rstrip("\n")) <= 5_000
        assert kept == len(parts) or len(_join(header, parts[: kept + 1]).rstrip("\n")) > 5_000
    # at the boundary itself: a cap of exactly k parts' length keeps k parts, one character less keeps k - 1
    header, parts = _parts(builder.module_page("click.decorators", 300))
    assert len(parts) >= 4
    for k in (2, 3):
        cap = len(_join(header, parts[:k]).rstrip("\n"))
        assert builder.module_page("click.decorators", 300, cap) == _join(header, parts[:k])
        assert builder.module_page("click.decorators", 300, cap - 1) == _join(header, parts[: k - 1])
    assert builder.module_page("click.decorators", 300, 10) == _join(header, parts[:1])
    # click.core's page holds Context's docstring under its own heading, as inspect gives it
    page = builder.module_page("click.core", 300)
    assert page is not None and f"## click.core.Context\n\n{inspect.getdoc(click.core.Context)}" in page


def test_a_package_that_is_not_installed_is_named_in_the_error():
    import pytest

    with pytest.raises(SystemExit, match="--package no_such_pkg_xyz: not installed"):
        _load().package_api_pages(["no_such_pkg_xyz"], 300, max_modules=3, max_chars=5_000)
