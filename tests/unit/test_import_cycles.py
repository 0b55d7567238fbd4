"""The import-cycle contract (tests/import_cycles.py) on graphs built in memory: it must fail on a
cycle of any length, a type-only one included, and keep an acyclic graph."""

from __future__ import annotations

import grimp

from tests.import_cycles import AcyclicModulesContract, cycles


def _graph(*edges: tuple[str, str]) -> grimp.ImportGraph:
    graph = grimp.ImportGraph()
    for importer, imported in edges:
        graph.add_import(
            importer=importer, imported=imported, line_number=1, line_contents="import x"
        )
    return graph


def _contract() -> AcyclicModulesContract:
    return AcyclicModulesContract(
        name="no cycles", session_options={}, contract_options={"packages": ["pkg"]}
    )


def test_an_acyclic_graph_keeps_the_contract() -> None:
    graph = _graph(("pkg.a", "pkg.b"), ("pkg.b", "pkg.c"), ("pkg.a", "pkg.c"), ("pkg.c", "ext"))
    check = _contract().check(graph, verbose=False)
    assert check.kept and check.metadata["cycles"] == []


def test_a_three_module_cycle_breaks_it_and_is_named() -> None:
    # runner -> effects -> services -> runner, as in the engine before issue 9 (type-only there).
    graph = _graph(
        ("pkg.engine.runner", "pkg.engine.effects"),
        ("pkg.engine.effects", "pkg.engine.services"),
        ("pkg.engine.services", "pkg.engine.runner"),
        ("pkg.engine.runner", "pkg.store"),
    )
    check = _contract().check(graph, verbose=False)
    assert not check.kept
    assert check.metadata["cycles"] == [
        ["pkg.engine.effects", "pkg.engine.runner", "pkg.engine.services"]
    ]


def test_cycles_outside_the_packages_are_not_this_contracts_business() -> None:
    graph = _graph(("other.a", "other.b"), ("other.b", "other.a"), ("pkg.a", "other.a"))
    assert _contract().check(graph, verbose=False).kept


def test_every_strongly_connected_group_is_found_separately() -> None:
    imports = {
        "a": {"b"},
        "b": {"a", "c"},
        "c": {"d"},
        "d": {"e"},
        "e": {"c"},
        "f": {"f"},  # a module importing itself
        "g": set(),
    }
    assert cycles(imports) == [["c", "d", "e"], ["a", "b"], ["f"]]


def test_a_long_chain_needs_no_recursion() -> None:
    imports = {f"m{i}": {f"m{i + 1}"} for i in range(5000)}
    imports["m5000"] = {"m0"}
    (group,) = cycles(imports)
    assert len(group) == 5001
