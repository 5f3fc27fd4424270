"""The HTML matrix of conformance reports: `report.html()` and
`python -m conformance compare A.json B.json --html out.html` (run for real): one row per
clause, one coloured cell per implementation, the counts per implementation on top."""

import json
import re

import pytest
from conformance_cli_run import run

from conformance import report


def _report(impl, version, statuses):
    clauses = {cid: {"level": "MUST", "title": f"title of {cid} <&>", "status": status,
                     "checks": [f"check_x.py::check_{cid.replace('.', '_')}"],
                     "reasons": [] if status == "pass" else [f"{impl} said no"]}
               for cid, status in statuses.items()}
    totals = {}
    for c in clauses.values():
        totals[c["status"]] = totals.get(c["status"], 0) + 1
    return {"implementation": impl, "version": version, "adapter": f"{impl}:Adapter",
            "hypothesis_seed": 1, "hypothesis_profile": "fast", "platform": "test",
            "date": "2026-01-01 00:00:00 UTC", "wall_s": 1.5, "totals": totals,
            "clauses": clauses, "checks": []}


REFERENCE = _report("reference", "0.1.0", {"scaling.defaults": "pass", "report.layout": "pass",
                                           "tune.stop": "skip", "data.epochs": "fail"})
RAY = _report("ray", "2.60.0", {"scaling.defaults": "pass", "report.layout": "xfail",
                                "tune.stop": "hang", "data.epochs": "pass"})


def _cells(html):
    rows = re.findall(r'<tr id="([^"]+)">(.*?)</tr>', html)
    return {cid: re.findall(r'<td class="status-(\w+)"', row) for cid, row in rows}


def test_html_has_one_row_per_clause_and_a_classed_cell_per_implementation():
    html = report.html([REFERENCE, RAY])
    assert _cells(html) == {"scaling.defaults": ["pass", "pass"],
                            "report.layout": ["pass", "xfail"],
                            "tune.stop": ["skip", "hang"],
                            "data.epochs": ["fail", "pass"]}
    assert "title of scaling.defaults &lt;&amp;&gt;" in html  # escaped
    assert 'title="ray said no"' in html
    assert "<th>reference 0.1.0</th>" in html and "<th>ray 2.60.0</th>" in html
    counts = dict(re.findall(r'<tr><th>(\w+)</th>(.*?)</tr>', html))
    assert re.findall(r">(\d+)<", counts["pass"]) == ["2", "2"]
    assert re.findall(r">(\d+)<", counts["hang"]) == ["0", "1"]
    assert "<script" not in html and "<link" not in html  # self-contained


def test_html_of_no_report_is_refused():
    with pytest.raises(ValueError, match=r"reports=\[\]"):
        report.html([])


def test_compare_writes_the_html_matrix(tmp_path):
    a, b, out = tmp_path / "reference.json", tmp_path / "ray.json", tmp_path / "out.html"
    a.write_text(json.dumps(REFERENCE))
    b.write_text(json.dumps(RAY))
    result = run("compare", str(a), str(b), "--html", str(out))
    assert result.returncode == 0, result.stderr
    assert "| `tune.stop` | MUST | skip | HANG |" in result.stdout  # the Markdown still prints
    cells = _cells(out.read_text())
    assert list(cells) == list(REFERENCE["clauses"])
    assert cells["report.layout"] == ["pass", "xfail"]


def test_compare_of_a_file_that_is_no_report_is_one_clear_error(tmp_path):
    bogus = tmp_path / "bogus.json"
    bogus.write_text('{"hello": 1}')
    result = run("compare", str(bogus))
    assert result.returncode == 2
    assert "is not a conformance report" in result.stderr and "Traceback" not in result.stderr
    missing = run("report", str(tmp_path / "missing.json"))
    assert missing.returncode == 2 and "cannot read report" in missing.stderr


def test_real_reports_render(tmp_path):
    import os

    from conformance_cli_run import REPO

    paths = [os.path.join(REPO, "docs", "reports", f"{n}.json") for n in ("reference", "ray")]
    if not all(os.path.exists(p) for p in paths):
        pytest.skip("docs/reports/*.json are not in this checkout")
    reports = [json.load(open(p)) for p in paths]
    cells = _cells(report.html(reports))
    assert len(cells) == len(dict.fromkeys(c for r in reports for c in r["clauses"]))
    assert all(len(v) == 2 for v in cells.values())
