"""How the package is laid out, counted from the code: modules per folder, lines per package (all, and code
lines), the longest file
and function, import circles and upward imports.

    python experiments/code_stats.py [REPO]

Every import counts, function-local and ``TYPE_CHECKING`` ones included. Upward imports are judged by the
layers of pyproject.toml's ``[tool.importlinter]`` (their one definition), the package root counting as the top.
"""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from collections import Counter
from pathlib import Path

PACKAGE = "c2v_rag"


def module_files(root: Path) -> dict[str, Path]:
    """Dotted module name -> file, for every module of the package."""
    mods = {}
    for f in sorted((root / PACKAGE).rglob("*.py")):
        parts = f.relative_to(root).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        mods[name] = f
    return mods


def imported(mods: dict[str, Path], current: str, node: ast.Import | ast.ImportFrom) -> set[str]:
    """The package's modules that one import statement names (the longest existing prefix of each name)."""
    names = []
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    else:
        prefix = node.module or ""
        if node.level:
            base = current.split(".")
            if mods[current].name != "__init__.py":
                base = base[:-1]
            base = base[: len(base) - (node.level - 1)]
            prefix = ".".join(base + ([node.module] if node.module else []))
        submodules = [f"{prefix}.{a.name}" for a in node.names]
        # `from pkg import module` depends on the module, not on pkg's __init__ (as grimp counts it).
        names = submodules if all(m in mods for m in submodules) else [prefix, *submodules]
    found = set()
    for name in names:
        while name and name not in mods:
            name = name.rpartition(".")[0]
        if name.startswith(PACKAGE):
            found.add(name)
    return found


def import_graph(mods: dict[str, Path]) -> dict[str, set[str]]:
    edges: dict[str, set[str]] = {m: set() for m in mods}
    for m, f in mods.items():
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                edges[m] |= imported(mods, m, node) - {m}
    return edges


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected sets of two or more modules (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in edges:
        if start in index:
            continue
        work = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            v, children = work[-1]
            for w in children:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(edges[w]))))
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on_stack.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    if len(comp) > 1:
                        found.append(sorted(comp))
    return found


def layer_ranks(root: Path) -> dict[str, int]:
    """Module or package name -> its layer, 0 for the root (the facade), then pyproject's layers top down."""
    config = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["importlinter"]
    contract = next(c for c in config["contracts"] if c["type"] == "layers")
    ranks = {PACKAGE: 0}
    for i, layer in enumerate(contract["layers"], 1):
        for tail in re.split(r"[:|]", layer):
            ranks[f"{PACKAGE}.{tail.strip().strip('()')}"] = i
    return ranks


def rank_of(ranks: dict[str, int], module: str) -> int:
    while module not in ranks:
        module = module.rpartition(".")[0]
    return ranks[module]


def longest_function(mods: dict[str, Path]) -> tuple[int, str]:
    best = (0, "")
    for m, f in mods.items():
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = (node.end_lineno or node.lineno) - node.lineno + 1
                best = max(
                    best,
                    (
                        n,
                        f"{m}.{node.name} ({f.relative_to(f.parents[len(m.split('.')) - 1]).as_posix()}:{node.lineno})",
                    ),
                )
    return best


def code_lines(source: str) -> int:
    """Lines holding code: not blank, not only a comment, not part of a docstring."""
    import io
    import tokenize

    docstrings: set[int] = set()
    for node in ast.walk(ast.parse(source)):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr):
            value = body[0].value
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                docstrings.update(range(body[0].lineno, (body[0].end_lineno or body[0].lineno) + 1))
    skip = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER}
    found: set[int] = set()
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type not in skip:
            found.update(n for n in range(token.start[0], token.end[0] + 1) if n not in docstrings)
    return len(found)


def main(root: Path) -> None:
    mods = module_files(root)
    lines = {m: len(f.read_text().splitlines()) for m, f in mods.items()}
    per_folder = Counter(f.parent.relative_to(root).as_posix() for f in mods.values() if f.name != "__init__.py")
    print(f"modules: {len(mods)} ({sum(1 for f in mods.values() if f.name != '__init__.py')} without __init__.py)")
    print("modules per folder (without __init__.py):")
    for folder, n in sorted(per_folder.items()):
        print(f"  {folder:40s} {n:3d}")
    per_package: Counter[str] = Counter()
    code_per_package: Counter[str] = Counter()
    for m, n in lines.items():
        parts = m.split(".")
        package = parts[1] if len(parts) > 2 or mods[m].name == "__init__.py" and len(parts) > 1 else "(root modules)"
        per_package[package] += n
        code_per_package[package] += code_lines(mods[m].read_text())
    print("lines per top-level package (all; code: no blank, comment or docstring line):")
    for package, n in sorted(per_package.items()):
        print(f"  {package:40s} {n:6d} {code_per_package[package]:6d}")
    print(f"  {'total':40s} {sum(per_package.values()):6d} {sum(code_per_package.values()):6d}")
    longest = max(lines, key=lines.__getitem__)
    print(f"longest file: {mods[longest].relative_to(root).as_posix()} ({lines[longest]} lines)")
    n, where = longest_function(mods)
    print(f"longest function: {where}, {n} lines")
    edges = import_graph(mods)
    print(f"imports between modules: {sum(len(e) for e in edges.values())}")
    found = circles(edges)
    print(f"import circles: {len(found)}")
    for c in found:
        print("  circle:", ", ".join(c))
    ranks = layer_ranks(root)
    upward = sorted((a, b) for a in edges for b in edges[a] if rank_of(ranks, a) > rank_of(ranks, b))
    print(f"upward imports: {len(upward)}")
    for a, b in upward:
        print(f"  {a} -> {b}")


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve())
