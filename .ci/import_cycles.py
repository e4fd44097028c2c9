"""Fail on any import circle among the project's modules (import-linter's contracts see imports
between packages, not circles inside one).

    python .ci/import_cycles.py [PACKAGE ...]     (from the project's root)

Builds the import graph with grimp (installed with import-linter; every import counts, also one
inside a function) and prints each circle as ``a -> b -> ... -> a``; exit status 1 when there is
one. Without arguments it checks the root packages of ``pyproject.toml``'s ``[tool.importlinter]``.
"""
from __future__ import annotations

import sys
import tomllib
from pathlib import Path

import grimp


def configured_packages(pyproject: Path) -> list[str]:
    """The root packages that import-linter checks."""
    return list(tomllib.loads(pyproject.read_text())["tool"]["importlinter"]["root_packages"])


def strongly_connected(edges: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components (iterative): every group of modules that reach each other."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    out: list[list[str]] = []
    counter = 0
    for start in sorted(edges):
        if start in index:
            continue
        work = [(start, iter(sorted(edges.get(start, ()))))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1 or node in edges.get(node, ()):
                    out.append(sorted(group))
    return out


def one_circle(group: list[str], edges: dict[str, set[str]]) -> list[str]:
    """A shortest circle through the group's first module (breadth-first inside the group)."""
    members, first = set(group), group[0]
    previous: dict[str, str] = {}
    frontier = [first]
    while frontier:
        following = []
        for node in frontier:
            for child in sorted(edges.get(node, ())):
                if child not in members:
                    continue
                if child == first:
                    path = [node]
                    while path[-1] != first:
                        path.append(previous[path[-1]])
                    return [first, *reversed(path[:-1]), first] if len(path) > 1 else [first, node, first]
                if child not in previous:
                    previous[child] = node
                    following.append(child)
        frontier = following
    return group


def import_circles(packages: list[str]) -> list[list[str]]:
    """Each import circle among ``packages``' modules, as a list of modules that ends where it starts."""
    graph = grimp.build_graph(*packages, include_external_packages=False, cache_dir=None)
    edges = {module: set(graph.find_modules_directly_imported_by(module)) for module in graph.modules}
    return [one_circle(group, edges) for group in strongly_connected(edges)]


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    root = Path.cwd()
    packages = argv or configured_packages(root / "pyproject.toml")
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    circles = import_circles(packages)
    for circle in circles:
        print("import circle: " + " -> ".join(circle))
    if circles:
        print(f"{len(circles)} import circle(s) among {', '.join(packages)}: break each (move the shared "
              "piece into a module both import)")
        return 1
    print(f"no import circle among the modules of {len(packages)} packages")
    return 0


if __name__ == "__main__":
    sys.exit(main())
