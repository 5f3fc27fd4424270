"""PyTorch Lightning inside a TorchTrainer training function (clauses `lightning.*`).

The training function is `conformance.lightning_probe.lightning_probe`: a Lightning
`Trainer` in its Ray Train form (`RayDDPStrategy`, `RayLightningEnvironment`,
`RayTrainReportCallback`, `prepare_trainer`) fitting a one-layer regressor on a fixed
dataset. It journals what Lightning saw on each rank and every `report()` call the callback
made (by wrapping the implementation's `report` for the duration of the function), so the
checks read the hook's ranks, metrics and checkpoint folders without knowing the
implementation.
"""

from __future__ import annotations

import dataclasses
import importlib
import os

import pytest

from conformance import assertions
from conformance.catalogue import clause
from conformance.lightning_probe import (
    DATA,
    dataset,
    lightning_probe,
    lightning_pytorch,
    tiny_module_class,
    weights,
)
from conformance.probe import Journal
from conformance.scenarios import TrainerFactory, shared, workspace

WORKERS = 2
NAMES = ["prepare_trainer", "RayDDPStrategy", "RayFSDPStrategy", "RayDeepSpeedStrategy",
         "RayLightningEnvironment", "RayTrainReportCallback"]


def _lightning(impl):
    pytest.importorskip("torch")
    if importlib.util.find_spec("lightning") is None:
        pytest.importorskip("pytorch_lightning")
    return impl.framework("lightning")


def single_process_weights(global_batch: int) -> list:
    """Plain torch on the global batch, in the order Lightning's DistributedSampler walks a
    training loader (shuffled, seed 0, reseeded per epoch): step k's per-rank batches of W
    ranks are together positions k*global_batch .. (k+1)*global_batch-1 of the permutation."""
    import torch
    from torch.utils.data import DataLoader, DistributedSampler

    torch.manual_seed(0)
    layer = torch.nn.Linear(DATA["features"], 1)
    optimizer = torch.optim.SGD(layer.parameters(), lr=DATA["lr"])
    data = dataset()
    sampler = DistributedSampler(data, num_replicas=1, rank=0, shuffle=True, seed=0)
    for epoch in range(DATA["epochs"]):
        sampler.set_epoch(epoch)
        for x, y in DataLoader(data, batch_size=global_batch, sampler=sampler):
            optimizer.zero_grad()
            torch.nn.functional.mse_loss(layer(x), y).backward()
            optimizer.step()
    return weights(layer)


def max_abs_error(a: list, b: list) -> float:
    return max(abs(x - y) for pa, pb in zip(a, b, strict=True)
               for x, y in zip(pa, pb, strict=True))


# What torchrun-style launchers (Lightning's included) leave in a process's environment;
# Lightning's DDP strategy also sets OMP_NUM_THREADS where it is unset (to the CPUs per
# process), which every cluster started by this driver afterwards would hand its workers.
LAUNCHER_VARS = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "NODE_RANK",
                 "MASTER_ADDR", "MASTER_PORT", "OMP_NUM_THREADS")


@dataclasses.dataclass
class DriverFit:
    """A trainer factory for local mode, where the training function runs in the driver:
    after fit() it journals whether the driver still holds a torch process group, then
    leaves the driver as it found it (no group, the launcher variables it had), so that the
    next check's local fit does not inherit what this one's framework left behind."""

    factory: TrainerFactory
    journal_dir: str

    def __call__(self):
        return _RecordingFit(self.factory(), self.journal_dir)


class _RecordingFit:
    def __init__(self, trainer, journal_dir: str):
        self.trainer, self.journal_dir = trainer, journal_dir

    def fit(self):
        before = {k: os.environ.get(k) for k in LAUNCHER_VARS}
        try:
            return self.trainer.fit()
        finally:
            import torch.distributed as dist

            held = dist.is_available() and dist.is_initialized()
            Journal(self.journal_dir).record(ev="after_fit", pid=os.getpid(), group=held)
            if held:
                dist.destroy_process_group()
            for key, value in before.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value


