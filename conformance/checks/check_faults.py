"""Fault tolerance: restarts, the failure budget, what a restart resumes from (`fault.*`).

Faults are portable: "rank r raises / calls os._exit / is SIGKILLed just before its k-th
report on attempt a" (see `conformance.probe`). Schedules are Hypothesis strategies, so a
failing schedule shrinks to a minimal one.
"""

from __future__ import annotations

from hypothesis import example, given
from hypothesis import strategies as st

from conformance import assertions, journal_checks
from conformance.catalogue import clause
from conformance.probe import Fault, InjectedFault
from conformance.scenarios import new_script, run, workspace
from conformance.settings import fit_settings

# Each attempt advances at most 2 steps before its fault (report index <= 2), so 5 steps
# leave every scheduled fault a report to fire at.
STEPS = 5
WORKERS = 2


@st.composite
def schedules(draw):
    """One fault per attempt for the first f attempts, never at an attempt's first report
    after a restart (that case has its own SHOULD clause), and a failure budget."""
    failures = draw(st.integers(1, 2))
    faults = tuple(
        Fault(draw(st.sampled_from(["raise", "exit", "sigkill"])),
              rank=draw(st.integers(0, WORKERS - 1)),
              report=draw(st.integers(1, 2)), attempt=a)
        for a in range(failures)
    )
    max_failures = draw(st.sampled_from([failures - 1, failures, -1]))
    return faults, max_failures


def _run(impl, faults, max_failures, steps=STEPS, **kw):
    folder = workspace()
    script = new_script(impl, folder, steps=steps, faults=faults, **kw)
    return run(impl, script, num_workers=WORKERS, folder=folder,
               failure_config=impl.train.FailureConfig(max_failures=max_failures))


def _check_schedule(impl, faults, max_failures):
    # the pause before each report lets the implementation register the previous one
    # before a fault fires (the clause fault.restore-latest's 0.5 s, or the adapter's less)
    r = _run(impl, faults, max_failures, step_sleep_s=impl.report_settle_s)
    events = r.events()
    budget_ok = max_failures == -1 or len(faults) <= max_failures
    if not budget_ok:
        err = assertions.failed(r.outcome, impl.train.WorkerGroupError, r.setting)
        assertions.equal(isinstance(err, impl.train.TrainingFailedError), True,
                         "WorkerGroupError is a TrainingFailedError", r.setting)
        assertions.equal(len(journal_checks.attempts(events)), max_failures + 1,
                         "attempts started before fit() gave up", r.setting)
        return
    result = assertions.succeeded(r.outcome, r.setting)
    assertions.equal(len(r.events("fault")), len(faults), "faults that fired", r.setting)
    groups = journal_checks.attempts(events)
    assertions.equal(len(groups), len(faults) + 1, "attempts started", r.setting)
    assertions.verdict(journal_checks.ranks_complete(events), r.setting)
    pids = [{s["pid"] for s in starts} for starts in groups.values()]
    for a in range(1, len(pids)):
        assertions.equal(pids[a] & pids[a - 1], set(),
                         f"pids reused from attempt {a - 1} in attempt {a} (whole group restarts)",
                         r.setting)
    assertions.verdict(journal_checks.restores_latest(events), r.setting)
    assertions.equal(result.metrics["step"], STEPS - 1, "result.metrics['step']", r.setting)


@clause("fault.restart", "fault.max-failures", "fault.restore-latest",
        "fault.worker-group-error")
def check_fault_schedules(impl):
    @fit_settings(impl)
    @given(schedules())
    @example(((Fault("exit", rank=1, report=2, attempt=0),), 1))
    @example(((Fault("sigkill", rank=0, report=1, attempt=0),
               Fault("raise", rank=1, report=1, attempt=1)), -1))
    def prop(schedule):
        _check_schedule(impl, *schedule)

    prop()


