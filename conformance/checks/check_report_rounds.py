"""How report rounds are consolidated, beyond what check_report.py covers (`report.*`):
metrics-only rounds, and the report-wait warning's variable in the driver's environment."""

from __future__ import annotations

import os

from conformance import assertions
from conformance.catalogue import clause
from conformance.probe import run_script
from conformance.scenarios import (
    TrainerFactory,
    WithDriverEnviron,
    new_script,
    run,
    workspace,
)


@clause("report.free-metrics-any-value")
def check_metrics_only_rounds_need_not_be_storable(impl):
    folder = workspace()
    script = new_script(impl, folder, steps=2, checkpoints={},
                        metrics={0: {"obj": object()}, 1: {"obj": object()}})
    r = run(impl, script, num_workers=2, folder=folder,
            failure_config=impl.train.FailureConfig(max_failures=0))
    setting = f"{r.setting}, every rank reports {{'obj': object(), ...}} without a checkpoint"
    result = assertions.succeeded(r.outcome, setting)
    assertions.equal(result.metrics, None, "Result.metrics (no checkpoint was reported)",
                     setting)
    assertions.equal(sorted((e["rank"], e["step"]) for e in r.events("reported")),
                     [(0, 0), (0, 1), (1, 0), (1, 1)], "(rank, step) of every report that "
                     "returned", setting)


@clause("report.collective-warn-env")
def check_collective_warn_interval_not_a_number(impl):
    t = impl.train
    folder = workspace()
    script = new_script(impl, folder, steps=2)
    factory = TrainerFactory(impl.DataParallelTrainer, dict(
        train_loop_per_worker=run_script, train_loop_config={"script": script},
        scaling_config=t.ScalingConfig(num_workers=2),
        run_config=t.RunConfig(name="warn-env", storage_path=os.path.join(folder, "storage"),
                               failure_config=t.FailureConfig(max_failures=0))),
        journal_dir=script.journal_dir)
    environ = {"RAY_TRAIN_COLLECTIVE_WARN_INTERVAL_S": "soon"}
    outcome = impl.fit(WithDriverEnviron(factory, environ))
    setting = (f"{impl.name}: DataParallelTrainer(num_workers=2), 2 steps, fit() called with "
               f"{environ} in the driver's environment")
    result = assertions.succeeded(outcome, setting)
    assertions.equal(result.metrics["step"], 1, "result.metrics['step']", setting)
