"""The domain does not import its observer. Stages and chains (rag_app/, chains/) never import
`tracing`; only the composition root (rag_app/app.py) and the front doors (the CLI, the service, the
report and price commands, the answer presenter) wire the two together. `tracing` in turn reads only
the domain's values and ports (what a usage is, how a price table is keyed), never its internals."""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
WIRING = {"rag_app/app.py", "rag_app/cli/main.py", "rag_app/cli/prices.py", "rag_app/present/report_export.py",
          "rag_app/present/presenter.py", "rag_app/experiments/comparison.py"}
# what the observer may know of the domain: value types, ports, the attempt recorder, settings helpers
DOMAIN_FOR_TRACING = {"rag_app.core.usage", "rag_app.core.ports", "rag_app.models.attempts", "rag_app.models.llm_usage", "rag_app.core.money",
                      "rag_app.config.ledger_location", "rag_app.config.url_redaction", "rag_app.config.settings", "rag_app.core.errors"}


def imports(path: Path) -> set[str]:
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module)
    return out


def modules(*folders: str) -> list[Path]:
    return sorted(p for f in folders for p in (REPO / f).rglob("*.py"))


@pytest.mark.parametrize("path", modules("rag_app", "chains"), ids=lambda p: str(p.relative_to(REPO)))
def test_the_domain_does_not_import_tracing(path):
    rel = str(path.relative_to(REPO))
    if rel in WIRING or rel.startswith(("rag_app/service/", "rag_app/spend/")):
        return
    bad = sorted(m for m in imports(path) if m == "tracing" or m.startswith("tracing."))
    assert not bad, f"{rel} imports {bad}: take what it needs through rag_app.core.ports from the composition root"


@pytest.mark.parametrize("path", modules("tracing"), ids=lambda p: str(p.relative_to(REPO)))
def test_tracing_reads_only_the_domains_values_and_ports(path):
    bad = sorted(m for m in imports(path) if m.startswith("rag_app") and m not in DOMAIN_FOR_TRACING)
    assert not bad, f"{path.relative_to(REPO)} reaches into {bad}"


# SQL belongs to the ledger package: a statement anywhere else is SQL the two engines may read differently
# (0.4.0 translated it by regex) and that the schema's Table objects do not describe.
SQL = re.compile(r"\b(SELECT\s.+\sFROM|INSERT\s+(OR\s+\w+\s+)?INTO|UPDATE\s+\w+\s+SET|DELETE\s+FROM|"
                 r"CREATE\s+(TABLE|INDEX|VIEW|TRIGGER)|ALTER\s+TABLE|DROP\s+(TABLE|VIEW))\b", re.I | re.S)
OWN_SQLITE_FILES = {  # not the ledger: files of their own, on SQLite only
    "rag_app/models/embedding_cache.py",  # the embedding cache
    "bench/ledger_writer.py",  # the driver's own executemany: the baseline the writer is measured against
}


def strings(path: Path) -> list[str]:
    return [n.value for n in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
            if isinstance(n, ast.Constant) and isinstance(n.value, str)]


@pytest.mark.parametrize("path", modules("rag_app", "chains", "tracing", "prompts", "bench"),
                         ids=lambda p: str(p.relative_to(REPO)))
def test_no_sql_outside_the_ledger_package(path):
    rel = str(path.relative_to(REPO))
    if rel.startswith("tracing/ledger/") or rel in OWN_SQLITE_FILES:
        return
    found = [s[:80] for s in strings(path) if SQL.search(s)]
    assert not found, f"{rel} holds SQL {found}: add a method to tracing/ledger/repository.py instead"


def _module_name(path: Path) -> str:
    rel = path.relative_to(REPO).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def import_graph() -> dict[str, set[str]]:
    """Project module -> project modules it imports (inside functions too: a cycle through a
    function-level import is still a cycle a reader must hold in mind)."""
    files = modules("rag_app", "chains", "tracing")
    names = {_module_name(p) for p in files}
    graph: dict[str, set[str]] = {}
    for p in files:
        me, out = _module_name(p), set()
        for node in ast.walk(ast.parse(p.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                out.update(a.name for a in node.names if a.name in names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                for a in node.names:
                    sub = f"{node.module}.{a.name}"
                    out.add(sub if sub in names else node.module)
        graph[me] = {m for m in out if m in names and m != me}
    return graph


def test_no_import_cycles():
    """0.7.0 had one, cost_render <-> verdict through imports inside functions."""
    graph = import_graph()
    index, low, stack, on, cycles = {}, {}, [], set(), []

    def visit(v):  # Tarjan's strongly connected components
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
                cycles.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    assert not cycles, f"import cycles: {cycles}"


@pytest.mark.parametrize("path", modules("rag_app", "chains", "tracing"), ids=lambda p: str(p.relative_to(REPO)))
def test_no_message_or_comment_points_at_the_readme(path):
    """The README is a quickstart; sections moved to docs/ left messages pointing at nothing (0.7.0: three
    error messages, four comments). Point at the docs/ page instead."""
    assert "README" not in path.read_text(encoding="utf-8")
