"""The package layout and its import rules (docs/ARCHITECTURE.md, "Layout and import rules").

Each rule is checked by walking every import statement of every module, the imports inside
functions included (a lazy `import torch` in `protocol` breaks the rule as surely as a top-level
one), and once more in a fresh interpreter through `sys.modules`.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "gpubench_nb"
SHARED = {"cli", "cli_parser", "errors", "atomic", "kernel", "formats"}
STAGES = ("protocol", "engine", "pipeline", "economics", "report")
STEPS = "steps"  # what the notebooks call (issue 21): above every stage, imported by none
HEAVY = ("torch", "transformers", "pandas", "matplotlib", "sklearn", "papermill")

# stage -> the gpubench_nb parts it must never import (the CLI is forbidden to all, below).
FORBIDDEN_PARTS = {
    "protocol": {"engine", "pipeline", "economics", "report", STEPS},
    "engine": {"pipeline", "economics", "report", STEPS},
    "pipeline": {STEPS},
    "economics": {"engine", "pipeline", "report", STEPS},
    "report": {"engine", "pipeline", STEPS},
    STEPS: set(),
    "errors": {*STAGES, STEPS},
    "atomic": {*STAGES, STEPS},
    "kernel": {*STAGES, STEPS},
    "formats": {*STAGES, STEPS},
    "cli_parser": {*STAGES, STEPS},  # help texts and argument types only; cli.py calls stages
}
FORBIDDEN_THIRD_PARTY = {"protocol": HEAVY, "economics": ("torch", "transformers")}


def imported_names(source: str, module: str) -> set[str]:
    """Absolute names of every module imported anywhere in ``source`` (relative ones resolved)."""
    names: set[str] = set()
    package = module.rsplit(".", 1)[0]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([base] if base else []))
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names)
    return names


def modules() -> list[tuple[str, str, Path]]:
    """(dotted module name, its part: a stage or a shared module, path) for every module."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE.parent).with_suffix("")
        dotted = ".".join(relative.parts).removesuffix(".__init__")
        parts = dotted.split(".")
        part = parts[1] if len(parts) > 1 else "__init__"
        found.append((dotted, part, path))
    return found


def violations(dotted: str, part: str, source: str) -> list[str]:
    """Each import in ``source`` that breaks the layout's rules, as a sentence."""
    found = []
    for name in sorted(imported_names(source, dotted)):
        pieces = name.split(".")
        if pieces[0] == "gpubench_nb" and len(pieces) > 1:
            target = pieces[1]
            if target == "cli" and part != "cli":
                found.append(f"{dotted} imports {name}: nothing below the CLI imports cli.py")
            if target in FORBIDDEN_PARTS.get(part, set()) and target != part:
                found.append(f"{dotted} imports {name}: {part} must not import {target}")
        elif pieces[0] in FORBIDDEN_THIRD_PARTY.get(part, ()):
            found.append(f"{dotted} imports {name}: {part} must not import {pieces[0]}")
    return found


def test_only_the_shared_modules_sit_at_the_top_level():
    # _version: written by setuptools-scm when the package is built (git-ignored)
    top = {p.stem for p in PACKAGE.glob("*.py")} - {"__init__", "_version"}
    assert top == SHARED and len(top) <= 6  # the layout rule: at most 6 modules at the top
    assert {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists()} == {*STAGES, STEPS}


@pytest.mark.parametrize(("dotted", "part", "path"), modules(), ids=lambda v: str(v))
def test_module_follows_the_import_rules(dotted, part, path):
    assert violations(dotted, part, path.read_text(encoding="utf-8")) == []


def test_the_rule_check_catches_a_forbidden_import():
    """The walker must see a lazy import inside a function, and a relative import."""
    lazy = "def f():\n    import torch\n"
    assert violations("gpubench_nb.protocol.acceptance", "protocol", lazy) == [
        "gpubench_nb.protocol.acceptance imports torch: protocol must not import torch"
    ]
    relative = "from ..engine import measure\n"
    assert violations("gpubench_nb.report.stats", "report", relative) == [
        "gpubench_nb.report.stats imports gpubench_nb.engine: report must not import engine",
        "gpubench_nb.report.stats imports gpubench_nb.engine.measure: report must not import "
        "engine",
    ]
    assert violations("gpubench_nb.engine.measure", "engine", "import gpubench_nb.cli\n")


