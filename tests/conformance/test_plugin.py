"""The pytest layer, end to end on a fake implementation: header, statuses (a hang is a
verdict, not a stuck run), expectations, and the JSON report."""

import json
import textwrap

pytest_plugins = ["pytester"]

ADAPTER = '''
import time, types
from conformance.adapters.base import Adapter
from conformance.adapters.reference_adapter import _ThreadFit

class Slow:
    def fit(self):
        time.sleep(30)

class Fast:
    def fit(self):
        return "done"

class FakeAdapter(Adapter):
    name = "fake"
    fit_deadline_s = 0.5

    @property
    def train(self):
        return types.SimpleNamespace(__name__="fake_train")

    def version(self):
        return "9.9"

    def start_fit(self, make_trainer, deadline_s):
        return _ThreadFit(self, make_trainer, deadline_s)

    sessions = 0  # calls of ensure_session

    def ensure_session(self):
        type(self).sessions += 1

def make():
    return FakeAdapter()
'''

CHECKS = '''
from conformance import assertions
from conformance.adapters.base import Unsupported
from conformance.catalogue import clause
from fake_adapter import Fast, Slow

@clause("report.barrier")
def check_hangs(impl):
    assertions.succeeded(impl.fit(Slow))

@clause("report.layout")
def check_passes(impl):
    assert assertions.succeeded(impl.fit(Fast)) == "done"

@clause("report.rank0-metrics")
def check_fails(impl):
    assert False, "broken on purpose"

@clause("context.multi-node")
def check_unsupported(impl):
    raise Unsupported("no nodes here")
'''


def test_statuses_header_and_report(pytester, monkeypatch):
    pytester.makepyfile(fake_adapter=ADAPTER)
    pytester.mkpydir("conformance_suite")
    checks = pytester.path / "conformance_suite" / "checks"
    checks.mkdir()
    (checks / "check_fake.py").write_text(textwrap.dedent(CHECKS))
    pytester.makeini("[pytest]\npython_files = check_*.py\npython_functions = check_*\n")
    monkeypatch.setenv("PYTHONPATH", str(pytester.path))
    out = pytester.path / "out"
    expected = pytester.path / "fake.txt"
    expected.write_text("check_fake.py::check_fails | known breakage\n"
                        "check_fake.py::check_passes | fixed since\n")
    result = pytester.runpytest_subprocess(
        "conformance_suite", "--impl", "fake_adapter:make", "--conformance-report", str(out),
        "--expectations", str(expected), "-p", "no:cacheprovider", timeout=60)
    text = result.stdout.str()
    assert "implementation=fake_adapter:make version=9.9" in text
    assert "hypothesis_seed=" in text
    report = json.loads((out / "fake.json").read_text())
    statuses = {c["id"].split("::")[1]: c["status"] for c in report["checks"]}
    assert statuses == {"check_hangs": "hang", "check_passes": "xpass", "check_fails": "xfail",
                        "check_unsupported": "skip"}
    by_name = {c["id"].split("::")[1]: c for c in report["checks"]}
    hang, failed = by_name["check_hangs"], by_name["check_fails"]
    assert (hang["error"], hang["phase"]) == ("HangVerdict", "call")
    assert hang["message"].startswith("fit() did not finish within its deadline")
    assert (failed["error"], failed["message"]) == ("AssertionError",
                                                    "broken on purpose\nassert False")
    assert [by_name[n]["error"] for n in ("check_passes", "check_unsupported")] == [None, None]
    assert "stale expectation (fake_adapter:make): line 2: 'check_fake.py::check_passes'" in text
    assert report["clauses"]["report.barrier"]["status"] == "hang"
    assert report["clauses"]["context.multi-node"]["reasons"] == ["Skipped: no nodes here"]
    assert report["clauses"]["scaling.defaults"]["status"] == "untested"
    assert report["clauses"]["report.rank0-metrics"]["reasons"] == ["known breakage"]
    assert "| `report.layout` | MUST | pass (xpass) | 1 |" in (out / "fake.md").read_text()


ORDER_CHECKS = {
    "check_one.py": "def check_a_plain(impl):\n    pass\n",
    "check_two.py": ("import pytest\n\n@pytest.mark.cluster\ndef check_b_cluster(impl):\n"
                     "    pass\n\ndef check_c_plain(impl):\n    pass\n\n"
                     "def check_d_plain(impl):\n    pass\n\n@pytest.mark.cluster\n"
                     "def check_e_cluster(impl):\n    pass\n"),
    "check_three.py": "def check_f_plain(impl):\n    pass\n\ndef check_g_plain(impl):\n"
                      "    pass\n",
}


def test_cluster_checks_run_first_then_the_biggest_files(pytester, monkeypatch):
    pytester.makepyfile(fake_adapter=ADAPTER)
    checks = pytester.path / "conformance_suite" / "checks"
    checks.mkdir(parents=True)
    for name, text in ORDER_CHECKS.items():
        (checks / name).write_text(text)
    pytester.makeini("[pytest]\npython_files = check_*.py\npython_functions = check_*\n"
                     "markers = cluster: starts a cluster\n")
    monkeypatch.setenv("PYTHONPATH", str(pytester.path))
    result = pytester.runpytest_subprocess(
        "conformance_suite/checks/check_one.py", "conformance_suite/checks/check_two.py",
        "conformance_suite/checks/check_three.py", "--impl", "fake_adapter:make",
        "--collect-only", "-q", "-p", "no:cacheprovider", timeout=60)
    order = [line.rpartition("::")[2] for line in result.stdout.lines if "::check_" in line]
    assert order == ["check_b_cluster", "check_e_cluster", "check_c_plain", "check_d_plain",
                     "check_f_plain", "check_g_plain", "check_a_plain"]


SESSION_CHECKS = """
import pytest

@pytest.mark.cluster
def check_a_cluster(impl):
    assert impl.sessions == 0  # it builds a cluster of its own: no default session asked for

def check_b_plain(impl):
    assert impl.sessions == 1

def check_c_plain(impl):
    assert impl.sessions == 2
"""


def test_each_check_without_a_cluster_of_its_own_asks_for_the_session(pytester, monkeypatch):
    pytester.makepyfile(fake_adapter=ADAPTER)
    checks = pytester.path / "conformance_suite" / "checks"
    checks.mkdir(parents=True)
    (checks / "check_session.py").write_text(SESSION_CHECKS)
    pytester.makeini("[pytest]\npython_files = check_*.py\npython_functions = check_*\n"
                     "markers = cluster: starts a cluster\n")
    monkeypatch.setenv("PYTHONPATH", str(pytester.path))
    result = pytester.runpytest_subprocess(
        "conformance_suite/checks/check_session.py", "--impl", "fake_adapter:make",
        "-p", "no:cacheprovider", timeout=60)
    result.assert_outcomes(passed=3)