@clause("fault.worker-group-error", "fault.max-failures")
def check_worker_failures_keyed_by_rank(impl):
    fault = Fault("raise", rank=1, report=1)
    r = _run(impl, (fault,), 0)
    err = assertions.failed(r.outcome, impl.train.WorkerGroupError, r.setting)
    failures = err.worker_failures
    assertions.equal(sorted(failures), [1], "sorted(worker_failures)", r.setting)
    original = failures[1]
    assertions.equal(type(original).__name__, InjectedFault.__name__,
                     "type of worker_failures[1]", r.setting)
    assertions.equal(str(original), str(fault), "str(worker_failures[1])", r.setting)
    text = str(err)
    header = "Training failed due to worker errors:"
    assertions.equal((text.startswith(header + "\n"), text.count(header)), (True, 1),
                     f"(str(WorkerGroupError) starts with {header!r}, times it is there)",
                     r.setting)
    snippet = text.find("[Rank 1 Error Snippet]")
    assertions.equal((snippet > 0, str(fault) in text[snippet:]), (True, True),
                     "(str(WorkerGroupError) has a '[Rank 1 Error Snippet]' block, rank 1's "
                     "error after it)", r.setting)
    assertions.equal(len(journal_checks.attempts(r.events())), 1,
                     "attempts with max_failures=0", r.setting)


@clause("fault.restart-first-report")
def check_failure_at_first_report_after_restart(impl):
    faults = (Fault("raise", rank=1, report=1, attempt=0),
              Fault("exit", rank=1, report=0, attempt=1))
    r = _run(impl, faults, 2)
    assertions.succeeded(r.outcome, r.setting)
    assertions.equal(len(journal_checks.attempts(r.events())), 3, "attempts started", r.setting)


@clause("fault.acknowledged-checkpoint")
def check_acknowledged_checkpoint_survives(impl):
    # rank 1 dies just before its 4th report, right after every rank's 3rd report returned
    fault = Fault("exit", rank=1, report=3)
    r = _run(impl, (fault,), 1, steps=5)
    assertions.succeeded(r.outcome, r.setting)
    events = r.events()
    acked = journal_checks.acknowledged_steps(events, 0)
    assertions.equal(acked[-1:], [2], "latest step acknowledged on every rank before the crash",
                     r.setting)
    assertions.verdict(journal_checks.restores_latest(events), r.setting)


@clause("fault.user-callbacks")
def check_user_callbacks_see_each_report_and_failure(impl):
    # rank 1 raises at its report 1: attempt 0 consolidates step 0 only; the restart
    # resumes from step 0's checkpoint and reports steps 1 and 2
    import os

    from conformance.probe import recorded_calls, recording_callback

    folder = workspace()
    calls_path = os.path.join(folder, "callback.jsonl")
    script = new_script(impl, folder, steps=3, faults=(Fault("raise", rank=1, report=1),),
                        step_sleep_s=impl.report_settle_s)
    r = run(impl, script, num_workers=WORKERS, folder=folder, name="with-callback",
            failure_config=impl.train.FailureConfig(max_failures=1),
            callbacks=[recording_callback(impl.train.__name__, calls_path)])
    setting = f"{r.setting}, RunConfig(callbacks=[a recording UserCallback])"
    assertions.succeeded(r.outcome, setting)
    ranks = list(range(WORKERS))
    expected = [
        dict(hook="after_report", run="with-callback", reports=[[k, 0] for k in ranks],
             checkpoint="ckpt-0000"),
        dict(hook="after_exception", run="with-callback", ranks=[1],
             types=[InjectedFault.__name__]),
        dict(hook="after_report", run="with-callback", reports=[[k, 1] for k in ranks],
             checkpoint="ckpt-0001"),
        dict(hook="after_report", run="with-callback", reports=[[k, 2] for k in ranks],
             checkpoint="ckpt-0002"),
    ]
    assertions.equal(recorded_calls(calls_path), expected,
                     "the UserCallback's calls (hook, run_context.get_run_config().name, "
                     "[rank, step] of each metrics dict, checkpoint folder; failed ranks and "
                     "exception types)", setting)
