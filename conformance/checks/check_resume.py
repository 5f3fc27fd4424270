"""Resume by name: a new fit() with the same (storage_path, name) (clause `resume.by-name`)."""

from __future__ import annotations

from conformance import assertions
from conformance.catalogue import clause
from conformance.probe import Fault
from conformance.scenarios import new_script, run, workspace


def _second_run_restores(impl, first_faults: tuple, first_ok: bool):
    folder = workspace()
    name = "resume-me"
    first = new_script(impl, folder, journal="first", steps=3, faults=first_faults)
    r1 = run(impl, first, num_workers=1, folder=folder, name=name)
    if first_ok:
        assertions.succeeded(r1.outcome, r1.setting)
        latest = 2
    else:
        assertions.failed(r1.outcome, impl.train.TrainingFailedError, r1.setting)
        latest = max(e["step"] for e in r1.events("reported"))
    second = new_script(impl, folder, journal="second", steps=5)
    r2 = run(impl, second, num_workers=1, folder=folder, name=name)
    setting = f"{r2.setting}, second fit() of name={name!r}"
    result = assertions.succeeded(r2.outcome, setting)
    (start,) = r2.events("start")
    assertions.equal((start["restored"] or {}).get("step"), latest,
                     "step of get_checkpoint() at the start of the second fit()", setting)
    assertions.equal(result.metrics["step"], 4, "result.metrics['step'] of the second fit()",
                     setting)


@clause("resume.by-name")
def check_resume_after_finished_run(impl):
    _second_run_restores(impl, (), first_ok=True)


@clause("resume.by-name")
def check_resume_after_failed_run(impl):
    _second_run_restores(impl, (Fault("raise", rank=0, report=2),), first_ok=False)

