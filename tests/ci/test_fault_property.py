"""ci/fault_property.py: its verdicts on made-up fits, and the drawn property itself on a
modest number of crash schedules (the script runs 200 or more)."""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

CI = Path(__file__).resolve().parents[2] / "ci"
if str(CI) not in sys.path:  # ci/ is no package
    sys.path.insert(0, str(CI))
fp = importlib.import_module("fault_property")


class PolicyError(RuntimeError):
    pass


SCHEDULE = fp.Schedule(num_workers=2, steps=3, checkpoints="all", kills=(
    fp.Kill(attempt=0, rank=1, report=1, delay_ms=None, lead_ms=0.0, victim_last=True),))


def run_folder(tmp_path, registered=("ckpt-0002",), extra=()):
    run = tmp_path / "run"
    run.mkdir(parents=True)
    for name in (*registered, *extra):
        (run / name).mkdir()
    (run / ".validate_storage_marker").write_text("")
    entries = [{"checkpoint_dir_name": n, "metrics": {}} for n in registered]
    (run / "checkpoint_manager_snapshot.json").write_text(json.dumps(
        {"checkpoint_results": entries,
         "latest_checkpoint_result": entries[-1] if entries else None}))
    return str(run)


def events(acked=(0, 1), killed_attempts=(0,)):
    out = [{"ev": "start", "rank": r, "attempt": 0, "restored": None} for r in (0, 1)]
    out += [{"ev": "acked", "rank": 0, "attempt": 0, "step": s, "checkpoint": s} for s in acked]
    out += [{"ev": "kill", "rank": 1, "attempt": a, "step": 1} for a in killed_attempts]
    return out


def judge(tmp_path, error=None, final_step=2, evs=None, **folder):
    return fp.verdict(SCHEDULE, events() if evs is None else evs, error, final_step,
                      run_folder(tmp_path, **folder), PolicyError)


def test_a_clean_fit_has_no_violation(tmp_path):
    assert judge(tmp_path) == ("ok", [])


def test_an_error_that_is_not_the_policys_is_an_internal_error(tmp_path):
    outcome, violations = judge(tmp_path, error=EOFError("connection to worker w-3 is closed"))
    assert outcome == "EOFError"
    assert violations == ["internal error builtins.EOFError: connection to worker w-3 is closed"]


def test_the_policys_error_needs_the_budget_spent(tmp_path):
    _, violations = judge(tmp_path, error=PolicyError("rank 1 died"), final_step=None)
    assert violations[0].startswith("failed with failure budget left (1 attempts killed")
    spent = events(killed_attempts=range(4))
    assert judge(tmp_path / "b", error=PolicyError("x"), evs=spent, final_step=None) \
        == ("policy error", [])


def test_an_acknowledged_checkpoint_the_result_lacks_is_lost(tmp_path):
    _, violations = judge(tmp_path, evs=events(acked=(0, 1, 2)), final_step=1,
                          registered=("ckpt-0001",))
    assert violations == ["lost acknowledged checkpoint: the fit ends at step 1, step 2 was "
                          "acked", "the fit succeeded at step 1, expected 2"]


def test_a_restart_that_restores_less_than_acknowledged_is_a_loss(tmp_path):
    evs = events(acked=(0,)) + [{"ev": "start", "rank": 0, "attempt": 1, "restored": None}]
    _, violations = judge(tmp_path, evs=evs)
    assert violations == ["lost acknowledged checkpoint: attempt 1 rank 0 restored None, step "
                          "0 was acked"]


def test_anything_but_registered_checkpoints_and_rays_files_is_litter(tmp_path):
    _, violations = judge(tmp_path, extra=(".tmp-stage-1a2b3c4d-a0-1", "ckpt-0001"))
    assert violations == ["run folder holds more than registered checkpoints and Ray's files: "
                          "['.tmp-stage-1a2b3c4d-a0-1', 'ckpt-0001']"]


def test_figures_count_fits_kills_and_violations():
    figures = fp.Figures()
    figures.add(fp.FitReport(SCHEDULE, kills=1, restarts=1, outcome="ok", violations=[]))
    figures.add(fp.FitReport(SCHEDULE, kills=2, restarts=1, outcome="ChannelClosed",
                             violations=["internal error x.ChannelClosed: closed"]))
    text = figures.render()
    for line in ("fits: 2", "faults scheduled: 2", "kills: 3",
                 "violations: 1 in 1 fits", "  internal error x.ChannelClosed: 1"):
        assert line in text.splitlines()


def test_a_non_positive_fit_count_is_refused(capsys):
    with pytest.raises(SystemExit) as info:
        fp.main(["--fits", "0"])
    assert info.value.code == 2 and "--fits=0" in capsys.readouterr().err


# ------------------------------------------------------------ the property, on real fits
@pytest.fixture(scope="module")
def cluster():
    import cloudpickle

    import reference

    cloudpickle.register_pickle_by_value(fp)  # the workers cannot import ci/
    reference.shutdown()
    reference.init(num_cpus=fp.CLUSTER_CPUS)
    yield
    reference.shutdown()


@pytest.mark.slow
@settings(max_examples=20, deadline=None, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(schedule=fp.schedules())
def test_drawn_crash_schedules_keep_every_guarantee(cluster, schedule):
    report = fp.run_fit(schedule)
    assert report.violations == [], f"{report.violations} [{schedule!r}]"
