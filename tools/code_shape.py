"""The shape of the product code, in the figures a layout change is judged by: modules, packages, import
edges and depth, cycles, functions over McCabe 10 and 20 (radon), mypy errors in default mode.

    python tools/code_shape.py            # needs radon and mypy (pip install radon mypy)

Import edges count imports inside functions too: a reader must follow them all the same. The import
graph, its cycles and packages are also what tests/unit/codebase/test_layering.py checks."""
from __future__ import annotations

import ast
import subprocess
import sys
from functools import lru_cache
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PRODUCT = ("rag_app", "chains", "tracing", "prompts")


def files() -> list[Path]:
    return sorted(p for f in PRODUCT for p in (REPO / f).rglob("*.py"))


def module_name(path: Path) -> str:
    rel = path.relative_to(REPO).with_suffix("")
    return ".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)


def nodes(tree: ast.AST, annotations: bool):
    """Every node, or (annotations=False) every node outside `if TYPE_CHECKING:` blocks."""
    for node in ast.iter_child_nodes(tree):
        if not annotations and isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.orelse:
                yield child
                yield from nodes(child, annotations)
            continue
        yield node
        yield from nodes(node, annotations)


def import_graph(annotations: bool = True) -> dict[str, set[str]]:
    paths = files()
    names = {module_name(p) for p in paths}
    graph: dict[str, set[str]] = {}
    for p in paths:
        me, out = module_name(p), set()
        for node in nodes(ast.parse(p.read_text(encoding="utf-8")), annotations):
            if isinstance(node, ast.Import):
                out.update(a.name for a in node.names if a.name in names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                for a in node.names:
                    sub = f"{node.module}.{a.name}"
                    out.add(sub if sub in names else node.module)
        graph[me] = {m for m in out if m in names and m != me}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def depth(graph: dict[str, set[str]]) -> int:
    """Levels of import: the longest chain of imports (a cycle counted once)."""
    return max(floors(graph).values(), default=0)


def floors(graph: dict[str, set[str]]) -> dict[str, int]:
    """Each node's floor: 1 + the longest chain of imports below it, over the graph's strongly connected
    components (a cycle is one floor). Linear in the edges: a walk over simple paths is exponential."""
    comp = {v: i for i, v in enumerate(graph)}  # each node its own component, a cycle's nodes one
    for c in cycles(graph):
        comp.update((v, comp[c[0]]) for v in c)
    below: dict[int, set[int]] = {}
    for v, outs in graph.items():
        below.setdefault(comp[v], set()).update(comp[w] for w in outs if w in comp and comp[w] != comp[v])

    @lru_cache(maxsize=None)
    def level(c: int) -> int:
        return 1 + max((level(d) for d in below.get(c, ())), default=0)

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10 * len(graph) + 100))
    return {v: level(comp[v]) for v in graph}


def package_of(module: str) -> str:
    parts = module.split(".")
    return parts[1] if parts[0] == "rag_app" and len(parts) > 1 else parts[0]


def package_graph(annotations: bool = False) -> dict[str, set[str]]:
    """Package -> packages it imports (rag_app's subpackages, app.py, chains, tracing, prompts): at run time,
    or (annotations=True) counting imports under `if TYPE_CHECKING:` too."""
    graph: dict[str, set[str]] = {}
    for m, outs in import_graph(annotations=annotations).items():
        me = package_of(m)
        graph.setdefault(me, set()).update(package_of(o) for o in outs if package_of(o) != me)
    graph.pop("rag_app", None)
    return {k: v - {"rag_app"} for k, v in graph.items()}


def arrows_back_up() -> list[tuple[str, str]]:
    """Imports between packages that point at a package on the same floor or above (floors from the run-time
    package graph), annotations under `if TYPE_CHECKING:` included: a type a lower package borrows from a
    higher one is still a dependency a reader must climb to."""
    floor = floors(package_graph())
    return sorted((a, b) for a, outs in package_graph(annotations=True).items() for b in outs
                  if b in floor and a in floor and floor[b] >= floor[a])


def mccabe() -> list[tuple[str, int]]:
    """("path:line name", McCabe) for every function, method and class of the product code, as radon
    counts them (a closure counts inside the function that holds it)."""
    from radon.complexity import cc_visit
    return [(f"{p.relative_to(REPO)}:{b.lineno} {b.fullname}", b.complexity)
            for p in files() for b in cc_visit(p.read_text(encoding="utf-8"))]


def complexity() -> tuple[int, int]:
    blocks = mccabe()
    return sum(c > 10 for _, c in blocks), sum(c > 20 for _, c in blocks)


def mypy_errors() -> str:
    run = subprocess.run([sys.executable, "-m", "mypy", "--config-file", "/dev/null", "--ignore-missing-imports",
                          "--follow-imports", "silent", *PRODUCT], cwd=REPO, capture_output=True, text=True)
    return (run.stdout.strip().splitlines() or ["?"])[-1]


def main() -> None:
    graph = import_graph()
    top = [p for p in (REPO / "rag_app").iterdir() if p.suffix == ".py" and p.name != "__init__.py"]
    print(f"modules (rag_app, chains, tracing, prompts): {len(graph)}")
    print(f"modules directly under rag_app/: {len(top)}")
    print(f"import edges: {sum(len(v) for v in graph.values())}")
    print(f"import depth (levels): {depth(graph)}")
    print(f"import cycles: {cycles(graph) or 'none'}")
    packages = package_graph()
    print(f"packages: {len(packages)}, edges between them: {sum(len(v) for v in packages.values())}, "
          f"levels: {depth(packages)}, cycles: {cycles(packages) or 'none'}")
    up = arrows_back_up()
    print(f"arrows back up (annotations included): {len(up)}{'' if not up else ' ' + ', '.join(f'{a} -> {b}' for a, b in up)}")
    over10, over20 = complexity()
    print(f"functions over McCabe 10: {over10}, over 20: {over20}")
    print(f"mypy, default mode, all product code: {mypy_errors()}")


if __name__ == "__main__":
    main()
