"""The framework overhead benchmarks (ci/bench/lightning_overhead.py,
transformers_overhead.py): their tables on made-up numbers, and each script's --quick run
against plain and the reference (no Ray)."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "ci" / "bench"
PAIR = r"(-?\d+\.\d+%?) \((-?\d+\.\d+%?)\)"


@pytest.fixture(scope="module")
def fb():
    spec = importlib.util.spec_from_file_location("trainspec_framework_bench",
                                                  BENCH / "framework_bench.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _runs(*rates, threads=1, omp="1"):
    return [{"rate": r, "cpu_per_step": 1 / r, "wall": 10.0 + i, "launched_threads": threads,
             "omp": omp} for i, r in enumerate(rates)]


def test_throughput_table_best_median_and_overhead(fb):
    rows = [("no checkpoints", {"plain": _runs(100.0, 80.0, 90.0),
                                "reference": _runs(96.0, 70.0, 95.0, threads=2, omp=None),
                                "ray": [None, None]})]
    lines = fb.throughput_table(rows, ["plain", "reference", "ray"])
    assert "plain steps/s" in lines[0] and "Ray steps/s" in lines[0]
    line = lines[1]
    assert line.startswith("no checkpoints")
    assert "100.0 (90.0)" in line and "96.0 (95.0)" in line
    assert "4.0% (-5.6%)" in line  # (100 - 96) / 100, (90 - 95) / 90
    assert line.count("n/a") == 3  # Ray failed: no rate, no overhead, no wall
    assert "11.00 / 11.00 / n/a" in line  # median walls
    verdict = fb.target_lines(rows, ["plain", "reference", "ray"], 0.05)
    assert verdict == ["no checkpoints: reference vs plain 4.00% best, -5.56% median "
                       "(target <= 5%): met"]
    assert fb.target_lines(rows, ["plain", "reference"], 0.01)[0].endswith(
        "undecided (best and median disagree)")
    cpu = fb.cpu_table(rows, ["plain", "reference", "ray"])[1]
    assert "10.00 (11.11)" in cpu and "10.42 (10.53)" in cpu  # ms per step: 1 / rate
    assert "4.2% (-5.3%)" in cpu  # extra CPU against plain
    threads = fb.thread_lines(rows, ["plain", "reference"])[0]
    assert "plain 1 (OMP_NUM_THREADS=1); reference 2 (OMP_NUM_THREADS=unset)" in threads


def test_startup_table_takes_the_fastest_round(fb):
    fits = [{"fit_called": 100.0, "fn_start": 100.5, "first_step": 101.0, "wall": 2.0,
             "init_s": 4.0},
            {"fit_called": 200.0, "fn_start": 200.2, "first_step": 200.4, "wall": 3.0,
             "init_s": 5.0},
            None]
    lines = fb.startup_table([("Ray, fresh process", fits)])
    assert "fit->1st step s" in lines[0]
    assert re.findall(PAIR, lines[1]) == [("4.00", "4.50"), ("0.20", "0.35"),
                                          ("0.40", "0.70"), ("2.00", "2.50")]


def test_an_unknown_variant_is_refused_naming_the_known_ones(fb):
    plan = fb.Plan("x.py", print, {}, {"a": {}, "b": {}}, None, ())
    args = type("Args", (), {"variant": ["a", "c"]})()
    with pytest.raises(SystemExit, match=r"--variant: unknown \['c'\]; choose from \['a', 'b'\]"):
        fb.run_rounds(plan, args)


def test_alternate_reverses_odd_rounds(fb):
    assert fb.alternate(["a", "b", "c"], 0) == ["a", "b", "c"]
    assert fb.alternate({"a": 1, "b": 2}, 1) == ["b", "a"]


@pytest.mark.slow
@pytest.mark.parametrize("script, framework, rows", [
    # the variant that checkpoints (the other one runs the same code, less of it): each
    # variant launches the framework in 4 processes, 10-15 CPU-seconds of imports alone
    ("lightning_overhead.py", "lightning", ["checkpoint per epoch"]),
    ("transformers_overhead.py", "transformers", ["save every 10 steps"]),
])
def test_quick_run_prints_the_table(script, framework, rows):
    if importlib.util.find_spec(framework) is None:
        pytest.skip(f"{framework} is not installed")
    done = subprocess.run(
        [sys.executable, str(BENCH / script), "--quick", "--sides", "plain,reference",
         "--rounds", "1", "--timeout", "240",  # generous: CI runs it beside other tests
         *(arg for row in rows for arg in ("--variant", row))],
        capture_output=True, text=True, timeout=500, cwd=BENCH.parents[1])
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    lines = done.stdout.splitlines()
    for row in rows:
        line = next(line for line in lines if line.startswith(row + " "))
        pairs = re.findall(PAIR, line)
        assert len(pairs) == 3, line  # plain, reference, overhead
        assert all(float(best.rstrip("%")) > 0 for best, _ in pairs[:2]), line
        assert re.search(r"\d+\.\d+ / \d+\.\d+$", line), line
        assert any(t.startswith(f"{row}: reference vs plain") for t in lines)
    if framework == "lightning":
        for row in ("reference, warm cluster", "reference, fresh process"):
            line = next(line for line in lines if line.startswith(row))
            assert len(re.findall(PAIR, line)) >= 3, line
    assert "launch(es) failed" not in done.stdout
