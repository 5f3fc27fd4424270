"""A check that records where its devices were (`record_property("hardware", ...)`) has it
kept per check and per clause in the report, and shown in the Markdown note."""

from conformance import report


def _check(cid, hardware=None, status="pass"):
    row = {"id": f"check_accelerators.py::{cid}", "status": status,
           "clauses": ["accelerator.gpu-ids"], "reason": "", "error": None, "message": None,
           "phase": "call", "duration_s": 1.0}
    if hardware:
        row["hardware"] = hardware
    return row


def _build(checks):
    return report.build("reference", "0.1.0", "adapter", 1, "fast", checks, 1.0)


def test_the_clause_keeps_where_its_checks_ran_and_the_note_says_it():
    rep = _build([_check("a", "simulated"), _check("b", "real")])
    assert rep["clauses"]["accelerator.gpu-ids"]["hardware"] == "real+simulated"
    assert [c.get("hardware") for c in rep["checks"]] == ["simulated", "real"]
    line = next(x for x in report.markdown(rep).splitlines() if "accelerator.gpu-ids" in x)
    assert "hardware: real+simulated" in line


def test_a_clause_without_devices_has_no_hardware_entry():
    rep = _build([_check("a")])
    assert "hardware" not in rep["clauses"]["accelerator.gpu-ids"]
    line = next(x for x in report.markdown(rep).splitlines() if "accelerator.gpu-ids" in x)
    assert "hardware" not in line
