"""No import cycle between any two modules of the project: the layer contracts (`lint-imports`)
see packages and siblings; this walks every module's own imports, as grimp reads them."""

from __future__ import annotations

from collections.abc import Mapping, Set

import grimp

PACKAGES = ("common", "workers", "api", "cli", "bench")


def cycles(imports: Mapping[str, Set[str]]) -> list[list[str]]:
    """The strongly connected groups of two or more modules (Tarjan's algorithm, iterative),
    plus any module that imports itself; each group sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(imports):
        if root in index:
            continue
        work = [(root, iter(sorted(imports.get(root, ()))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(imports.get(child, ())))))
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
                if len(group) > 1 or node in imports.get(node, ()):
                    found.append(sorted(group))
    return found


def test_the_finder_sees_a_cycle_through_several_modules() -> None:
    imports = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"e"}}
    assert cycles(imports) == [["a", "b", "c"], ["e"]]
    assert cycles({"a": {"b"}, "b": {"c"}, "c": set()}) == []


def with_packages(imports: Mapping[str, Set[str]]) -> dict[str, set[str]]:
    """Each import also of the packages above the imported module: Python runs a package's
    `__init__` before any module in it, so a package that re-exports its modules and a module
    that imports through the package close a cycle."""
    out: dict[str, set[str]] = {}
    for module, imported in imports.items():
        out[module] = set()
        for name in imported:
            parts = name.split(".")
            out[module] |= {".".join(parts[:n]) for n in range(1, len(parts) + 1)}
        out[module].discard(module)
    return out


def test_a_package_that_re_exports_a_module_importing_it_is_a_cycle() -> None:
    imports = {"m": {"m.session"}, "m.session": {"m.ids"}, "m.ids": set()}
    assert cycles(imports) == []  # the modules alone
    assert cycles(with_packages(imports)) == [["m", "m.session"]]


def test_no_module_imports_itself_through_others() -> None:
    graph = grimp.build_graph(*PACKAGES)
    imports = {m: graph.find_modules_directly_imported_by(m) for m in graph.modules}
    assert len(imports) > 100  # every module, not only the packages
    assert cycles(with_packages(imports)) == []
