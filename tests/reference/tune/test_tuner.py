"""Tuner on the embedded cluster: trials in their own processes, results, failures, stops,
concurrency, restore, the Train APIs inside a trial, and nothing left running after fit."""

from __future__ import annotations

import glob
import json
import os

import pytest
import tune_fns

import reference
import reference.tune as tune
from reference.train.torch import TorchTrainer
from reference.tune.schedulers import ASHAScheduler

pytestmark = pytest.mark.slow
CPUS = 4


@pytest.fixture(scope="module", autouse=True)
def cluster():
    reference.shutdown()
    cluster = reference.init(num_cpus=CPUS)
    yield cluster
    reference.shutdown()


def _records(out, kind: str) -> dict:
    found = {}
    for path in glob.glob(os.path.join(out, f"*.{kind}")):
        with open(path) as f:
            found[os.path.basename(path).rsplit(".", 1)[0]] = [json.loads(x) for x in f]
    return found


def _tuner(fn, out, space=None, **tune_kwargs):
    run_kwargs = tune_kwargs.pop("run", {})
    return tune.Tuner(fn, param_space={"out": str(out), **(space or {})},
                      tune_config=tune.TuneConfig(**tune_kwargs),
                      run_config=tune.RunConfig(name="exp", storage_path=str(out / "store"),
                                                verbose=0, **run_kwargs))


def test_grid_times_samples_trials_each_in_its_own_process(tmp_path):
    space = {"a": tune.grid_search([1, 2]), "b": {"c": tune.uniform(0, 1)}}
    grid = _tuner(tune_fns.steps, tmp_path, space, num_samples=2, metric="loss",
                  mode="min").fit()
    assert len(grid) == 4 and grid.num_terminated == 4 and grid.num_errors == 0
    assert sorted(r.config["a"] for r in grid) == [1, 1, 2, 2]
    assert all(0 <= r.config["b"]["c"] < 1 for r in grid)
    contexts = _records(tmp_path, "context")
    assert len({c[0]["pid"] for c in contexts.values()}) == 4
    for result in grid:
        m = result.metrics
        ctx = contexts[m["trial_id"]][0]
        assert m["training_iteration"] == 3 and m["done"] is True and m["loss"] == m["config"]["a"]
        assert result.path == ctx["dir"] == ctx["cwd"] and os.path.isdir(result.path)
        assert ctx["experiment"] == "exp" and ctx["name"].endswith(m["trial_id"])
        assert ctx["resources"] == [{"CPU": 1.0}] and ctx["restored"] == "None"
        assert os.path.basename(result.checkpoint.path) == "checkpoint_000000"
        with open(os.path.join(result.checkpoint.path, "step")) as f:
            assert f.read() == "1"
        assert list(result.metrics_dataframe["training_iteration"]) == [1, 2, 3]
        assert list(result.metrics_dataframe["nested/x"]) == [0, 1, 2]
        for name in ("params.json", "params.pkl", "result.json", "progress.csv"):
            assert os.path.exists(os.path.join(result.path, name)), name
    best = grid.get_best_result()
    assert best.config["a"] == 1
    assert grid.get_best_result("loss", "max", scope="all").config["a"] == 2
    frame = grid.get_dataframe()
    assert len(frame) == 4 and {"config/a", "config/b/c", "logdir", "loss"} <= set(frame)
    assert list(grid.get_dataframe("nested/x", "min")["nested/x"]) == [0, 0, 0, 0]
    with pytest.raises(RuntimeError, match="No best trial found for the given metric: nope"):
        grid.get_best_result("nope", "min")


def test_best_result_needs_a_metric_and_mode(tmp_path):
    grid = _tuner(tune_fns.steps, tmp_path, {"a": tune.grid_search([1, 2])}).fit()
    with pytest.raises(ValueError, match="No metric is provided"):
        grid.get_best_result()
    with pytest.raises(ValueError, match="No mode is provided"):
        grid.get_best_result("loss")
    assert grid.get_best_result("loss", "min", scope="avg").config["a"] == 1


def test_a_raising_trial_is_recorded_and_the_others_finish(tmp_path):
    grid = _tuner(tune_fns.raises_for_two, tmp_path, {"a": tune.grid_search([1, 2, 3])}).fit()
    assert grid.num_errors == 1 and grid.num_terminated == 2
    (error,) = grid.errors
    assert isinstance(error, ValueError) and "trial with a=2 fails" in str(error)
    failed = next(r for r in grid if r.config["a"] == 2)
    assert failed.error is error and failed.metrics["training_iteration"] == 1
    assert os.path.exists(os.path.join(failed.path, "error.txt"))
    assert [r.metrics["training_iteration"] for r in grid if r.error is None] == [2, 2]


