"""The shape of the grader and grading packages: no module imports, however lazily, one that imports it back.

Every ``import`` in every module of :mod:`course_lib.grader` is read from its source with
:mod:`ast`, at module level and inside functions and classes alike: an import deferred into
a function to dodge a circle at load time is still a circle in the design (the two
modules cannot be understood, tested or moved apart). Imports under ``if TYPE_CHECKING:``
count too, for the same reason.
"""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import course_lib.grader
import course_lib.grading

PACKAGE = "course_lib.grader"
GRADING = "course_lib.grading"
GRADING_FOLDER = Path(course_lib.grading.__file__).parent


def import_graph(folder: Path, package: str) -> dict[str, set[str]]:
    """For each module of ``package`` (the ``.py`` files in ``folder``), the modules of it that it imports.

    Counts ``import package.x``, ``from package.x import y``, ``from package import x`` (when
    ``x`` is a module of the package) and the relative forms, wherever they stand in the file.
    """
    modules = {p.stem for p in folder.glob("*.py") if p.stem != "__init__"}
    graph: dict[str, set[str]] = {}
    for name in sorted(modules):
        tree = ast.parse((folder / f"{name}.py").read_text(encoding="utf-8"), filename=f"{name}.py")
        found: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                found.update(_own(alias.name, package, modules) for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:  # relative: ``from . import x`` or ``from .x import y`` inside the package
                    base = ".".join(filter(None, [package, base])) if node.level == 1 else ""
                found.add(_own(base, package, modules))
                if base == package:
                    found.update(alias.name for alias in node.names if alias.name in modules)
        graph[name] = found - {"", name}
    return graph


def tangles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The groups of modules that import one another, each sorted, with more than one module.

    They are the graph's strongly connected components (Tarjan's algorithm): within one,
    every module reaches every other by imports.

    Examples
    --------
    >>> tangles({"a": {"b"}, "b": {"c", "a"}, "c": {"b"}, "d": {"a"}})
    [['a', 'b', 'c']]
    >>> tangles({"a": {"b"}, "b": set()})
    []
    """
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(groups)


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One circle through each of :func:`tangles`, as ``[a, b, ..., a]``: the shortest from its first module.

    Examples
    --------
    >>> circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}})
    [['a', 'b', 'c', 'a']]
    """
    return [_shortest_circle(graph, group) for group in tangles(graph)]


def test_the_grader_package_has_no_import_circle():
    graph = import_graph(Path(course_lib.grader.__file__).parent, PACKAGE)
    found = tangles(graph)
    assert not found, "import circles in course_lib.grader (function-level imports included):\n" + "\n".join(
        f"{' -> '.join(_shortest_circle(graph, group))}  (these import one another: {', '.join(group)})"
        for group in found)


def test_the_grading_package_has_no_import_circle():
    graph = import_graph(GRADING_FOLDER, GRADING)
    assert set(graph) == {"_checks", "_errors", "_memory", "_parallel", "_speed", "_state", "_values", "_warm"}
    assert not tangles(graph), f"import circles in {GRADING}: {circles(graph)}"


def test_no_grading_module_imports_the_package_itself():
    # __init__ imports every module for its public names: a module that imported it back
    # (``from course_lib.grading import assert_same``, ``from course_lib import grading``)
    # would close a circle that import_graph, which sees modules only, cannot see.
    modules = {p.stem for p in GRADING_FOLDER.glob("*.py") if p.stem != "__init__"}
    found = []
    for name in sorted(modules):
        for node in ast.walk(ast.parse((GRADING_FOLDER / f"{name}.py").read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found += [f"{name}: import {a.name}" for a in node.names if a.name == GRADING]
            elif isinstance(node, ast.ImportFrom):
                base = GRADING if node.level == 1 and not node.module else (node.module or "")
                if base == GRADING:
                    found += [f"{name}: from {base} import {a.name}" for a in node.names if a.name not in modules]
                elif base == "course_lib":
                    found += [f"{name}: from course_lib import grading" for a in node.names if a.name == "grading"]
    assert found == []


def test_each_grading_module_lists_what_the_others_take_from_it():
    # A module's __all__ is its interface: the names the facade and the sibling modules import
    # from it are all listed there, and everything listed exists.
    import importlib

    modules = {p.stem for p in GRADING_FOLDER.glob("*.py")}
    taken: dict[str, set[str]] = {name: set() for name in modules}
    for name in modules:
        for node in ast.walk(ast.parse((GRADING_FOLDER / f"{name}.py").read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(GRADING + "."):
                taken[node.module.split(".")[2]].update(a.name for a in node.names)
    for name in sorted(modules - {"__init__"}):
        listed = importlib.import_module(f"{GRADING}.{name}").__all__
        assert taken[name] <= set(listed), f"{name} does not list {sorted(taken[name] - set(listed))}"
        assert all(hasattr(importlib.import_module(f"{GRADING}.{name}"), n) for n in listed), name


def test_only_the_state_module_reads_the_clocks_and_tracemalloc():
    # Every other module of course_lib.grading measures with the functions _state captured at
    # import, before student code ran: one that imported time or tracemalloc itself could call
    # a clock the notebook has since rebound.
    importers = set()
    for path in GRADING_FOLDER.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                     [node.module] if isinstance(node, ast.ImportFrom) and not node.level else [])
            if {"time", "tracemalloc"} & set(names):
                importers.add(path.stem)
    assert importers == {"_state"}


def test_the_reader_sees_lazy_relative_and_package_imports(tmp_path):
    # A package whose only circle is hidden in a function body, through ``from pkg import x``
    # and a relative import: the test above would miss a real circle if these went unseen.
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "hub.py").write_text("from pkg.leaf import thing\n")
    (pkg / "leaf.py").write_text(textwrap.dedent("""\
        def thing():
            from pkg import side
            return side
        """))
    (pkg / "side.py").write_text(textwrap.dedent("""\
        def back():
            from .hub import thing
            return thing
        """))
    (pkg / "alone.py").write_text("import os\nimport pkg.leaf\n")
    graph = import_graph(pkg, "pkg")
    assert graph == {"alone": {"leaf"}, "hub": {"leaf"}, "leaf": {"side"}, "side": {"hub"}}
    assert circles(graph) == [["hub", "leaf", "side", "hub"]]


def _own(name: str, package: str, modules: set[str]) -> str:
    """The package's module that the dotted ``name`` is, or is inside of; "" for anything else."""
    if not name.startswith(package + "."):
        return ""
    head = name[len(package) + 1:].split(".")[0]
    return head if head in modules else ""


def _shortest_circle(graph: dict[str, set[str]], group: list[str]) -> list[str]:
    """The shortest way from ``group[0]`` back to itself within ``group`` (breadth first)."""
    start, members = group[0], set(group)
    paths = {start: [start]}
    queue = [start]
    while queue:
        node = queue.pop(0)
        for nxt in sorted(graph[node] & members):
            if nxt == start:
                return paths[node] + [start]
            if nxt not in paths:
                paths[nxt] = paths[node] + [nxt]
                queue.append(nxt)
    raise AssertionError(f"{group} is not strongly connected")  # pragma: no cover - Tarjan's groups are