def test_protocol_loads_without_heavy_libraries_in_a_fresh_interpreter():
    code = (
        "import importlib, pkgutil, sys\n"
        "import gpubench_nb.protocol as p\n"
        "for m in pkgutil.iter_modules(p.__path__):\n"
        "    importlib.import_module('gpubench_nb.protocol.' + m.name)\n"
        f"heavy = sorted(n for n in {HEAVY!r} if n in sys.modules)\n"
        "print(','.join(heavy))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=PACKAGE.parent
    )
    assert out.stdout.strip() == ""


def module_graph() -> dict[str, set[str]]:
    """Module -> the gpubench_nb modules it imports anywhere (lazy and TYPE_CHECKING included).

    ``from a.b import c`` counts as an import of ``a.b.c`` when that is a module, else of
    ``a.b``; the implicit import of a parent package's ``__init__`` is not an edge."""
    known = {dotted for dotted, _, _ in modules()}
    graph: dict[str, set[str]] = {}
    for dotted, _, path in modules():
        edges = set()
        for name in imported_names(path.read_text(encoding="utf-8"), dotted):
            while name and name not in known:
                name = name.rpartition(".")[0]
            if name and name != dotted:
                edges.add(name)
        graph[dotted] = edges
    return graph


def import_circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Each set of modules that import each other, directly or round a loop (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return circles


def test_no_import_circle_in_the_package():
    """Issue 21: no two modules import each other, even lazily (base <-> tokenization was one)."""
    assert import_circles(module_graph()) == []


def test_the_circle_check_catches_a_circle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert import_circles(graph) == [["a", "b", "c"]]
    assert import_circles({"a": {"b"}, "b": set()}) == []


def test_every_subpackage_is_listed_for_setuptools():
    """pyproject lists the packages by hand (the notebooks/ mapping needs it): a new subpackage
    missing from the list would be left out of every wheel (issue 21)."""
    tomllib = pytest.importorskip("tomllib")  # Python >= 3.11
    pyproject = tomllib.loads((PACKAGE.parent / "pyproject.toml").read_text(encoding="utf-8"))
    listed = set(pyproject["tool"]["setuptools"]["packages"])
    # Every folder, with or without __init__.py: Python imports a data-only folder as a
    # namespace package, and setuptools warns at each install when one is not listed
    # (issue 25: "Package 'gpubench_nb.engine.backends.wordpiece' is absent ...").
    on_disk = {
        ".".join(p.relative_to(PACKAGE.parent).parts)
        for p in [PACKAGE, *PACKAGE.rglob("*")]
        if p.is_dir() and p.name != "__pycache__" and "__pycache__" not in p.parts
    }
    assert listed == on_disk | {"gpubench_nb.notebooks"}
    assert pyproject["tool"]["setuptools"]["package-dir"] == {"gpubench_nb.notebooks": "notebooks"}


@pytest.mark.parametrize(
    ("module", "absent"),
    [
        # 00_environment and 10_measure: one kernel each per experiment / per scheduled run
        ("gpubench_nb.steps.environment", ("pandas", "matplotlib", "transformers", "scipy")),
        ("gpubench_nb.steps.measure", ("pandas", "matplotlib", "transformers", "scipy")),
    ],
)
def test_the_kernels_before_and_of_the_runs_import_no_table_library(module, absent):
    """What 00 and 10 import costs every experiment and every run (issue 25): no pandas (its
    tables are for 20, 30 and the report), no matplotlib, no transformers, no scipy."""
    code = f"import sys, {module}\nprint(','.join(n for n in {absent!r} if n in sys.modules))\n"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=PACKAGE.parent
    )
    assert out.stdout.strip() == ""