def test_a_dead_trial_process_resumes_from_its_checkpoint(tmp_path):
    grid = _tuner(tune_fns.dies_once, tmp_path,
                  run={"failure_config": tune.FailureConfig(max_failures=1)}).fit()
    (result,) = grid
    assert result.error is None and result.metrics["step"] == 4
    assert [s["start"] for s in next(iter(_records(tmp_path, "start").values()))] == [0, 2]
    # the restored trial continues its iteration count from the checkpoint's
    assert list(result.metrics_dataframe["training_iteration"]) == [1, 2, 3, 4]


def test_without_failure_budget_a_dead_process_is_an_error(tmp_path):
    grid = _tuner(tune_fns.dies_once, tmp_path).fit()
    (error,) = grid.errors
    assert isinstance(error, reference.exceptions.RayActorError)
    assert "exit code 3" in str(error)


def test_stop_criteria_dict_and_function(tmp_path):
    grid = _tuner(tune_fns.steps, tmp_path, {"a": 1, "steps": 6},
                  run={"stop": {"training_iteration": 2}}).fit()
    assert grid[0].metrics["training_iteration"] == 2 and grid.num_terminated == 1
    grid = _tuner(tune_fns.steps, tmp_path / "fn", {"a": 1, "steps": 6},
                  run={"stop": lambda trial_id, result: result["loss"] <= 3}).fit()
    assert grid[0].metrics["loss"] == 3


def test_max_concurrent_trials_never_overlap(tmp_path):
    _tuner(tune_fns.steps, tmp_path, {"a": tune.grid_search([1, 2, 3]), "sleep": 0.05},
           max_concurrent_trials=1).fit()
    starts = {k: v[0]["start"] for k, v in _records(tmp_path, "context").items()}
    ends = {k: v[0]["end"] for k, v in _records(tmp_path, "end").items()}
    spans = sorted((starts[k], ends[k]) for k in starts)
    assert len(spans) == 3
    assert all(a_end <= b_start for (_, a_end), (b_start, _) in zip(spans, spans[1:], strict=False))


def test_train_api_in_a_trial_names_the_tune_api(tmp_path):
    grid = _tuner(tune_fns.uses_train_api, tmp_path).fit()
    message = grid[0].metrics["message"]
    assert "deprecated" in message and "tune" in message


def test_tune_report_outside_a_trial_warns_and_does_nothing():
    with pytest.warns(UserWarning, match="only be called inside a function"):
        assert tune.report({"x": 1}) is None
    from reference.tune.integration.ray_train import TuneReportCallback

    with pytest.raises(RuntimeError, match="TuneReportCallback must be used in a Tune session"):
        TuneReportCallback()


def test_trainer_instances_and_missing_trainables_are_rejected():
    with pytest.raises(tune.TuneError, match="Improper 'run' - not string nor trainable"):
        tune.Tuner(TorchTrainer(lambda: None))
    with pytest.raises(tune.TuneError, match="You need to provide a trainable to tune"):
        tune.Tuner(None)
    with pytest.raises(RuntimeError, match="experiment has not been run"):
        tune.Tuner(tune_fns.steps).get_results()


def test_bad_configs_raise_at_fit(tmp_path):
    with pytest.raises(ValueError, match="max_failures must be 0 if fail_fast=True"):
        tune.FailureConfig(max_failures=1, fail_fast=True)  # already when built, as Ray
    with pytest.raises(ValueError, match=r"The `mode` parameter passed to `Tuner\(...\)` must"):
        _tuner(tune_fns.steps, tmp_path, mode="best").fit()  # TuneConfig takes it, as Ray
    with pytest.raises(ValueError, match="scheduler you are using was already instantiated"):
        _tuner(tune_fns.steps, tmp_path, metric="loss", mode="min",
               scheduler=ASHAScheduler(metric="loss", mode="min")).fit()


def test_fail_fast_ends_the_experiment_at_the_first_error(tmp_path):
    grid = _tuner(tune_fns.raises_for_two, tmp_path, {"a": tune.grid_search([2, 1, 3])},
                  max_concurrent_trials=1,
                  run={"failure_config": tune.FailureConfig(fail_fast=True)}).fit()
    assert grid.num_errors == 1 and len(grid) == 1
    with pytest.raises(ValueError, match="trial with a=2 fails"):
        _tuner(tune_fns.raises_for_two, tmp_path / "raise", {"a": 2},
               run={"failure_config": tune.FailureConfig(fail_fast="raise")}).fit()


