"""The import architecture of c2v_rag: imports go one way, down the layers, and never in a circle.

The layers are defined once, in pyproject.toml's ``[tool.importlinter]``; ``lint-imports`` checks the same
contract from the command line. Every import counts, as in grimp's graph: those inside functions and
under ``if TYPE_CHECKING:`` too, since a lazy upward import still ties a lower module to a higher one.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import grimp
import pytest
from importlinter import api
from importlinter.contracts.layers import LayerField

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"
PACKAGE = "c2v_rag"
# The layers that build on the model; nothing in the layers below them may reach up into them.
APPLICATIONS = ("c2v_rag.rag", "c2v_rag.serving", "c2v_rag.training")


@pytest.fixture(scope="module")
def graph():
    return grimp.build_graph(PACKAGE, cache_dir=None)


def layer_modules() -> list[set[str]]:
    """The layers of pyproject.toml's layers contract, top first, as sets of module names under c2v_rag."""
    contracts = api.read_configuration(str(PYPROJECT))["contracts_options"]
    (contract,) = [c for c in contracts if c["id"] == "layers"]
    layers = [LayerField().parse(raw) for raw in contract["layers"]]
    return [{f"{PACKAGE}.{tail.name}" for tail in layer.module_tails} for layer in layers]


def import_cycles(graph) -> list[list[str]]:
    """The strongly connected sets of modules (two or more) in ``graph``: modules that import each other,
    directly or through others. A module's set is what it imports (at any distance) that also imports it."""
    cycles: list[list[str]] = []
    placed: set[str] = set()
    for module in sorted(graph.modules):
        if module in placed:
            continue
        circle = graph.find_upstream_modules(module) & graph.find_downstream_modules(module)
        if circle:
            members = sorted(circle | {module})
            placed.update(members)
            cycles.append(members)
    return cycles


def test_the_layers_contract_is_kept():
    # In a subprocess: import-linter's CLI configures logging with dictConfig, which would disable the
    # loggers of every module imported before it (and the log assertions of later tests in this process).
    run = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from importlinter.cli import lint_imports; "
            f"sys.exit(lint_imports(config_filename={str(PYPROJECT)!r}, no_cache=True, no_logo=True))",
        ],
        capture_output=True,
        text=True,
        cwd=PYPROJECT.parent,
        check=False,
    )
    assert run.returncode == 0, (
        f"an import goes up the layers of pyproject.toml's [tool.importlinter]:\n{run.stdout}{run.stderr}"
    )


def test_no_module_imports_another_in_a_circle(graph):
    cycles = import_cycles(graph)
    assert not cycles, "modules that import each other (directly or through others):\n" + "\n".join(
        f"  {len(cycle)}: {', '.join(cycle)}" for cycle in cycles
    )


def test_no_module_imports_the_package_root(graph):
    # The root is the facade; a module that imports it would depend on everything it re-exports.
    lines = [
        f"  {d['importer']}:{d['line_number']}: {d['line_contents']}"
        for importer in sorted(graph.find_modules_that_directly_import(PACKAGE))
        for d in graph.get_import_details(importer=importer, imported=PACKAGE)
    ]
    assert not lines, f"import from the module that defines the name, not from {PACKAGE}:\n" + "\n".join(lines)


def test_the_layers_below_rag_reach_no_application(graph):
    layers = layer_modules()
    below = [
        module
        for index, layer in enumerate(layers)
        if f"{PACKAGE}.rag" in layer
        for lower in layers[index + 1 :]
        for module in lower
    ]
    assert {f"{PACKAGE}.model", f"{PACKAGE}.core"} <= set(below)
    chains = [
        " -> ".join(chain)
        for module in sorted(below)
        for application in APPLICATIONS
        if (chain := graph.find_shortest_chain(importer=module, imported=application, as_packages=True))
    ]
    assert not chains, "the model and foundation layers import the layers built on them:\n" + "\n".join(chains)
