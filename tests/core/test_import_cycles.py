"""No import circles anywhere in kviewer (the guide's rule; import-linter's layers do not see a
circle inside one layer). Module-level, function-level and TYPE_CHECKING imports all count."""

from __future__ import annotations

import pytest

grimp = pytest.importorskip("grimp", reason="grimp comes with import-linter (the test extra)")


def import_cycles(graph: object) -> list[list[str]]:
    """The strongly connected groups of more than one module (each holds at least one circle)."""
    modules = sorted(graph.modules)  # type: ignore[attr-defined]
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in modules:
        if root in index:
            continue
        # iterative Tarjan: a deep import chain must not hit the recursion limit
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root))))]  # type: ignore[attr-defined]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.find_modules_directly_imported_by(child)))))  # type: ignore[attr-defined]
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    m = stack.pop()
                    on_stack.discard(m)
                    group.append(m)
                    if m == node:
                        break
                if len(group) > 1:
                    found.append(sorted(group))
    return found


def test_the_cycle_finder_finds_a_circle() -> None:
    graph = grimp.ImportGraph()
    for m in ("p", "p.a", "p.b", "p.c", "p.d"):
        graph.add_module(m)
    graph.add_import(importer="p.a", imported="p.b")
    graph.add_import(importer="p.b", imported="p.c")
    graph.add_import(importer="p.c", imported="p.a")
    graph.add_import(importer="p.d", imported="p.a")
    assert import_cycles(graph) == [["p.a", "p.b", "p.c"]]


def test_no_import_cycles_among_kviewer_modules() -> None:
    graph = grimp.build_graph("kviewer")
    cycles = import_cycles(graph)
    detail = []
    for group in cycles:
        members = set(group)
        edges = [f"{a} -> {b}" for a in group for b in sorted(graph.find_modules_directly_imported_by(a)) if b in members]
        detail.append("; ".join(edges))
    assert not cycles, "import circles:\n" + "\n".join(detail)
