"""reference.air.integrations.mlflow against a real MLflow tracking server on loopback
(`mlflow server` on a SQLite store): MLflowLoggerCallback's run per trial (params, metric
histories, tags, statuses, artifacts) read back with MlflowClient; setup_mlflow on rank 0
only in a 2-worker fit; the errors Ray gives."""

from __future__ import annotations

import socket
import subprocess
import sys
import time

import pytest
import tune_fns

import reference.tune as tune
from reference.train import DataParallelTrainer, RunConfig, ScalingConfig

mlflow = pytest.importorskip("mlflow")
pytest.importorskip("sqlalchemy")
from mlflow.tracking import MlflowClient  # noqa: E402

from reference.air.integrations.mlflow import (  # noqa: E402
    MLflowLoggerCallback,
    _NoopModule,
    setup_mlflow,
)

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("cluster")]  # conftest.py


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """`mlflow server` on loopback, a SQLite store and an artifact folder in a tmp dir."""
    root = tmp_path_factory.mktemp("mlflow")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [sys.executable, "-m", "mlflow", "server", "--backend-store-uri",
         f"sqlite:///{root}/mlflow.db", "--default-artifact-root", str(root / "artifacts"),
         "--host", "127.0.0.1", "--port", str(port), "--workers", "1"],
        stdout=subprocess.DEVNULL, stderr=open(root / "server.log", "w"),
        start_new_session=True)
    uri = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, \
                    (root / "server.log").read_text()[-2000:]
                time.sleep(0.3)
        yield uri
    finally:
        import os
        import signal

        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)


@pytest.fixture(scope="module")
def tuned(server, tmp_path_factory):
    callback = MLflowLoggerCallback(server, experiment_name="tuned", tags={"team": "t"},
                                    save_artifact=True)
    grid = tune.Tuner(tune_fns.logged, param_space={"a": tune.grid_search([1, 2]),
                                                    "nested": {"c": 7}},
                      run_config=tune.RunConfig(
                          name="exp", storage_path=str(tmp_path_factory.mktemp("store")),
                          verbose=0, callbacks=[callback])).fit()
    client = MlflowClient(tracking_uri=server)
    experiment = client.get_experiment_by_name("tuned")
    runs = client.search_runs([experiment.experiment_id])
    return grid, client, {run.data.params["a"]: run for run in runs}


def test_a_run_per_trial_with_its_params_tags_and_status(tuned):
    grid, _, runs = tuned
    assert sorted(runs) == ["1", "2"]
    names = {str(r.config["a"]): r.metrics["trial_id"] for r in grid}
    for a, run in runs.items():
        assert run.data.params == {"a": a, "nested/c": "7"}
        assert run.data.tags["team"] == "t"
        assert run.data.tags["trial_name"].endswith(names[a])
        assert run.info.run_name == run.data.tags["trial_name"]
    assert runs["1"].info.status == "FINISHED" and runs["2"].info.status == "FAILED"


def test_every_result_value_that_is_a_float_is_a_metric_at_its_iteration(tuned):
    _, client, runs = tuned
    run_id = runs["1"].info.run_id
    history = [(m.step, m.value) for m in client.get_metric_history(run_id, "loss")]
    assert history == [(1, 3.0), (2, 2.0), (3, 1.0)]
    metrics = runs["1"].data.metrics
    # flattened, numbers and bools; the config's numbers too (as Ray logs them); no strings
    assert metrics["nested/x"] == 2.0 and metrics["flag"] == 1.0 and metrics["config/a"] == 1.0
    assert "name" not in metrics and "hist" not in metrics
    assert [m.step for m in client.get_metric_history(runs["2"].info.run_id, "loss")] == [1]


def test_save_artifact_uploads_the_trial_folder(tuned):
    _, client, runs = tuned
    names = {a.path for a in client.list_artifacts(runs["1"].info.run_id)}
    assert {"params.json", "result.json", "progress.csv"} <= names, names


def _logs_on_rank_zero(config):
    module = setup_mlflow(config, tracking_uri=config["uri"], experiment_name="train",
                          create_experiment_if_not_exists=True)
    from reference import train

    rank = train.get_context().get_world_rank()
    assert isinstance(module, _NoopModule) == (rank != 0)
    module.log_metric("rank_metric", 1.0 + rank)
    module.end_run()


def test_setup_mlflow_logs_on_rank_zero_only(server, tmp_path):
    trainer = DataParallelTrainer(
        _logs_on_rank_zero, train_loop_config={"uri": server, "lr": 0.5},
        scaling_config=ScalingConfig(num_workers=2),
        run_config=RunConfig(name="t", storage_path=str(tmp_path)))
    trainer.fit()
    client = MlflowClient(tracking_uri=server)
    (run,) = client.search_runs([client.get_experiment_by_name("train").experiment_id])
    assert run.data.params == {"uri": server, "lr": "0.5"}
    assert run.data.metrics == {"rank_metric": 1.0} and run.info.status == "FINISHED"


def test_errors_as_ray_gives_them(server, monkeypatch):
    with pytest.raises(ValueError, match="experiment_id: None or experiment_name: nope does "
                                         "not exist"):
        setup_mlflow(tracking_uri=server, experiment_name="nope")
    monkeypatch.delenv("MLFLOW_EXPERIMENT_NAME", raising=False)
    with pytest.raises(ValueError, match="no experiment_name provided"):
        MLflowLoggerCallback(server).setup()
    monkeypatch.setitem(sys.modules, "mlflow", None)  # as if it were not installed
    with pytest.raises(RuntimeError, match="mlflow was not found - please install with "
                                           "`pip install mlflow`"):
        setup_mlflow()
    with pytest.raises(ImportError):
        MLflowLoggerCallback()


def test_an_unreachable_server_fails_the_fit_before_any_trial_starts(tmp_path, monkeypatch):
    """As on Ray 2.60 (tried there with the same Tuner): the callback's setup asks the
    server for the experiment, MLflow's HTTP client gives up after its retries
    (MLFLOW_HTTP_REQUEST_MAX_RETRIES, 7 by default: about 250 s) and fit() raises its
    MlflowException naming the URL; no trial has started, so none is lost."""
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    tuner = tune.Tuner(tune_fns.logged, param_space={"a": tune.grid_search([1, 2])},
                       run_config=tune.RunConfig(
                           name="exp", storage_path=str(tmp_path), verbose=0,
                           callbacks=[MLflowLoggerCallback(f"http://127.0.0.1:{port}",
                                                           experiment_name="e")]))
    with pytest.raises(mlflow.exceptions.MlflowException,
                       match=f"API request to http://127.0.0.1:{port}/api/2.0/mlflow/"
                             "experiments/get-by-name failed"):
        tuner.fit()
    assert [p.name for p in (tmp_path / "exp").iterdir() if p.is_dir()] == []  # no trial
