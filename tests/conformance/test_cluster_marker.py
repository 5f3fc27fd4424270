"""`-m cluster` selects every conformance check that starts a cluster through the adapter:
CI runs exactly those on the docker provider, so a check that forgot the marker would
silently never meet a container."""

from __future__ import annotations

import ast
from pathlib import Path

CHECKS = Path(__file__).resolve().parents[2] / "conformance" / "checks"
CLUSTER_METHODS = {"cluster", "tpu_slices", "accelerator_cluster"}


def _marked(fn: ast.FunctionDef) -> bool:
    return any(ast.unparse(d) == "pytest.mark.cluster" for d in fn.decorator_list)


def _starts_cluster(functions: dict[str, ast.FunctionDef]) -> set[str]:
    """Names of the module's functions that call `<x>.cluster(...)`/`<x>.tpu_slices(...)`,
    directly or through another function of the same module."""
    calls: dict[str, set[str]] = {}
    found: set[str] = set()
    for name, fn in functions.items():
        calls[name] = set()
        for node in ast.walk(fn):
            if isinstance(node, ast.Call):
                if isinstance(node.func, ast.Attribute) and node.func.attr in CLUSTER_METHODS:
                    found.add(name)
                elif isinstance(node.func, ast.Name):
                    calls[name].add(node.func.id)
    while True:
        more = {n for n, called in calls.items() if n not in found and called & found}
        if not more:
            return found
        found |= more


def _checks():
    for path in sorted(CHECKS.glob("check_*.py")):
        tree = ast.parse(path.read_text())
        functions = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
        starting = _starts_cluster(functions)
        for name, fn in functions.items():
            if name.startswith("check_"):
                yield path.name, fn, name in starting


def test_checks_that_start_a_cluster_are_exactly_the_marked_ones():
    checks = list(_checks())
    unmarked = [f"{p}::{fn.name}" for p, fn, starts in checks if starts and not _marked(fn)]
    stray = [f"{p}::{fn.name}" for p, fn, starts in checks if _marked(fn) and not starts]
    assert unmarked == [] and stray == []
    assert sum(starts for _, _, starts in checks) >= 5  # the finder still finds them


def test_the_finder_follows_helpers_of_the_same_module():
    tree = ast.parse("def a(impl):\n    with impl.cluster([]):\n        pass\n"
                     "def b(impl):\n    return a(impl)\n"
                     "def check_x(impl):\n    b(impl)\n"
                     "def check_y(impl):\n    impl.fit()\n")
    functions = {n.name: n for n in tree.body}
    assert _starts_cluster(functions) == {"a", "b", "check_x"}
