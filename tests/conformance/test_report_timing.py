"""The run's time at the end of a suite run: the wall time, the seconds summed over the
checks, then the slowest check files and checks."""

from __future__ import annotations

from conformance import report

pytest_plugins = ["pytester"]


def _check(cid: str, seconds: float) -> dict:
    return {"id": cid, "status": "pass", "clauses": [], "reason": "", "error": None,
            "message": None, "phase": "call", "duration_s": seconds}


def test_timing_names_the_slowest_files_and_checks():
    checks = [_check("check_a.py::check_1", 1.0), _check("check_a.py::check_2", 4.0),
              _check("check_b.py::check_3", 3.0), _check("check_c.py::check_4", 0.5)]
    rep = report.build("x", "1", "adapter", 1, "fast", checks, 12.34)
    lines = report.timing(rep, top=2).splitlines()
    assert lines == [
        "wall time 12.3 s; 8.5 s in 4 checks",
        "slowest 2 check files:",
        "      5.0 s  check_a.py (2 checks)",
        "      3.0 s  check_b.py (1 checks)",
        "slowest 2 checks:",
        "      4.0 s  check_a.py::check_2",
        "      3.0 s  check_b.py::check_3",
    ]


def test_the_plugin_prints_the_time_after_the_report(pytester, monkeypatch):
    pytester.makepyfile(fake_timing_adapter='''
import types
from conformance.adapters.base import Adapter

class FakeAdapter(Adapter):
    name = "fake"
    train = types.SimpleNamespace(__name__="fake_train")
    def version(self):
        return "1"
    def start_fit(self, make_trainer, deadline_s):
        raise NotImplementedError

def make():
    return FakeAdapter()
''')
    checks = pytester.path / "conformance_suite" / "checks"
    checks.mkdir(parents=True)
    (checks / "check_t.py").write_text("def check_one(impl):\n    pass\n")
    pytester.makeini("[pytest]\npython_files = check_*.py\npython_functions = check_*\n")
    monkeypatch.setenv("PYTHONPATH", str(pytester.path))
    result = pytester.runpytest_subprocess("conformance_suite", "--impl",
                                           "fake_timing_adapter:make", "-p",
                                           "no:cacheprovider", timeout=60)
    text = result.stdout.str()
    assert "trainspec conformance time" in text
    assert text.index("trainspec conformance report") < text.index("slowest 1 checks:")
    assert "check_t.py::check_one" in text.partition("slowest 1 checks:")[2]
