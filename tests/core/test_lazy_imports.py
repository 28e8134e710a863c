"""Imports live at module level. kviewer's packages are lazy (``lazy_loader.attach_stub`` over an
``__init__.pyi``): ``from kviewer import analysis`` costs nothing and ``analysis.fusion`` imports the
module on first use, so a module that must stay light (the command line's start-up, the way to the
first window) names a heavy kviewer module through its package instead of importing it inside a
function. What may still be imported inside a function is a short, named list: third-party packages
kept off a start-up path or optional (pandas, Qt, Dask, ncu_report, platform modules), imports
guarded by ``except ImportError``, and the command line's own :mod:`kviewer.cli.stream`."""

from __future__ import annotations

import ast
import importlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[2] / "kviewer"

#: third-party modules a function may import: heavy ones kept off the start-up of the command line,
#: the window or a small fleet, optional ones, platform ones
THIRD_PARTY_IN_FUNCTIONS = frozenset({
    "pandas", "numpy", "PySide6", "pyqtgraph", "dask", "distributed", "fsspec", "sqlite_utils", "sqlite3", "zstandard",
    "psutil", "ncu_report", "resource", "fcntl",
})
#: kviewer modules a function may import without an ImportError guard, and why
KVIEWER_IN_FUNCTIONS = {
    # kviewer.cli's __init__ imports cli.common, so cli cannot be a lazy package (a circle);
    # cli.stream needs pandas, which `kviewer --help` must not load
    ("kviewer.cli.common", "kviewer.cli.stream"),
}
LAZY_PACKAGES = ["kviewer", "kviewer.analysis", "kviewer.core", "kviewer.fleet", "kviewer.io", "kviewer.io.ncu", "kviewer.io.rocprof",
                 "kviewer.session", "kviewer.ui"]


def _module_name(path: Path) -> str:
    parts = path.relative_to(PKG.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _guarded(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    """Inside ``try: ... except ImportError`` (an optional dependency's clear message)."""
    while node in parents:
        parent = parents[node]
        if isinstance(parent, ast.Try) and node in parent.body:
            for handler in parent.handlers:
                if handler.type is not None and any(n in ast.unparse(handler.type) for n in ("ImportError", "ModuleNotFoundError")):
                    return True
        node = parent
    return False


def function_level_imports() -> list[tuple[str, int, str, bool]]:
    """(module, line, imported module, guarded) for every import inside a function of kviewer."""
    found = []
    for path in sorted(PKG.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
        for fn in ast.walk(tree):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(fn):
                if isinstance(node, ast.Import):
                    targets = [a.name for a in node.names]
                elif isinstance(node, ast.ImportFrom):
                    targets = [node.module or ""]
                else:
                    continue
                for target in targets:
                    found.append((_module_name(path), node.lineno, target, _guarded(node, parents)))
    return sorted(set(found))


def test_the_scan_sees_imports_in_functions_and_their_guards(tmp_path: Path) -> None:
    """The scan itself: a nested import is found, an ImportError guard is recognised."""
    tree = ast.parse("def f():\n    def g():\n        import json\n    try:\n        import ncu_report\n    except ImportError:\n        pass\n")
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    imports = [n for n in ast.walk(tree) if isinstance(n, ast.Import)]
    assert [n.names[0].name for n in imports] == ["json", "ncu_report"]
    assert [_guarded(n, parents) for n in imports] == [False, True]


def test_functions_import_only_what_the_list_allows() -> None:
    wrong = []
    for module, line, target, guarded in function_level_imports():
        top = target.split(".")[0]
        if top == "kviewer":
            if not guarded and (module, target) not in KVIEWER_IN_FUNCTIONS:
                wrong.append(f"{module}:{line} imports {target} in a function (name it through its lazy package)")
        elif top not in THIRD_PARTY_IN_FUNCTIONS and not guarded:
            wrong.append(f"{module}:{line} imports {target} in a function (import it at module level)")
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("package", LAZY_PACKAGES)
def test_each_lazy_package_names_every_submodule(package: str) -> None:
    """A submodule missing from ``__init__.pyi`` would be an AttributeError at its first use."""
    folder = PKG.parent.joinpath(*package.split("."))
    on_disk = {p.stem for p in folder.glob("*.py") if p.stem not in ("__init__", "__main__")}
    on_disk |= {p.name for p in folder.iterdir() if (p / "__init__.py").is_file()}
    stub = ast.parse((folder / "__init__.pyi").read_text(encoding="utf-8"))
    named = {a.name for n in stub.body if isinstance(n, ast.ImportFrom) and n.module is None for a in n.names}
    assert named == on_disk
    mod = importlib.import_module(package)
    for name in sorted(mod.__all__):
        assert getattr(mod, name) is not None


@pytest.mark.parametrize(
    ("code", "absent"),
    [
        # the command line's start-up: parsing and --help load no pandas, numpy, Qt or loader
        ("from kviewer.cli import build_parser\nbuild_parser()\n", ("pandas", "numpy", "PySide6", "kviewer.io.registry", "sqlite_utils")),
        # a lazy package is only its names until one is used
        ("import kviewer.analysis, kviewer.io, kviewer.session, kviewer.core\n", ("pandas", "numpy", "kviewer.analysis.fusion", "kviewer.io.registry")),
    ],
)
def test_start_up_paths_stay_light(code: str, absent: tuple[str, ...], tmp_path: Path) -> None:
    probe = code + f"import sys\nprint(','.join(m for m in {absent!r} if m in sys.modules))\n"
    env = dict(os.environ, PYTHONPATH=str(PKG.parent))
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, cwd=tmp_path, env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == ""
