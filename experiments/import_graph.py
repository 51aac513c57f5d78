"""The import graph of c2v_rag as issue 28 counts it: every import, function-local and TYPE_CHECKING ones included.

    python experiments/import_graph.py .     # modules, edges, circles (strongly connected sets), upward imports,
                                             # lines per package

Prints the before/after numbers the architecture issue asks for. Upward imports are judged by the layers of
pyproject.toml's [tool.importlinter] (their one definition; tests/test_architecture.py checks them with
import-linter): an import from a lower layer into a higher one, the package root (the facade) counting as the top.
"""
import ast, re, sys, pathlib, tomllib
root = pathlib.Path(sys.argv[1]); pkg = root / "c2v_rag"
mods = {}
for f in pkg.rglob("*.py"):
    rel = f.relative_to(root).with_suffix("")
    name = ".".join(rel.parts)
    if name.endswith(".__init__"): name = name[:-9]
    mods[name] = f
def resolve(cur, node):
    out = []
    if isinstance(node, ast.Import):
        for a in node.names: out.append(a.name)
    else:
        if node.level:
            base = cur.split(".")
            ispkg = mods[cur].name == "__init__.py"
            base = base if ispkg else base[:-1]
            base = base[:len(base) - (node.level - 1)]
            prefix = ".".join(base + ([node.module] if node.module else []))
        else:
            prefix = node.module or ""
        out.append(prefix)
        for a in node.names: out.append(prefix + "." + a.name)
    res = set()
    for o in out:
        while o and o not in mods: o = o.rpartition(".")[0]
        if o and o.startswith("c2v_rag"): res.add(o)
    return res
edges = {m: set() for m in mods}
for m, f in mods.items():
    for node in ast.walk(ast.parse(f.read_text())):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            edges[m] |= resolve(m, node) - {m}
# SCCs (Tarjan)
idx = {}; low = {}; st = []; on = set(); sccs = []; c = [0]
sys.setrecursionlimit(10000)
def sc(v):
    idx[v] = low[v] = c[0]; c[0] += 1; st.append(v); on.add(v)
    for w in edges[v]:
        if w not in idx: sc(w); low[v] = min(low[v], low[w])
        elif w in on: low[v] = min(low[v], idx[w])
    if low[v] == idx[v]:
        comp = []
        while True:
            w = st.pop(); on.discard(w); comp.append(w)
            if w == v: break
        if len(comp) > 1: sccs.append(sorted(comp))
for v in mods:
    if v not in idx: sc(v)
print("modules", len(mods), "edges", sum(len(e) for e in edges.values()))
for s in sccs: print("CYCLE", len(s), s)
# Layer of each module: 0 for the root, then pyproject's layers top to bottom ("a : b" and "a | b" share one).
contract = next(c for c in tomllib.loads((root / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
                if c["type"] == "layers")
ranks = {"c2v_rag": 0}
for i, layer in enumerate(contract["layers"], 1):
    for tail in re.split(r"[:|]", layer): ranks["c2v_rag." + tail.strip().strip("()")] = i
def rank(m):
    while m not in ranks: m = m.rpartition(".")[0]
    return ranks[m]
upward = sorted((a, b) for a in edges for b in edges[a] if rank(a) > rank(b))
for a, b in upward: print("UPWARD", a, "->", b, f"(layer {rank(a)} -> {rank(b)})")
print("upward imports", len(upward))
lines = {}
for m, f in mods.items():
    p = m.split(".")[1] if m.count(".") >= 1 else "c2v_rag"
    if mods[m].parent != pkg: p = mods[m].parent.relative_to(pkg).parts[0]
    else: p = "core"
    lines[p] = lines.get(p, 0) + len(f.read_text().splitlines())
print("lines per package", lines)
longest = max(mods.items(), key=lambda kv: len(kv[1].read_text().splitlines()))
print("longest", longest[0], len(longest[1].read_text().splitlines()))
