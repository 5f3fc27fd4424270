import pytest

from conformance import expectations as ex


def test_parse_and_match_longest_prefix():
    entries = ex.parse(
        "# comment\n"
        "check_faults.py | whole file\n"
        "check_faults.py::check_acknowledged | Ray drops unconsumed reports\n"
    )
    assert [e.prefix for e in entries] == ["check_faults.py", "check_faults.py::check_acknowledged"]
    hit = ex.match(entries, "conformance/checks/check_faults.py::check_acknowledged_checkpoint")
    assert hit.reason == "Ray drops unconsumed reports"
    assert ex.match(entries, "conformance/checks/check_report.py::check_barrier") is None


def test_malformed_line_names_the_line():
    with pytest.raises(ValueError, match="line 2"):
        ex.parse("ok.py | fine\nno reason here\n")


def test_stale_entries_are_reported():
    entries = ex.parse("a.py | r\nb.py | r\nc.py | r\n")
    entries[1].matched, entries[1].xpassed = 2, 2
    entries[2].matched, entries[2].xfailed = 1, 1
    stale = ex.stale(entries)
    assert len(stale) == 2
    assert "matches no check" in stale[0] and "'a.py'" in stale[0]
    assert "passed" in stale[1] and "'b.py'" in stale[1]


@pytest.mark.parametrize("impl", ["ray", "reference"])
def test_shipped_expectation_files_parse(impl):
    assert ex.load(ex.path_for(impl)) is not None