def _fit(impl, name: str, num_workers: int, kill=None, failure_config=None):
    tt = impl.framework("torch")
    t = impl.train
    folder = workspace()
    journal = os.path.join(folder, "journal")
    os.makedirs(journal)
    run_config = dict(name=name, storage_path=os.path.join(folder, "s"))
    if failure_config is not None:
        run_config["failure_config"] = failure_config
    factory = TrainerFactory(tt.TorchTrainer, dict(
        train_loop_per_worker=lightning_probe,
        train_loop_config={"train_module": t.__name__, "journal": journal, "kill": kill},
        scaling_config=t.ScalingConfig(num_workers=num_workers),
        run_config=t.RunConfig(**run_config)))
    if num_workers == 0:
        factory = DriverFit(factory, journal)
    outcome = impl.fit(factory, max(impl.fit_deadline_s, 180.0))
    setting = (f"{impl.name}: TorchTrainer(num_workers={num_workers}) running a Lightning "
               f"Trainer(RayDDPStrategy, RayLightningEnvironment, RayTrainReportCallback), "
               f"{DATA}" + (f", rank {kill[0]} exits at epoch {kill[2]}" if kill else ""))
    return outcome, Journal(journal), setting


def _run(impl):
    def build(impl):
        _lightning(impl)
        outcome, journal, setting = _fit(impl, "lightning", WORKERS)
        result = assertions.succeeded(outcome, setting)
        rows = sorted(journal.events("lightning"), key=lambda e: e["rank"])
        return result, rows, journal.events("lightning_report"), setting

    return shared(impl, "lightning", build)


def _local_run(impl):
    def build(impl):
        _lightning(impl)
        outcome, journal, setting = _fit(impl, "lightning-local", 0)
        result = assertions.succeeded(outcome, setting)
        return (result, journal.events("lightning"), journal.events("lightning_report"),
                setting, journal.events("after_fit"))

    return shared(impl, "lightning-local", build)


# ------------------------------------------------------------------------ no fit
@clause("lightning.names")
def check_public_names(impl):
    tl = _lightning(impl)
    assertions.equal(list(tl.__all__), NAMES, f"{tl.__name__}.__all__", impl.name)
    assertions.equal(tl.RayTrainReportCallback.CHECKPOINT_NAME, "checkpoint.ckpt",
                     "RayTrainReportCallback.CHECKPOINT_NAME", impl.name)
    for legacy in ("LightningTrainer", "LightningConfigBuilder"):
        try:
            exec(f"from {tl.__name__} import {legacy}", {})
        except ImportError as exc:
            assertions.equal(f"cannot import name '{legacy}' from '{tl.__name__}'" in str(exc),
                             True, f"ImportError message {str(exc)!r}", impl.name)
        else:
            raise AssertionError(f"from {tl.__name__} import {legacy} succeeded, expected "
                                 f"ImportError [{impl.name}]")


@clause("lightning.package")
def check_binds_to_lightning_pytorch(impl):
    tl = _lightning(impl)
    if importlib.util.find_spec("lightning") is None:
        pytest.skip("only pytorch_lightning is installed")
    import lightning.pytorch as lp

    seen = (issubclass(tl.RayDDPStrategy, lp.strategies.DDPStrategy),
            issubclass(tl.RayFSDPStrategy, lp.strategies.FSDPStrategy),
            issubclass(tl.RayDeepSpeedStrategy, lp.strategies.DeepSpeedStrategy),
            issubclass(tl.RayLightningEnvironment, lp.plugins.environments.LightningEnvironment),
            issubclass(tl.RayTrainReportCallback, lp.callbacks.Callback))
    assertions.equal(seen, (True,) * 5, "subclasses of lightning.pytorch's DDPStrategy, "
                     "FSDPStrategy, DeepSpeedStrategy, LightningEnvironment, Callback", impl.name)
    if importlib.util.find_spec("pytorch_lightning") is None:
        return
    import pytorch_lightning

    try:
        pytorch_lightning.Trainer(strategy=tl.RayDDPStrategy(), accelerator="cpu", devices=1,
                                  logger=False, enable_checkpointing=False)
    except ValueError as exc:
        assertions.equal(str(exc).startswith("You selected an invalid strategy name"), True,
                         f"pytorch_lightning.Trainer's ValueError {str(exc)[:80]!r}", impl.name)
    else:
        raise AssertionError("pytorch_lightning.Trainer accepted RayDDPStrategy, expected "
                             f"ValueError (the strategies are lightning.pytorch's) [{impl.name}]")


