import os

import pytest

from conformance import expectations as ex
from conformance import spec
from conformance.catalogue import CLAUSES


def _fields(entries):
    return [(e.prefix, e.reason, e.line) for e in entries]


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


def test_load_reads_entries_with_their_line_numbers(tmp_path):
    path = tmp_path / "impl.txt"
    path.write_text(
        "# header comment\n"
        "\n"
        "check_report.py::check_barrier | rank 1 returns early\n"
        "   # indented comment\n"
        "  check_faults.py  |  reason with | a bar and ray-project/ray#56718  \n"
    )
    assert _fields(ex.load(str(path))) == [
        ("check_report.py::check_barrier", "rank 1 returns early", 3),
        ("check_faults.py", "reason with | a bar and ray-project/ray#56718", 5),
    ]
    assert [(e.matched, e.xfailed, e.xpassed) for e in ex.load(str(path))] == [(0, 0, 0)] * 2


def test_load_of_a_missing_file_is_empty(tmp_path):
    assert ex.load(str(tmp_path / "none.txt")) == []


def test_path_for_names_the_shipped_file():
    assert ex.path_for("ray").endswith("conformance/expectations/ray.txt")


@pytest.mark.parametrize("text, line", [
    ("ok.py | fine\nno reason here\n", 2),
    ("check_faults.py |   \n", 1),
    ("# comment\n\n| no prefix: it would match every check\n", 3),
    ("check_x.py\n", 1),
])
def test_malformed_line_names_the_line_and_the_format(text, line):
    bad = text.splitlines()[line - 1]
    with pytest.raises(ValueError) as info:
        ex.parse(text)
    assert str(info.value) == (f"expectations line {line}: {bad!r}: expected "
                               "'<prefix> | <reason>'")


def test_check_id_is_relative_to_the_checks_folder():
    assert ex.check_id("conformance/checks/check_faults.py::check_x[a]") == \
        "check_faults.py::check_x[a]"
    assert ex.check_id("check_faults.py::check_x") == "check_faults.py::check_x"


def test_stale_entries_are_reported():
    entries = ex.parse("a.py | r\nb.py | r\nc.py | r\n")
    entries[1].matched, entries[1].xpassed = 2, 2
    entries[2].matched, entries[2].xfailed = 1, 1
    assert ex.stale(entries) == [
        "line 1: 'a.py' matches no check",
        "line 2: 'b.py': every matching check that ran passed (2)",
    ]


def _check_ids() -> set[str]:
    return {check for checks in spec.coverage().values() for check in checks}


@pytest.mark.parametrize("impl", ["ray", "reference"])
def test_shipped_expectation_files_name_existing_checks(impl):
    path = ex.path_for(impl)
    assert os.path.isfile(path)
    checks = _check_ids()
    for e in ex.load(path):
        assert any(c.startswith(e.prefix) for c in checks), \
            f"{impl}.txt line {e.line}: {e.prefix!r} matches no check"


def test_ray_deviates_only_from_should_clauses():
    """Ray 2.60 defines the contract: a MUST clause it fails would be a catalogue error."""
    entries = ex.load(ex.path_for("ray"))
    assert entries
    cover = spec.coverage()
    for e in entries:
        clauses = {cid for cid, checks in cover.items()
                   if any(c.startswith(e.prefix) for c in checks)}
        assert clauses, e
        must = sorted(cid for cid in clauses if CLAUSES[cid].level == "MUST")
        assert must == [], f"ray.txt line {e.line} excuses MUST clauses {must}"
