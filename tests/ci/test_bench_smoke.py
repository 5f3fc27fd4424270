"""The benchmark harness's table, JSON and doc builders on made-up numbers (no fit, no Ray)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "ci" / "bench" / "bench.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("trainspec_bench", BENCH)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _cell(samples, errors=()):
    return {"samples": list(samples), "errors": list(errors), "notes": []}


def _fake_report(bench):
    results = {
        "reference": {
            "fit_s": _cell([0.07, 0.08, 0.075]),
            "report_s": _cell([0.0003, 0.00028]),
            "recovery_s": _cell([], errors=["TrainingFailedError: boom"]),
            "ckpt_copy_s": _cell([0.3]),
            "ckpt_copy_mbps": _cell([853.3]),
            "scale_fit_s": _cell([55.0, 58.0]),
            "scale_peak_rss": _cell([15.5 * 2**30]),
            "ddp_overhead": {"text": "n/a"},
        },
        "ray": {
            "fit_s": _cell([8.1, 10.5, 9.0]),
            "report_s": _cell([0.108, 0.105]),
            "recovery_s": _cell([5.6, 7.0]),
            "ckpt_copy_s": _cell([0.6]),
            "ckpt_copy_mbps": _cell([426.7]),
            "scale_fit_s": {"na": bench.RAY_SCALE_NOTE},
        },
    }
    limits = {"python_pair_s": _cell([0.09, 0.1]), "tcp_rtt_s": _cell([4e-5]),
              "cp_s": _cell([0.19])}
    meta = {"generated": "2030-01-02 03:04 UTC", "date": "2030-01-02", "command": "x",
            "rounds": 2, "quick": False, "machine": {"nproc": 2, "cpu_model": "CPU",
                                                     "memory_bytes": 24 * 2**30}}
    params = {j: bench.JOBS[j].params for j in ("1", "2", "3", "4", "5", "7")}
    return bench.build_report(results, limits, meta=meta, params=params,
                              ran_jobs=["1", "2", "3", "4", "5", "7"])


def test_formatting_picks_units(bench):
    assert bench.fmt_value(0.00004, "s") == "40.0 us"
    assert bench.fmt_value(0.0712, "s") == "71.2 ms"
    assert bench.fmt_value(9.04, "s") == "9.04 s"
    assert bench.fmt_value(15.5 * 2**30, "bytes") == "15.5 GB"
    summary = bench.summarize([0.07, 0.09, 0.08])
    assert summary == {"median": 0.08, "min": 0.07, "max": 0.09, "n": 3}
    assert bench.fmt_summary(summary, "s") == "80.0 ms [70.0..90.0] n=3"
    assert bench.summarize([]) is None


def test_report_json_and_table(bench):
    report = _fake_report(bench)
    json.loads(json.dumps(report))  # serialisable as it is written
    by_key = {m["key"]: m for m in report["metrics"]}
    fit = by_key["fit_s"]
    assert fit["reference"]["summary"]["median"] == pytest.approx(0.075)
    assert fit["ratio"] == pytest.approx(0.075 / 9.0)
    assert fit["limit"]["summary"]["median"] == pytest.approx(0.095)
    assert by_key["recovery_s"]["ratio"] is None
    assert by_key["ckpt_copy_s"]["label"] == "report() of 2 x 128 MB checkpoint files"

    text = bench.format_table(report)
    assert "75.0 ms [70.0..80.0] n=3" in text
    assert "9.00 s [8.10..10.5] n=3" in text
    assert "0.008x" in text
    assert "error: TrainingFailedError: boom" in text
    assert "Not run: job 6 (conformance suite)." in text
    assert "Ray cannot run this here" in text
    md = bench.markdown_table(report)
    table = [line for line in md.splitlines() if line.startswith("|")]
    header_cols = table[0].count("|")
    assert all(line.count("|") == header_cols for line in table)
    assert not any(line.startswith("| 6 ") for line in table)  # job 6 never ran


def test_merge_previous_carries_cells_not_run(bench):
    old = _fake_report(bench)
    old["metrics"] = [dict(m) for m in old["metrics"]]
    for m in old["metrics"]:
        if m["key"] == "suite_s":
            m["reference"] = {"samples": [300.0], "errors": [], "notes": [],
                              "summary": bench.summarize([300.0])}
    new = _fake_report(bench)
    new["date"] = "2030-02-01"
    merged = bench.merge_previous(new, old)
    suite = next(m for m in merged["metrics"] if m["key"] == "suite_s")
    assert suite["reference"]["carried_from"] == "2030-01-02 03:04 UTC"
    fit = next(m for m in merged["metrics"] if m["key"] == "fit_s")
    assert "carried_from" not in fit["reference"]  # measured now: not replaced
    assert "* not measured in this run" in bench.format_table(merged)


def test_update_doc_keeps_hand_written_rows(bench):
    report = _fake_report(bench)
    first = bench.update_doc(None, bench.render_doc_block(report, "benchmarks.png"))
    assert first.count(bench.BEGIN) == 1 and "## Performance work" in first
    assert "| change | prediction | measured effect |" in first
    edited = first.replace("| _(none yet)_ | | |", "| preload | fit -50% | fit -48% |")
    report["generated"] = "2031-01-01 00:00 UTC"
    second = bench.update_doc(edited, bench.render_doc_block(report, None))
    assert "| preload | fit -50% | fit -48% |" in second
    assert "2031-01-01" in second and "2030-01-02 03:04" not in second
    assert second.count(bench.BEGIN) == 1 and second.count(bench.END) == 1


def test_record_spreads_a_child_error_over_the_jobs_measures(bench):
    results = {}
    bench._record(results, "ray", "4", {"error": "timed out after 300 s", "log": "..."})
    bench._record(results, "ray", "4", {"metrics": {"ckpt_copy_s": [0.5], "ckpt_move_s": [0.7]}})
    cells = results["ray"]
    assert set(cells) == {"ckpt_copy_s", "ckpt_copy_mbps", "ckpt_move_s"}
    assert cells["ckpt_copy_s"]["samples"] == [0.5]
    assert cells["ckpt_copy_mbps"]["errors"] == ["timed out after 300 s"]
    assert bench.fmt_cell(bench.finish_cell(cells["ckpt_copy_s"]), "s") == "500 ms (1 failed)"


def test_torch_overhead_figure_reads_the_printed_table(bench):
    out = ("2 workers, gloo, median of 3 rounds\n"
           "workload    plain steps/s  reference steps/s  overhead  plain wall s\n"
           "mlp                  93.0               95.8     -3.1%         19.01\n"
           "cnn                  13.8               13.5      2.2%         48.98\n")
    assert bench.torch_overhead_figure(out) == (
        "mlp -3.1%, cnn 2.2% (overhead in steps/s vs plain torch.distributed)")
    best_and_median = ("workload   plain steps/s   reference steps/s   overhead   wall s\n"
                       "mlp   176.8 (141.4)   180.3 (152.5)   -2.0% ( -7.9%)   10.40 / 4.45\n")
    assert bench.torch_overhead_figure(best_and_median).startswith("mlp -2.0% (-7.9%) (")
    assert bench.torch_overhead_figure("setup\noverhead: 1.5 ms per step\n") == (
        "overhead: 1.5 ms per step")