def test_with_parameters_and_with_resources(tmp_path):
    fn = tune.with_resources(tune.with_parameters(tune_fns.with_data, data=[1, 2, 3]),
                             {"cpu": 2})
    grid = _tuner(fn, tmp_path, {"a": tune.grid_search([1, 10])}).fit()
    assert sorted(r.metrics["total"] for r in grid) == [6, 60]
    with pytest.raises(ValueError, match="has no parameter"):
        tune.with_parameters(tune_fns.with_data, nothing=1)
    with pytest.raises(ValueError, match="'cpu' must be a number"):
        tune.with_resources(tune_fns.steps, {"cpu": "two"})
    grid = _tuner(tune.with_resources(tune_fns.steps, {"cpu": CPUS + 1}), tmp_path / "big",
                  {"a": 1}).fit()
    assert grid.num_errors == 1 and "the cluster can never hold" in str(grid.errors[0])


def test_restore_resumes_errored_trials_and_keeps_finished_ones(tmp_path):
    grid = _tuner(tune_fns.dies_once, tmp_path, {"a": tune.grid_search([1, 2])},
                  max_concurrent_trials=1).fit()
    assert grid.num_errors == 1 and grid.num_terminated == 1
    path = grid.experiment_path
    assert tune.Tuner.can_restore(path) and not tune.Tuner.can_restore(tmp_path)
    finished = next(r for r in grid if r.error is None)
    restored = tune.Tuner.restore(path, tune_fns.dies_once, resume_errored=True)
    assert restored.get_results().num_errors == 1
    grid2 = restored.fit()
    assert grid2.num_errors == 0 and grid2.num_terminated == 2 and len(grid2) == 2
    again = next(r for r in grid2 if r.path == finished.path)
    assert again.metrics == finished.metrics
    resumed = next(r for r in grid2 if r.path != finished.path)
    # resumed from its checkpoint at step 2, not from the start
    assert resumed.metrics["step"] == 4
    assert [s["start"] for s in _records(tmp_path, "start")[resumed.metrics["trial_id"]]] == \
        [0, 2]


def test_train_runs_inside_trials_are_torn_down_when_asha_stops_them(tmp_path, cluster):
    """ASHA stops the weak trials after their first Train report; their Train workers are
    gone at once, and after fit nothing of the experiment runs on the cluster."""
    pytest.importorskip("torch")
    asha = ASHAScheduler(metric="loss", mode="min", time_attr="step", max_t=4,
                         grace_period=1, reduction_factor=2)
    grid = _tuner(tune_fns.torch_driver, tmp_path, {"a": tune.grid_search([1, 2, 3]),
                                                    "sleep": 0.2},
                  max_concurrent_trials=1, scheduler=asha).fit()
    assert grid.num_errors == 0 and len(grid) == 3
    steps = {r.config["a"]: r.metrics["step"] for r in grid}
    assert steps == {1: 4, 2: 1, 3: 1}
    assert "checkpoint_path" in grid[0].metrics_dataframe.columns
    assert all(r.checkpoint is None for r in grid)  # the Train run holds the checkpoints
    assert len(glob.glob(os.path.join(tmp_path, "worker-*"))) == 6
    assert cluster.available_resources()["CPU"] == CPUS


def test_progress_lines_when_not_on_a_terminal(tmp_path, capsys):
    tune.Tuner(tune_fns.steps, param_space={"out": str(tmp_path), "a": tune.grid_search([1])},
               tune_config=tune.TuneConfig(metric="loss", mode="min"),
               run_config=tune.RunConfig(storage_path=str(tmp_path / "s"))).fit()
    out = capsys.readouterr().out
    assert "started with config {'a': 1}" in out
    assert "iteration 2, loss=2" in out and "completed after 3 iterations, loss=1" in out
    assert "Trial status: 1 TERMINATED" in out


def test_optuna_search_drives_the_trials(tmp_path):
    pytest.importorskip("optuna")
    import optuna

    from reference.tune.search.optuna import OptunaSearch

    searcher = OptunaSearch(sampler=optuna.samplers.TPESampler(seed=1, n_startup_trials=4))
    space = {"x": tune.uniform(-5, 10), "y": tune.choice([0, 1])}
    grid = _tuner(tune_fns.quadratic, tmp_path, space, num_samples=12, metric="loss",
                  mode="min", search_alg=searcher, max_concurrent_trials=2).fit()
    assert len(grid) == 12 and grid.num_errors == 0
    study = searcher._ot_study
    assert len(study.trials) == 12
    assert all(t.state == optuna.trial.TrialState.COMPLETE for t in study.trials)
    # optuna was told each trial's last loss, and suggested what the trials ran
    told = sorted(t.value for t in study.trials)
    assert told == sorted(r.metrics["loss"] for r in grid)
    assert sorted(t.params["x"] for t in study.trials) == sorted(r.config["x"] for r in grid)
    best = grid.get_best_result()
    assert best.metrics["loss"] == min(told)


