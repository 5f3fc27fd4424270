"""reference.air.integrations.wandb with W&B itself in offline mode (WANDB_MODE=offline):
WandbLoggerCallback's run per trial, read back from the run files W&B writes in each
trial's folder (id, name, group, project, config, every logged step); setup_wandb on rank
0 only in a 2-worker fit; the errors Ray gives."""

from __future__ import annotations

import os

import pytest
import tune_fns

import reference.tune as tune
from conformance import wandb_runs
from reference.train import DataParallelTrainer, RunConfig, ScalingConfig

wandb = pytest.importorskip("wandb")

from reference.air.integrations.wandb import WandbLoggerCallback, setup_wandb  # noqa: E402

pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def offline(monkeypatch, tmp_path):
    """Offline W&B with a home of its own (W&B keeps settings and caches there)."""
    for name in ("WANDB_API_KEY", "WANDB_PROJECT_NAME", "WANDB_GROUP_NAME",
                 "WANDB_SETUP_API_KEY_HOOK", "WANDB_POPULATE_RUN_LOCATION_HOOK"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))


def test_a_run_per_trial_in_its_folder_with_config_and_every_result(cluster, tmp_path):
    tuner = tune.Tuner(
        tune_fns.logged, param_space={"a": tune.grid_search([1, 2, 3])},
        tune_config=tune.TuneConfig(max_concurrent_trials=3),
        run_config=tune.RunConfig(name="wb", storage_path=str(tmp_path), callbacks=[
            WandbLoggerCallback(project="proj", excludes=["flag"])]))
    grid = tuner.fit()
    runs = wandb_runs.runs(str(tmp_path / "wb"))
    by_id = {r["run"]["id"]: r for r in runs.values()}
    assert sorted(by_id) == sorted(r.metrics["trial_id"] for r in grid)
    for result in grid:
        run = by_id[result.metrics["trial_id"]]
        a = result.config["a"]
        assert os.path.basename(result.path) in runs  # in the trial's own folder
        assert run["run"]["group"] == "wb" and run["run"]["project"] == "proj"
        assert run["config"]["a"] == a
        assert {"trial_id", "date", "hostname", "node_ip", "pid"} <= set(run["config"])
        assert run["config"]["trial_log_path"] == result.path
        steps = run["history"]
        assert [s["training_iteration"] for s in steps] == list(
            range(1, len(steps) + 1))
        assert len(steps) == (1 if a == 2 else 3)
        assert [s["loss"] for s in steps] == [a * 3, a * 2, a][:len(steps)]
        assert [s["nested/x"] for s in steps] == list(range(len(steps)))
        for step in steps:  # strings, lists, excluded keys, config and done stay out
            assert not {"name", "hist", "flag", "done", "config/a", "trial_id"} & set(step)
            assert step["half"] == 0.5 and step["_step"] == step["training_iteration"]


def test_setup_wandb_on_rank_zero_only(cluster, tmp_path):
    trainer = DataParallelTrainer(
        _setup_in_worker, train_loop_config={"dir": str(tmp_path / "w"), "lr": 0.5},
        scaling_config=ScalingConfig(num_workers=2),
        run_config=RunConfig(name="train-run", storage_path=str(tmp_path)))
    result = trainer.fit()
    assert result.error is None
    (run,) = wandb_runs.runs(str(tmp_path / "w")).values()  # rank 0's alone
    assert run["run"]["group"] == "train-run" and run["run"]["project"] == "p"
    assert run["config"]["lr"] == 0.5
    assert [s["rank"] for s in run["history"]] == [0]


def _setup_in_worker(config):
    from reference import train

    os.makedirs(os.path.join(config["dir"], "0"), exist_ok=True)
    os.environ["WANDB_MODE"] = "offline"  # the workers' own environment
    run = setup_wandb({"lr": config["lr"]}, project="p", dir=os.path.join(config["dir"], "0"))
    rank = train.get_context().get_world_rank()
    assert (run.settings.mode == "disabled") == (rank != 0), (rank, run.settings.mode)
    run.log({"rank": rank})
    run.finish()


def test_errors_as_ray_gives_them(monkeypatch, tmp_path):
    with pytest.raises(ValueError, match="WANDB_PROJECT_NAME"):
        WandbLoggerCallback().setup()
    monkeypatch.setenv("WANDB_PROJECT_NAME", "from-env")
    callback = WandbLoggerCallback()
    callback.setup()
    assert callback.project == "from-env"
    monkeypatch.delenv("WANDB_MODE")  # online: a key is needed
    with pytest.raises(ValueError, match="No WandB API key found"):
        WandbLoggerCallback(project="p").setup()
    key_file = tmp_path / "key"
    key_file.write_text("k" * 40 + "\n")
    with pytest.raises(ValueError, match="Both WandB `api_key_file` and `api_key` set"):
        WandbLoggerCallback(project="p", api_key="x", api_key_file=str(key_file)).setup()
    WandbLoggerCallback(project="p", api_key_file=str(key_file)).setup()
    assert os.environ["WANDB_API_KEY"] == "k" * 40
    monkeypatch.delenv("WANDB_API_KEY")
    monkeypatch.setenv("WANDB_SETUP_API_KEY_HOOK", "tune_fns.hook_key")
    WandbLoggerCallback(project="p").setup()
    assert os.environ["WANDB_API_KEY"] == tune_fns.HOOK_KEY
    with pytest.warns(DeprecationWarning, match="upload_checkpoints"):
        assert WandbLoggerCallback(project="p", save_checkpoints=True).upload_checkpoints
