"""The trackers' setup functions in a Train worker (`air.integrations.mlflow.setup_mlflow`,
`air.integrations.wandb.setup_wandb`): a 2-worker fit whose every rank calls one, and what
each rank got back and left in the tracker's store."""

from __future__ import annotations

import glob
import os

import pytest

from conformance import assertions, tracking_probe, wandb_runs
from conformance.catalogue import clause
from conformance.probe import Journal
from conformance.scenarios import TrainerFactory, workspace


def _fit(impl, tracker: str, **extra):
    """(per-rank journal rows sorted by rank, setting) of a 2-worker fit of the probe."""
    folder = workspace()
    journal = os.path.join(folder, "journal")
    os.makedirs(journal)
    root = impl.train.__name__.split(".")[0]
    config = {"train_module": impl.train.__name__, "integrations": f"{root}.air.integrations",
              "tracker": tracker, "journal": journal, **extra}
    factory = TrainerFactory(impl.DataParallelTrainer, dict(
        train_loop_per_worker=tracking_probe.setup_on_every_rank, train_loop_config=config,
        scaling_config=impl.train.ScalingConfig(num_workers=2),
        run_config=impl.train.RunConfig(name="tracked", storage_path=os.path.join(folder,
                                                                                  "s"))))
    setting = (f"{impl.name}: DataParallelTrainer(ScalingConfig(num_workers=2)), every rank "
               f"calling setup_{tracker}(config, ...)")
    assertions.succeeded(impl.fit(factory), setting)
    rows = sorted(Journal(journal).events("setup"), key=lambda e: e["rank"])
    assertions.equal([r["rank"] for r in rows], [0, 1], "ranks that journalled", setting)
    return rows, setting


@clause("tune.setup-mlflow")
def check_setup_mlflow_on_rank_zero_only(impl):
    pytest.importorskip("mlflow")
    pytest.importorskip("sqlalchemy")
    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{workspace()}/mlflow.db"
    rows, setting = _fit(impl, "mlflow", uri=uri)
    assertions.equal([r["real"] for r in rows], [True, False],
                     "(rank 0 got the mlflow module, rank 1 a stand-in)", setting)
    client = MlflowClient(tracking_uri=uri)
    experiment = client.get_experiment_by_name("ranks")
    runs = client.search_runs([experiment.experiment_id])
    assertions.equal(len(runs), 1, "MLflow runs in the experiment (rank 0's alone)", setting)
    (run,) = runs
    assertions.equal((run.data.params, run.data.metrics, run.info.status),
                     ({"lr": "0.5", "layers/hidden": "8"}, {"rank_metric": 1.0},
                      "FINISHED"),
                     "the run's (params: the config flattened, metrics: rank 0's, status)",
                     setting)


@clause("tune.setup-wandb")
def check_setup_wandb_on_rank_zero_only(impl):
    pytest.importorskip("wandb")
    folder = workspace()
    rows, setting = _fit(impl, "wandb", wandb_dir=folder)
    assertions.equal([r["real"] for r in rows], [True, False],
                     "(rank 0 got a run, rank 1 a disabled one)", setting)
    files = sorted(glob.glob(os.path.join(folder, "rank*", "wandb", "offline-run-*",
                                          "run-*.wandb")))
    ranks = [path.split(os.sep)[-4] for path in files]
    assertions.equal(ranks, ["rank0"], "the ranks that left an offline W&B run", setting)
    run = wandb_runs.read_run(files[0])
    assertions.equal(({k: v for k, v in run["config"].items() if k != "_wandb"},
                      run["run"]["project"], [h.get("rank_metric") for h in run["history"]]),
                     ({"lr": 0.5, "layers": {"hidden": 8}}, "conformance", [1.0]),
                     "rank 0's run (config, project, rank_metric of each history row)",
                     setting)
