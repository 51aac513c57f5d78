"""The integration packages build on c2v_rag's public surface only: the names of ``c2v_rag`` itself. A move
inside the library then never breaks them. Every import of c2v_rag in their sources is read, at any depth
(functions, TYPE_CHECKING blocks)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PUBLIC = {"c2v_rag"}


def _imports(path: Path) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.lineno, node.module))
        elif isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
    return [(line, name) for line, name in found if name == "c2v_rag" or name.startswith("c2v_rag.")]


SOURCES = sorted(path for path in (REPO / "integrations").rglob("*.py") if "tests" not in path.relative_to(REPO).parts)


def test_the_packages_have_sources_that_import_c2v_rag():
    # The scan below reads something: both packages, and imports of c2v_rag in them.
    assert {p.relative_to(REPO).parts[1] for p in SOURCES} == {
        "langchain-causal2vec",
        "llama-index-embeddings-causal2vec",
    }
    assert sum(len(_imports(p)) for p in SOURCES) >= 4


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(REPO / "integrations")))
def test_integration_sources_import_only_the_public_api(path):
    private = [f"{path.name}:{line} imports {name}" for line, name in _imports(path) if name not in PUBLIC]
    assert not private, f"import these from c2v_rag (its facade, c2v_rag/__init__.py) instead: {private}"


def test_the_scan_catches_a_private_import(tmp_path):
    source = tmp_path / "module.py"
    source.write_text("def f():\n    from c2v_rag.store.point_schema import metadata_field\n")
    assert _imports(source) == [(2, "c2v_rag.store.point_schema")]


def test_every_name_the_packages_import_is_public():
    import c2v_rag

    imported = set()
    for path in SOURCES:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module == "c2v_rag":
                imported.update(alias.name for alias in node.names)
    assert imported and imported <= set(c2v_rag.__all__)
    assert all(getattr(c2v_rag, name) is not None for name in imported)
