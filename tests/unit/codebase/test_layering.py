"""The domain does not import its observer. Stages and chains (rag_app/, chains/) never import
`tracing`; only the composition root (rag_app/app.py) and the front doors (the CLI, the service, the
report and price commands) wire the two together: the answer presenter is handed the ledger's view of a
stage, it does not import it. `tracing` in turn reads only
the domain's values and ports (what a usage is, how a price table is keyed), never its internals."""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from rag_app.core.face import declared_exports
from tools.code_shape import arrows_back_up, cycles, import_graph, module_name, nodes, package_of

REPO = Path(__file__).resolve().parents[3]
WIRING = {"rag_app/app.py", "rag_app/experiments/comparison.py"}  # and every module under cli/, service/ and spend/
# what the observer may know of the domain: value types, ports, the attempt recorder, settings helpers
DOMAIN_FOR_TRACING = {"rag_app.core.usage", "rag_app.core.ports", "rag_app.core.clock", "rag_app.models.attempts", "rag_app.models.llm_usage", "rag_app.core.money",
                      "rag_app.config.ledger_location", "rag_app.config.url_redaction", "rag_app.config.settings", "rag_app.core.errors",
                      "rag_app.core.face"}  # lazy_face: how every face, the ledger's too, is built


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
    if rel in WIRING or rel.startswith(("rag_app/service/", "rag_app/spend/", "rag_app/cli/")):
        return
    bad = sorted(m for m in imports(path) if m == "tracing" or m.startswith("tracing."))
    assert not bad, f"{rel} imports {bad}: take what it needs through rag_app.core.ports from the composition root"


@pytest.mark.parametrize("path", modules("tracing"), ids=lambda p: str(p.relative_to(REPO)))
def test_tracing_reads_only_the_domains_values_and_ports(path):
    bad = sorted(m for m in origins(path) if m.startswith("rag_app") and m not in DOMAIN_FOR_TRACING)
    assert not bad, f"{path.relative_to(REPO)} reaches into {bad}"


def eager_exports(face: Path) -> dict[str, tuple[str, str]]:
    """name -> (module, name) for what a face imports at its top level (not lazily)."""
    return {a.asname or a.name: (node.module, a.name) for node in ast.parse(face.read_text(encoding="utf-8")).body
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0 for a in node.names}


