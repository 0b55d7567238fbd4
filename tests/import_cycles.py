"""An import-linter contract: no import cycle between any two modules of the project.

``make lint`` runs it (``[tool.importlinter]`` in pyproject.toml registers the type). The built-in
``acyclic_siblings`` judges packages, not modules (a package importing another whose modules import
it back is a "cycle" even when no module is on one); this contract finds every strongly connected
group of modules in the import graph, imports under ``TYPE_CHECKING`` included: a type-only import
that closes a loop is still a loop a reader has to untangle. ``tests/unit/test_import_cycles.py``
proves it fails on a cycle.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import grimp
from importlinter.application import output
from importlinter.domain import fields
from importlinter.domain.contract import Contract, ContractCheck


def cycles(imports: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """The groups of modules that import each other (directly or through others), each sorted,
    largest first: Tarjan's strongly connected components, without recursion."""
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
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                group: list[str] = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1 or node in imports.get(node, ()):
                    found.append(sorted(group))
    return sorted(found, key=lambda g: (-len(g), g))


class AcyclicModulesContract(Contract):
    """``type = "acyclic_modules"``; ``packages``: the packages whose modules are checked."""

    packages = fields.ListField(subfield=fields.StringField())

    def check(self, graph: grimp.ImportGraph, verbose: bool) -> ContractCheck:
        roots = tuple(str(p) for p in self.packages)  # type: ignore[attr-defined]
        mine = {
            m for m in graph.modules if m in roots or m.startswith(tuple(f"{r}." for r in roots))
        }
        imports = {m: graph.find_modules_directly_imported_by(m) & mine for m in mine}
        found = cycles(imports)
        lines = {
            (a, b): [d["line_number"] for d in graph.get_import_details(importer=a, imported=b)]
            for group in found
            for a in group
            for b in imports[a] & set(group)
        }
        return ContractCheck(kept=not found, metadata={"cycles": found, "lines": lines})

    def render_broken_contract(self, check: ContractCheck) -> None:
        lines: dict[tuple[str, str], list[int]] = check.metadata["lines"]
        for group in check.metadata["cycles"]:
            output.print_error(f"These modules import each other: {', '.join(group)}")
            output.new_line()
            for (a, b), numbers in sorted(lines.items()):
                if a in group:
                    where = ", ".join(f"l.{n}" for n in numbers)
                    output.print(f"- {a} -> {b} ({where})")
            output.new_line()