@clause("lightning.prepare-trainer")
def check_prepare_trainer_errors(impl):
    tl = _lightning(impl)
    pl = lightning_pytorch()
    kwargs = dict(accelerator="cpu", devices=1, logger=False, enable_checkpointing=False,
                  enable_progress_bar=False)
    trainer = pl.Trainer(strategy="ddp", **kwargs)
    want = (f"Invalid strategy class: {type(trainer.strategy)}. To use PyTorch Lightning with "
            "Ray, the strategy object should be one of ['RayDDPStrategy', 'RayFSDPStrategy', "
            "'RayDeepSpeedStrategy'] class or its subclass.")
    _raises(lambda: tl.prepare_trainer(trainer), RuntimeError, want, "Trainer(strategy='ddp')",
            impl.name)
    trainer = pl.Trainer(strategy=tl.RayDDPStrategy(), **kwargs)
    env = type(trainer.strategy.cluster_environment)
    want = ("Invalid cluster environment plugin. The expected class is"
            f"`ray.train.lightning.RayLightningEnvironment` but got {env}!")
    _raises(lambda: tl.prepare_trainer(trainer), RuntimeError, want,
            "Trainer(strategy=RayDDPStrategy()) without the RayLightningEnvironment plugin",
            impl.name)
    result, rows, _, setting = _run(impl)
    for r in rows:
        assertions.equal(r["prepare_same"], True,
                         f"rank {r['rank']}: prepare_trainer(trainer) is trainer", setting)


def _raises(fn, exc_type, message: str, what: str, setting: str) -> None:
    __tracebackhide__ = True
    try:
        fn()
    except exc_type as exc:
        assertions.equal(str(exc), message, f"prepare_trainer({what}) message", setting)
    else:
        raise AssertionError(f"prepare_trainer({what}) returned, expected {exc_type.__name__} "
                             f"[{setting}]")


# ------------------------------------------------------------------------ fits
@clause("lightning.ranks")
def check_ranks_and_device(impl):
    result, rows, _, setting = _run(impl)
    assertions.equal([r["rank"] for r in rows], list(range(WORKERS)), "ranks that finished",
                     setting)
    for r in rows:
        who = f"rank {r['rank']}"
        assertions.equal(r["trainer"], r["context"],
                         f"{who} Trainer (world_size, global_rank, local_rank, node_rank)", setting)
        assertions.equal(r["environment"], r["context"],
                         f"{who} RayLightningEnvironment ranks", setting)
        assertions.equal(r["root_device"], r["device"], f"{who} strategy.root_device", setting)
        assertions.equal(r["sampler_kwargs"], {"num_replicas": WORKERS, "rank": r["rank"]},
                         f"{who} strategy.distributed_sampler_kwargs", setting)
        assertions.equal(r["sampler"], "DistributedSampler", f"{who} Lightning's train sampler",
                         setting)


@clause("lightning.report")
def check_report_per_epoch_from_every_rank(impl):
    result, rows, reports, setting = _run(impl)
    steps_per_epoch = DATA["n"] // WORKERS // DATA["batch"]
    for rank in range(WORKERS):
        mine = [e["metrics"] for e in reports if e["rank"] == rank]
        assertions.equal([(m["epoch"], m["step"]) for m in mine],
                         [(e, (e + 1) * steps_per_epoch) for e in range(DATA["epochs"])],
                         f"rank {rank}: (epoch, step) of each report()", setting)
        assertions.equal({tuple(sorted(m)) for m in mine}, {("epoch", "loss", "step", "val_loss")},
                         f"rank {rank}: metric keys of its reports", setting)
        for e in reports:
            if e["rank"] == rank:
                assertions.equal(e["options"], {"checkpoint_upload_mode":
                                                "CheckpointUploadMode.SYNC",
                                                "validation": "False"},
                                 f"rank {rank}: report() options", setting)
    assertions.equal(sorted(result.metrics), ["epoch", "loss", "step", "val_loss"],
                     "result.metrics keys", setting)
    assertions.equal((result.metrics["epoch"], result.metrics["step"]),
                     (DATA["epochs"] - 1, DATA["epochs"] * steps_per_epoch),
                     "result.metrics (epoch, step)", setting)
    assertions.equal([m["epoch"] for _, m in result.best_checkpoints],
                     list(range(DATA["epochs"])), "epochs of the registered checkpoints", setting)