def test_a_dead_trial_driver_resumes_its_train_run_by_name(tmp_path, cluster):
    pytest.importorskip("torch")
    grid = _tuner(tune_fns.torch_driver_dies_once, tmp_path,
                  run={"failure_config": tune.FailureConfig(max_failures=1)}).fit()
    (result,) = grid
    assert result.error is None and os.path.exists(tmp_path / "died")
    # the Train run started at step 0, and again from its checkpoint of step 1
    assert (tmp_path / "train-starts").read_text().split() == ["0", "2"]
    assert list(result.metrics_dataframe["step"]) == [1, 2, 3, 4]
    runs = [d for d in os.listdir(tmp_path) if d.startswith("train-trial_id=")]
    assert runs == [f"train-trial_id={result.metrics['trial_id']}"]
    assert cluster.available_resources()["CPU"] == CPUS


def test_pbt_exploits_the_best_trials_checkpoint_and_explores_its_config(tmp_path):
    from reference.tune.schedulers import PopulationBasedTraining

    pbt = PopulationBasedTraining(time_attr="training_iteration", metric="value", mode="max",
                                  perturbation_interval=2,
                                  hyperparam_mutations={"lr": [0.1, 0.2, 0.4, 0.8]})
    grid = _tuner(tune_fns.pbt_fn, tmp_path, {"lr": tune.grid_search([0.1, 0.2, 0.4, 0.8])},
                  scheduler=pbt, run={"stop": {"step": 8}}).fit()
    assert grid.num_errors == 0 and len(grid) == 4
    starts = _records(tmp_path, "start")
    weakest = next(r for r in grid if r.metrics["config"] is not None
                   and starts[r.metrics["trial_id"]][0]["lr"] == 0.1)
    history = starts[weakest.metrics["trial_id"]]
    assert len(history) >= 2  # paused and restarted by an exploit
    exploit = history[1]
    # it resumed from a stronger trial's checkpoint, at that trial's step, with an lr
    # explored from the stronger trial's (a neighbour in the list, or resampled)
    assert exploit["origin"] not in (None, weakest.metrics["trial_id"])
    assert starts[exploit["origin"]][0]["lr"] > 0.1
    assert exploit["step"] >= 2 and exploit["lr"] in (0.1, 0.2, 0.4, 0.8)
    assert weakest.metrics["step"] == 8
    assert weakest.metrics["value"] > 8 * 0.1


def test_hyperband_pauses_trials_and_resumes_them_from_their_checkpoints(tmp_path):
    """max_t=4, eta=2: as in Ray, the first bracket (3 trials) runs to max_t unjudged; the
    second (3 trials) pauses them at iteration 2, keeps the best 2 and stops the third.
    (No max_concurrent_trials: with it, Ray's basic variant generator creates a trial only
    when a slot is free, so a finished trial's bracket takes the next ones too.)"""
    from reference.tune.schedulers import HyperBandScheduler

    hb = HyperBandScheduler(metric="value", mode="max", max_t=4, reduction_factor=2)
    lrs = [0.1, 0.2, 0.4, 0.8, 0.3, 0.6]
    grid = _tuner(tune_fns.pbt_fn, tmp_path, {"lr": tune.grid_search(lrs)},
                  scheduler=hb).fit()
    assert grid.num_errors == 0 and grid.num_terminated == 6
    iterations = {r.config["lr"]: r.metrics["training_iteration"] for r in grid}
    assert iterations == {0.1: 4, 0.2: 4, 0.4: 4, 0.8: 4, 0.3: 2, 0.6: 4}
    starts = _records(tmp_path, "start")
    resumed = {tid: s for tid, s in starts.items() if len(s) > 1}
    # the kept trials of the second bracket that had paused (the last to arrive goes on)
    assert 1 <= len(resumed) <= 2
    assert {starts[tid][0]["lr"] for tid in resumed} <= {0.8, 0.6}
    for tid, history in resumed.items():
        # each resumed from its own checkpoint, at the milestone where it had paused
        assert [(h["origin"], h["step"]) for h in history] == [(None, 0), (tid, 2)]
    assert grid.get_best_result("value", "max").config["lr"] == 0.8