def origins(path: Path) -> set[str]:
    """The modules a file's imports come from, a name taken through a package's face counted at the module
    the face declares it from (rag_app/core/face.py): what the observer may know is held module by module."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            face = REPO.joinpath(*node.module.split("."), "__init__.py")
            declared = {**eager_exports(face), **declared_exports(face)} if face.exists() else {}
            out.update(declared[a.name][0] if a.name in declared else node.module for a in node.names)
    return out


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


def test_no_import_cycles():
    """0.7.0 had one, cost_render <-> verdict through imports inside functions (counted: a cycle through a
    function-level import is still a cycle a reader must hold in mind)."""
    found = cycles(import_graph())
    assert not found, f"import cycles: {found}"


@pytest.mark.parametrize("path", modules("rag_app", "chains", "tracing"), ids=lambda p: str(p.relative_to(REPO)))
def test_no_message_or_comment_points_at_the_readme(path):
    """The README is a quickstart; sections moved to docs/ left messages pointing at nothing (0.7.0: three
    error messages, four comments). Point at the docs/ page instead."""
    assert "README" not in path.read_text(encoding="utf-8")


# ---- packages by capability: which package may import which (rag_app/__init__.py draws the layout) ----
# A new arrow between packages is a design decision: add it here, in the review, or move the code. Imports
# under `if TYPE_CHECKING:` are annotations only and not counted.
MAY_IMPORT = {
    "core": set(),
    "text": {"core"},
    "store": {"core"},
    "config": {"core", "store", "query"},  # store: the free-space check; query: the levers' names
    "models": {"core", "text"},
    "chunking": {"core", "text"},
    "prompts": {"core"},
    "query": {"core", "text", "models", "store", "chunking", "prompts"},
    "ingest": {"core", "text", "models", "store", "chunking"},
    "quality": {"core", "text", "query", "models", "prompts"},  # models, prompts: the judge's chat model and prompt
    "chains": {"core", "text", "models", "query", "quality", "ingest", "chunking"},
    "evaluation": {"core", "text", "query", "ingest", "chunking", "chains", "present"},  # present: money shown
    "present": {"core", "quality"},  # shows what the answer holds: citations carry their labels
    "experiments": {"core", "chunking", "evaluation", "present", "query"},  # query: a variant's keys are its knobs
    "spend": {"core", "query", "tracing"},
    "access": {"core", "text", "query"},  # query: a key's documents become a Scope; text: names shown safely
    "tracing": {"core", "config", "models"},
    "app": {"core", "text", "config", "models", "store", "ingest", "query", "chains", "tracing",
            "quality"},  # quality: the composition root starts the judge's worker (RAG_JUDGE_MODEL)
    "service": {"core", "text", "config", "models", "store", "ingest", "query", "present", "experiments",
                "spend", "app", "tracing", "access", "quality"},  # quality: the review list's thresholds
    "cli": {"core", "text", "config", "store", "chunking", "query", "evaluation", "experiments", "present",
            "spend", "service", "app", "tracing", "access"},
}


def runtime_imports(path: Path) -> set[str]:
    """Modules imported at run time, inside functions too, but not under `if TYPE_CHECKING:`."""
    out: set[str] = set()
    for node in nodes(ast.parse(path.read_text(encoding="utf-8")), annotations=False):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module)
    return out


@pytest.mark.parametrize("path", modules("rag_app", "chains", "tracing", "prompts"),
                         ids=lambda p: str(p.relative_to(REPO)))
def test_each_package_imports_only_the_packages_below_it(path):
    me = package_of(module_name(path))
    if me in {"rag_app", "data"}:
        return
    assert me in MAY_IMPORT, f"{path.relative_to(REPO)}: package {me!r} has no row in MAY_IMPORT"
    ours = {package_of(m) for m in runtime_imports(path) if m.split(".")[0] in {"rag_app", "chains", "tracing", "prompts"}}
    bad = sorted(p for p in ours - {me, "rag_app"} if p not in MAY_IMPORT[me])
    assert not bad, f"{path.relative_to(REPO)} ({me}) imports {bad}: not below it (MAY_IMPORT)"


def test_no_arrow_points_back_up():
    """Not even for a type: core/types.py once named `query/scope.Resolved` under `if TYPE_CHECKING:`, so the
    floor everything stands on pointed at one above it (the scope's values now live in core)."""
    assert arrows_back_up() == [], "an import, annotations included, to a package on the same floor or above"


def test_the_named_rules_hold_in_the_table():
    """The rules a reader relies on, stated once more so that a widened table is seen in review."""
    assert MAY_IMPORT["core"] == set()
    assert not MAY_IMPORT["query"] & {"experiments", "spend", "cli", "service", "tracing", "app"}
    assert {p for p, may in MAY_IMPORT.items() if "tracing" in may} <= {"app", "cli", "service", "spend"}
    assert not MAY_IMPORT["present"] & {"query", "tracing"}  # the presenter shows what it is given
    assert {p for p, may in MAY_IMPORT.items() if may & {"cli", "service"}} <= {"cli", "service"}


@pytest.mark.parametrize("package", sorted(p for p in (REPO / "rag_app").iterdir()
                                           if p.is_dir() and (p / "__init__.py").exists()), ids=lambda p: p.name)
def test_every_package_says_what_it_is_for(package):
    doc = ast.get_docstring(ast.parse((package / "__init__.py").read_text(encoding="utf-8"))) or ""
    assert len(doc) > 60, f"rag_app/{package.name}/__init__.py needs a docstring saying what the package does"


def test_nothing_but_the_composition_root_lies_loose_in_rag_app():
    loose = sorted(p.name for p in (REPO / "rag_app").glob("*.py") if p.name not in {"__init__.py", "app.py"})
    assert not loose, f"{loose}: put each module in the package of its capability (rag_app/__init__.py)"


def test_the_service_defines_its_routes_only_in_routers():
    """`create_app` wires routers; a route written elsewhere is one a newcomer will not find."""
    verbs = {"get", "post", "put", "patch", "delete", "api_route"}
    service = REPO / "rag_app" / "service"
    for path in sorted(service.rglob("*.py")):
        if path.parent.name == "routes":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            for d in getattr(node, "decorator_list", []):
                target = d.func if isinstance(d, ast.Call) else d
                assert not (isinstance(target, ast.Attribute) and target.attr in verbs), (
                    f"{path.relative_to(REPO)}:{node.lineno}: a route outside rag_app/service/routes/")
