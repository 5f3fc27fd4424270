"""The layering of docs/architecture.md, checked two ways.

`lint-imports` (the contracts in pyproject.toml, run by ci/test.sh) sees every `import`
statement, lazy ones inside functions included. It cannot see modules loaded by name
(`importlib.import_module("reference.train")`, the adapters' "module:attr" strings), nor
the rule "no private names across packages". This file checks those from the source, and
proves that the import-linter contracts do catch a deliberately wrong import.
"""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("reference", "simcluster", "conformance")
#: simcluster's public modules; everything else in it is internal
SIMCLUSTER_PUBLIC = {"simcluster", "simcluster.api", "simcluster.worker", "simcluster.checkers",
                     "simcluster.strategies", "simcluster.procfs", "simcluster.tpu"}
DRIVER_SIDE = ("simcluster.driver", "simcluster.frontend", "simcluster.faults",
               "simcluster.providers", "simcluster.cli", "simcluster.api")
REFERENCE_ADAPTER = "conformance.adapters.reference_adapter"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_module(dotted: str) -> bool:
    base = ROOT.joinpath(*dotted.split("."))
    return base.with_suffix(".py").exists() or (base / "__init__.py").exists()


def imported_names(source: str, module: str, is_package: bool = False) -> list[tuple[int, str]]:
    """(line, dotted target) for every import in `source`: statements (relative ones
    resolved against `module`), `importlib.import_module("x")`, `__import__("x")` and
    "x.y:attr" string literals (how the suite names adapters)."""
    package = module if is_package else module.rpartition(".")[0]
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            out += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                out.append((node.lineno, sub if _is_module(sub) or alias.name.startswith("_")
                            else base))
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            fn = node.func
            name = fn.attr if isinstance(fn, ast.Attribute) else getattr(fn, "id", "")
            if name in ("import_module", "__import__") and isinstance(node.args[0].value, str):
                out.append((node.lineno, node.args[0].value))
        elif (isinstance(node, ast.Constant) and isinstance(node.value, str)
              and node.value.count(":") == 1 and node.value.split(":")[0].startswith(PACKAGES)
              and " " not in node.value):
            out.append((node.lineno, node.value.split(":")[0]))
    return out


def _private(dotted: str) -> bool:
    return any(part.startswith("_") for part in dotted.split(".")[1:])


def violation(module: str, target: str) -> str | None:
    """Why `module` may not import `target`, or None when it may."""
    top = target.split(".")[0]
    if top not in PACKAGES or module.split(".")[0] == top:
        if module.startswith("simcluster.node") and target.startswith(DRIVER_SIDE):
            return "simcluster's node-side code imports no driver-side code"
        return None
    if module.startswith("simcluster"):
        return "simcluster imports neither reference nor conformance"
    if module.startswith("conformance"):
        if module != REFERENCE_ADAPTER:
            return f"conformance reaches {top} only in {REFERENCE_ADAPTER}"
        if _private(target):
            return "the reference adapter uses public names only"
    if module.startswith("reference") and top == "simcluster" and target not in SIMCLUSTER_PUBLIC:
        return f"reference uses simcluster's public API only ({sorted(SIMCLUSTER_PUBLIC)})"
    if module.startswith("ci") and _private(target):
        return "ci/ uses public names only"
    return None


def _sources():
    for folder in (*PACKAGES, "ci"):
        yield from sorted((ROOT / folder).rglob("*.py"))


def test_names_loaded_by_string_and_private_names_follow_the_layering():
    found = []
    for path in _sources():
        module = _module_name(path)
        for line, target in imported_names(path.read_text(), module, path.name == "__init__.py"):
            why = violation(module, target)
            if why:
                found.append(f"{path.relative_to(ROOT)}:{line}: imports {target}: {why}")
    assert not found, "\n".join(found)


@pytest.mark.parametrize("module, source, expected", [
    ("conformance.checks.check_x", "import importlib\nimportlib.import_module('reference.train')",
     "only in conformance.adapters.reference_adapter"),
    (REFERENCE_ADAPTER, "import importlib\nimportlib.import_module('reference._runtime')",
     "public names only"),
    ("conformance.adapters", "ADAPTERS = {'x': 'simcluster.driver.cluster:Cluster'}",
     "only in conformance.adapters.reference_adapter"),
    ("reference.train.x", "def f():\n    from simcluster import _wire", "public API only"),
    ("simcluster.node.supervisor", "from ..driver import loop", "no driver-side code"),
    ("simcluster.cli.main", "__import__('conformance.probe')", "neither reference nor"),
    ("ci.bench.x", "from reference._runtime import PRELOAD", "public names only"),
])
def test_the_source_check_catches_a_wrong_import(module, source, expected):
    targets = [t for _, t in imported_names(source, module)]
    reasons = [violation(module, t) for t in targets]
    assert any(r and expected in r for r in reasons), (targets, reasons)


def test_the_source_check_allows_the_sanctioned_imports():
    allowed = [
        (REFERENCE_ADAPTER, "import importlib\nimportlib.import_module('reference.train')"),
        ("reference.train.x", "from simcluster import worker"),
        ("simcluster.driver.cluster", "from ..frontend.endpoint import Endpoint"),
        ("ci.bench.x", "from reference import PRELOAD"),
    ]
    for module, source in allowed:
        assert [violation(module, t) for _, t in imported_names(source, module)] == [None] * len(
            imported_names(source, module)), (module, source)


LINT_IMPORTS = shutil.which("lint-imports") or str(Path(sys.executable).parent / "lint-imports")


@pytest.mark.skipif(not Path(LINT_IMPORTS).exists(), reason="import-linter is not installed")
@pytest.mark.parametrize("where, bad_import, contract", [
    ("simcluster/node/_probe_bad.py", "def f():\n    from simcluster.driver import loop\n",
     "simcluster's node-side code"),
    ("simcluster/_probe_bad.py", "import reference.train\n", "simcluster knows nothing"),
    ("conformance/checks/_probe_bad.py", "from reference.train import ScalingConfig\n",
     "conformance reaches reference"),
    ("reference/_probe_bad.py", "from simcluster._wire import dumps\n",
     "reference uses simcluster's public API only"),
    ("simcluster/frontend/_probe_bad.py", "from simcluster.driver.driver import Driver\n",
     "simcluster's subpackages by role"),
])
def test_import_linter_catches_a_deliberately_wrong_import(tmp_path, where, bad_import, contract):
    for package in PACKAGES:
        shutil.copytree(ROOT / package, tmp_path / package,
                        ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    env = {"PATH": str(Path(sys.executable).parent), "PYTHONPATH": str(tmp_path)}
    clean = subprocess.run([LINT_IMPORTS], cwd=tmp_path, env=env, capture_output=True,
                           text=True, timeout=60)
    assert clean.returncode == 0, clean.stdout + clean.stderr
    (tmp_path / where).write_text(bad_import)
    broken = subprocess.run([LINT_IMPORTS], cwd=tmp_path, env=env, capture_output=True,
                            text=True, timeout=60)
    report = broken.stdout + broken.stderr
    assert broken.returncode != 0, report
    # the report wraps long lines: compare with whitespace collapsed
    verdict = " ".join(report.split()).partition("Broken contracts")[2]
    assert contract in verdict, report
    assert where.removesuffix(".py").replace("/", ".") + " ->" in verdict, report