@clause("lightning.checkpoint")
def check_checkpoint_file_and_load(impl):
    result, rows, reports, setting = _run(impl)
    for e in reports:
        want = ["checkpoint.ckpt"] if e["rank"] == 0 else []
        assertions.equal(e["files"], want, f"rank {e['rank']}: files of the reported folder "
                         f"(epoch {e['metrics']['epoch']})", setting)
    with result.checkpoint.as_directory() as d:
        assertions.equal(sorted(os.listdir(d)), ["checkpoint.ckpt"], "result.checkpoint files",
                         setting)
        module = tiny_module_class().load_from_checkpoint(os.path.join(d, "checkpoint.ckpt"))
    assertions.equal(weights(module), rows[0]["weights"],
                     "LightningModule.load_from_checkpoint weights (rank 0's final weights)",
                     setting)


@clause("lightning.ddp-equivalence")
def check_ddp_equals_one_process(impl):
    result, rows, _, setting = _run(impl)
    assertions.equal(rows[1]["weights"], rows[0]["weights"], "rank 1's weights (rank 0's)",
                     setting)
    expected = single_process_weights(WORKERS * DATA["batch"])
    error = max_abs_error(rows[0]["weights"], expected)
    if error > 1e-5:
        raise AssertionError(f"weights after DDP over {WORKERS} ranks differ from one process "
                             f"on the full batch by {error:.3g} (> 1e-5): {rows[0]['weights']} "
                             f"vs {expected} [{setting}]")


@clause("lightning.local")
def check_local_mode(impl):
    result, rows, reports, setting, _ = _local_run(impl)
    (r,) = rows
    assertions.equal((r["trainer"], r["environment"]), ([1, 0, 0, 0], [1, 0, 0, 0]),
                     "Trainer and RayLightningEnvironment ranks", setting)
    steps = DATA["epochs"] * DATA["n"] // DATA["batch"]
    assertions.equal(sorted(result.metrics), ["epoch", "loss", "step", "val_loss"],
                     "result.metrics keys", setting)
    assertions.equal((result.metrics["epoch"], result.metrics["step"]),
                     (DATA["epochs"] - 1, steps), "result.metrics (epoch, step)", setting)
    assertions.equal(len(reports), DATA["epochs"], "report() calls", setting)
    assertions.equal(result.checkpoint is not None and os.path.exists(result.checkpoint.path),
                     False, "result.checkpoint exists on disk (the callback deleted its "
                     "folder after report())", setting)
    expected = single_process_weights(DATA["batch"])
    error = max_abs_error(r["weights"], expected)
    assertions.equal(error <= 1e-5, True, f"weights within 1e-5 of plain torch ({error:.3g})",
                     setting)


@clause("lightning.resume")
def check_killed_worker_resumes_from_epoch_checkpoint(impl):
    _lightning(impl)
    # Rank 1 exits at the start of the last epoch on the first attempt.
    kill = (1, 0, DATA["epochs"] - 1)
    outcome, journal, setting = _fit(impl, "lightning-resume", WORKERS, kill=list(kill),
                                     failure_config=impl.train.FailureConfig(max_failures=1))
    result = assertions.succeeded(outcome, setting)
    starts = journal.events("lightning_start")
    assertions.equal(len(journal.events("lightning_kill")), 1, "faults fired", setting)
    restarted = sorted((e["rank"], e["restored"]) for e in starts if e["attempt"] == 1)
    assertions.equal(restarted, [(r, DATA["epochs"] - 2) for r in range(WORKERS)],
                     "(rank, epoch of the restored checkpoint) on the restarted attempt",
                     setting)
    assertions.equal(result.metrics["epoch"], DATA["epochs"] - 1, "result.metrics['epoch']",
                     setting)
    resumed = [e["metrics"]["epoch"] for e in journal.events("lightning_report")
               if e["attempt"] == 1 and e["rank"] == 0]
    assertions.equal(resumed, [DATA["epochs"] - 1], "epochs reported after the restart", setting)


@clause("lightning.local-process-group")
def check_local_mode_leaves_no_process_group(impl):
    result, rows, reports, setting, after = _local_run(impl)
    assertions.equal([e["group"] for e in after], [False],
                     "torch.distributed initialized in the driver after fit() returned", setting)
