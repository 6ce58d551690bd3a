"""Faces that tell the truth (issue 47 item 5): a package is used through its `__init__` (its face), which
names what others may import from it (the `if TYPE_CHECKING:` block, read lazily at run time by
rag_app/core/face.py, and `__all__`) and, in its docstring, every module it holds. Inside a package (and
from a sub-package up to its parents) modules import each other directly. Tests may import anything."""
from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import pytest

from tools.code_shape import REPO, files, module_name

FACES = sorted(p for p in files() if p.name == "__init__.py")
PACKAGES = {module_name(p) for p in FACES}
# Imports allowed to reach past a face, each with why. Keep it short: a new line here is a face to fix.
ALLOWED: dict[tuple[str, str], str] = {}


def package_of(module: str) -> str | None:
    parts = module.split(".")
    return next((".".join(parts[:i]) for i in range(len(parts), 0, -1) if ".".join(parts[:i]) in PACKAGES), None)


def crossings():
    """(importer path, line, target package, imported module, names) for every import of another package."""
    for path in files():
        me = module_name(path)
        mine = me if path.name == "__init__.py" else package_of(me)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets = [(node.module, [a.name for a in node.names])]
            elif isinstance(node, ast.Import):
                targets = [(a.name, []) for a in node.names]
            else:
                continue
            for module, names in targets:
                package = package_of(module)
                if package is None or package == mine or (mine or "").startswith(package + "."):
                    continue  # not ours, or the same package, or a sub-package reading its parents
                yield path.relative_to(REPO), node.lineno, package, module, names


def test_other_packages_are_imported_through_their_faces():
    past = [f"{path}:{line} imports {module}: import it from {package}, adding it to that face"
            for path, line, package, module, _ in crossings()
            if module != package and (str(path), module) not in ALLOWED]
    assert not past, "\n".join(past)


def test_no_private_name_crosses_a_package():
    leaks = [f"{path}:{line} takes {name} from {module}: make it public in {package}'s face or keep it inside"
             for path, line, package, module, names in crossings() for name in names if name.startswith("_")]
    assert not leaks, "\n".join(leaks)


@pytest.mark.parametrize("face", FACES, ids=module_name)
def test_a_face_exports_only_what_resolves(face):
    package = importlib.import_module(module_name(face))
    exported = list(getattr(package, "__all__", []))
    assert not [n for n in exported if n.startswith("_")], f"{face}: __all__ lists private names"
    missing = [n for n in exported if not hasattr(package, n)]
    assert not missing, f"{face}: __all__ names {missing}, which the package does not have"
    declared = [a.asname or a.name for node in ast.parse(face.read_text(encoding="utf-8")).body
                if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
                for imp in node.body if isinstance(imp, ast.ImportFrom) for a in imp.names]
    unlisted = sorted(set(declared) - set(exported))
    assert not unlisted, f"{face}: exports {unlisted} lazily but not in __all__"


@pytest.mark.parametrize("face", FACES, ids=module_name)
def test_a_face_docstring_names_every_module(face):
    doc = ast.get_docstring(ast.parse(face.read_text(encoding="utf-8"))) or ""
    folder = face.parent
    held = [p.stem for p in folder.glob("*.py") if p.name != "__init__.py"]
    held += [p.name for p in folder.iterdir() if (p / "__init__.py").exists()]
    unnamed = sorted(m for m in held if not re.search(rf"(?<![\w.]){re.escape(m)}(?!\w)", doc))
    assert not unnamed, f"{face.relative_to(REPO)}: its docstring does not name {unnamed}"


def test_a_face_reads_each_name_from_its_module_every_time(monkeypatch):
    """Never a copy: a test that patches the module is seen through the face as through a direct import."""
    import rag_app.core
    import rag_app.core.money

    def patched(usd):
        return 7

    assert rag_app.core.to_nano is rag_app.core.money.to_nano  # read once through the face before the patch
    monkeypatch.setattr(rag_app.core.money, "to_nano", patched)
    from rag_app.core import to_nano

    assert to_nano is patched
    with pytest.raises(AttributeError, match="no attribute 'no_such_name'"):
        rag_app.core.no_such_name  # noqa: B018
