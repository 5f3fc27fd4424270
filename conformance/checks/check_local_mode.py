"""Local mode, num_workers=0 (clauses `local.*`)."""

from __future__ import annotations

import os

from conformance import assertions
from conformance.catalogue import clause
from conformance.probe import Fault, InjectedFault
from conformance.scenarios import collectives_seen, new_script, run, shared, workspace


def _local_run(impl):
    def build(impl):
        folder = workspace()
        script = new_script(impl, folder, steps=4, checkpoints={0: (0,), 2: (0,)})
        return run(impl, script, num_workers=0, folder=folder)

    return shared(impl, "local", build)


@clause("local.in-driver")
def check_runs_in_driver(impl):
    r = _local_run(impl)
    assertions.succeeded(r.outcome, r.setting)
    (fit,) = r.events("fit")
    (start,) = r.events("start")
    assertions.equal(start["pid"], fit["pid"],
                     "pid of the training function (pid of fit()'s caller)", r.setting)
    seen = (start["rank"], start["world_size"], start["local_rank"], start["local_world_size"],
            start["node_rank"])
    assertions.equal(seen, (0, 1, 0, 1, 0),
                     "(rank, world_size, local_rank, local_world_size, node_rank)", r.setting)


@clause("local.result")
def check_local_result(impl):
    r = _local_run(impl)
    result = assertions.succeeded(r.outcome, r.setting)
    assertions.equal(result.metrics, {"step": 3, "rank": 0, "attempt": 0},
                     "result.metrics (last report, which had no checkpoint)", r.setting)
    assertions.equal(result.checkpoint, None, "result.checkpoint (last report had none)",
                     r.setting)
    assertions.equal(result.path, None, "result.path", r.setting)
    local = os.path.join(r.journal.folder, "local")
    after = {e["step"]: e["checkpoint_path"] for e in r.events("reported")}
    assertions.equal(after, {0: os.path.join(local, "a0-r0-s0"), 1: None,
                             2: os.path.join(local, "a0-r0-s2"), 3: None},
                     "get_checkpoint() after each report (the user's own directory)", r.setting)
    assertions.equal(result.return_value, {"rank": 0, "attempt": 0, "world_size": 1},
                     "result.return_value", r.setting)


@clause("local.exceptions")
def check_exception_propagates_unwrapped(impl):
    folder = workspace()
    fault = Fault("raise", rank=0, report=1)
    script = new_script(impl, folder, steps=3, faults=(fault,))
    r = run(impl, script, num_workers=0, folder=folder)
    err = assertions.failed(r.outcome, InjectedFault, r.setting)
    assertions.equal(str(err), str(fault), "message of the exception fit() raised", r.setting)
    if isinstance(err, impl.train.TrainingFailedError):
        raise AssertionError(f"fit() wrapped the exception in {type(err).__name__} "
                             f"[{r.setting}]")


@clause("local.collectives")
def check_collectives_of_one_rank(impl):
    r, seen = collectives_seen(impl, num_workers=0)
    assertions.succeeded(r.outcome, r.setting)
    assertions.equal(len(r.events("collective")), 1, "collective events journalled", r.setting)
    assertions.equal(seen, {0: ({"from_rank": 0}, "None")},
                     "rank -> (broadcast_from_rank_zero({'from_rank': 0}), barrier()) in "
                     "local mode", r.setting)
