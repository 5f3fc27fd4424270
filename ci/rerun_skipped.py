"""Run again the unit tests that the README's environment skipped for want of Ray.

    python ci/rerun_skipped.py [reports/readme-tests.xml] [-- pytest options]

The README's test command installs every extra but `ray`, so the tests that compare the
reference with Ray 2.60 skip there. CI runs that command verbatim first, then installs Ray
(`ci/setup.sh`) and runs this: it reads the JUnit report of the first run, picks every test
(or whole module, for a module-level skip) whose skip reason names Ray, and runs exactly
those, so every test still runs once with what it needs and none runs twice.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RAY_REASON = re.compile(r"\bray\b|'ray[.']", re.I)


def _module_path(dotted: str) -> tuple[str, list[str]]:
    """('tests/a/test_b.py', ['TestClass']) for a JUnit classname 'tests.a.test_b.TestClass'."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        path = "/".join(parts[:cut]) + ".py"
        if os.path.isfile(os.path.join(ROOT, path)):
            return path, parts[cut:]
    raise ValueError(f"no test module for JUnit classname {dotted!r}")


def skipped_for_ray(junit_path: str) -> list[str]:
    """Node ids (or module paths) of the tests the report says were skipped because of Ray."""
    found: list[str] = []
    for case in ET.parse(junit_path).iter("testcase"):
        skip = case.find("skipped")
        if skip is None:
            continue
        reason = f"{skip.get('message', '')} {skip.text or ''}"
        if not RAY_REASON.search(reason):
            continue
        classname, name = case.get("classname", ""), case.get("name", "")
        if not classname:  # a module skipped at collection: its dotted name is the name
            found.append(_module_path(name)[0])
            continue
        path, classes = _module_path(classname)
        found.append("::".join([path, *classes, name]))
    return sorted(set(found))


def main(argv: list[str]) -> int:
    extra = argv[argv.index("--") + 1:] if "--" in argv else []
    args = argv[:argv.index("--")] if "--" in argv else argv
    junit = args[0] if args else os.path.join(ROOT, "reports", "readme-tests.xml")
    targets = skipped_for_ray(junit)
    print(f"{len(targets)} tests or modules skipped for want of Ray in {junit}: running them "
          "with Ray installed", flush=True)
    if not targets:
        return 0
    return subprocess.call([sys.executable, "-m", "pytest", *extra, *targets], cwd=ROOT)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
