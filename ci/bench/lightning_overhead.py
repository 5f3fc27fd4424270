"""PyTorch Lightning overhead benchmark (not a test): a Lightning Trainer under plain
torchrun, inside the reference's TorchTrainer, and inside Ray 2.60's TorchTrainer.

    python ci/bench/lightning_overhead.py [--workers 2] [--steps 300] [--warmup 30]
        [--rounds 3] [--sides plain,reference,ray] [--startup-steps 64] [--quick]

The same LightningModule (an MLP regressor, 32 -> 256 -> 256 -> 1, on 4,096 synthetic
samples built in the process; batch 32 per worker, so 64 steps per epoch with 2 workers)
is trained by `lightning.pytorch.Trainer` in `--workers` CPU processes, three ways:

  plain:     `Trainer(strategy="ddp", accelerator="cpu", devices=W, num_nodes=1)` in W
             processes started by `torchrun --standalone --nproc-per-node=W`. Lightning
             finds torchrun's variables (its TorchElasticEnvironment) and starts no process
             of its own, so each process runs the fit as a TorchTrainer worker does; its own
             launcher (re-running the script in W-1 subprocesses) would give the same loop
             with a different process start. Chosen so all three benchmarks of ci/bench use
             the same plain launcher.
  reference: the same fit in a training function of `reference.train.torch.TorchTrainer`
             with `RayDDPStrategy()`, `plugins=[RayLightningEnvironment()]` and
             `prepare_trainer` from `reference.train.lightning`, on a one-node simcluster
             whose supervisors preloaded torch and Lightning.
  Ray:       the same training function with `ray.train.lightning` and
             `ray.train.torch.TorchTrainer`, in a process of its own per fit
             (`ray.init(address="local", num_cpus=W)`,
             RAY_TRAIN_HEALTH_CHECK_INTERVAL_S=0.1); skipped with a note when `import ray`
             fails.

Three variants of each: "no checkpoints" (plain: `enable_checkpointing=False`; reference
and Ray: no report callback); "checkpoint per epoch" (plain: Lightning's default
ModelCheckpoint, which saves at each epoch's end; reference and Ray: `RayTrainReportCallback()`
with `enable_checkpointing=False`, which saves and reports at each epoch's end); and
"no checkpoints, threads as launched" (left out with `--quick`), where the torch threads are
what the launcher and Lightning left: Lightning's launcher sets CPUs / (devices per
process) threads when OMP_NUM_THREADS is unset, torchrun sets OMP_NUM_THREADS=1 and Ray sets
it to the worker's CPUs. The threads each side had are printed under the table.

Throughput: steps per second on rank 0, measured by a Lightning Callback between two
barriers (`trainer.strategy.barrier()`): at `on_train_batch_start` of step `--warmup` and at
`on_train_batch_end` of step `--warmup + --steps` (`max_steps`). Epoch ends inside that
window (and their checkpoints and reports) are in the figure. Best and median of
`--rounds` rounds; in a round each variant runs on every side in turn, the orders reversed
every other round. Every process uses CPUs / workers torch threads, set at
`on_train_start` (except in the third variant). Beside it, rank 0's process CPU time per
timed step (`time.process_time()`, all its threads), which other load on the machine moves
less than steps/s; it leaves out time spent waiting (for the other rank, for I/O). The
wall time of each launch (plain: the whole torchrun launch, with interpreter start and
imports; reference and Ray: the `fit()` call) is printed beside it for context.

Start-up: for a fit of `--startup-steps` steps with the report callback, the time from
`TorchTrainer.fit()` being called to the training function starting on rank 0 and to rank
0's first `on_train_batch_start` (both `time.time()`, written to a file by rank 0), and the
whole `fit()`. Rows: the reference on the warm cluster above; the reference and Ray each
as the first fit in a fresh process (after `reference.init(num_cpus=W)` /
`ray.init(address="local", num_cpus=W)`, whose time is the init column), where the workers
import torch and Lightning themselves.

The target for the reference is an overhead of at most 5% against plain.
"""

from __future__ import annotations

import importlib
import logging
import os
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import framework_bench as fb  # noqa: E402
import lightning.pytorch as pl  # noqa: E402
import torch  # noqa: E402

FEATURES, HIDDEN, SAMPLES, BATCH = 32, 256, 4096, 32
TARGET = 0.05
# Each variant's settings: a checkpoint (and, inside a TorchTrainer, a report) per epoch;
# torch threads set to CPUs / workers at the start of training, or left as launched.
VARIANTS = {
    "no checkpoints": {"checkpoint": False, "set_threads": True},
    "checkpoint per epoch": {"checkpoint": True, "set_threads": True},
    "no checkpoints, threads as launched": {"checkpoint": False, "set_threads": False,
                                            "full_only": True},
}
PRELOAD = ("lightning.pytorch", "reference.train.lightning")


def dataset() -> torch.utils.data.TensorDataset:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(SAMPLES, FEATURES, generator=g)
    w = torch.randn(FEATURES, 1, generator=g)
    return torch.utils.data.TensorDataset(x, x @ w + 0.1 * torch.randn(SAMPLES, 1, generator=g))


class Regressor(pl.LightningModule):
    def __init__(self, lr: float = 0.01):
        super().__init__()
        self.save_hyperparameters()
        self.net = torch.nn.Sequential(
            torch.nn.Linear(FEATURES, HIDDEN), torch.nn.ReLU(),
            torch.nn.Linear(HIDDEN, HIDDEN), torch.nn.ReLU(), torch.nn.Linear(HIDDEN, 1))

    def forward(self, x):
        return self.net(x)

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = torch.nn.functional.mse_loss(self(x), y)
        self.log("train_loss", loss)
        return loss

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=self.hparams.lr, momentum=0.9)


class StepTimer(pl.Callback):
    """Rank 0's first step (wall clock) and the steps/s between two barriers."""

    def __init__(self, config: dict, fn_start: float):
        self.config, self.fn_start = config, fn_start
        self.first_step = self.start = self.stop = None
        self.warmup, self.steps = config["warmup"], config["steps"]

    def on_train_start(self, trainer, pl_module):
        # What the launcher and Lightning left (Lightning's launcher sets CPUs / devices
        # per process when OMP_NUM_THREADS is unset), then the same for every side.
        self.launched_threads = torch.get_num_threads()
        self.omp = os.environ.get("OMP_NUM_THREADS")
        if self.config["set_threads"]:
            torch.set_num_threads(self.config["threads"])

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        if self.first_step is None:
            self.first_step = time.time()
        if self.steps and self.start is None and trainer.global_step == self.warmup:
            trainer.strategy.barrier()
            self.start = time.perf_counter()
            self.cpu_start = time.process_time()

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        if (self.start is not None and self.stop is None
                and trainer.global_step == self.warmup + self.steps):
            trainer.strategy.barrier()
            self.stop = time.perf_counter()
            self.cpu_stop = time.process_time()

    def on_train_end(self, trainer, pl_module):
        if trainer.global_rank == 0:
            rate = None if self.stop is None else self.steps / (self.stop - self.start)
            cpu = (None if self.stop is None
                   else (self.cpu_stop - self.cpu_start) / self.steps)
            fb.write_json(self.config["result"], {
                "rate": rate, "cpu_per_step": cpu,
                "fn_start": self.fn_start, "first_step": self.first_step,
                "global_step": trainer.global_step,
                "launched_threads": self.launched_threads, "omp": self.omp,
                "threads": torch.get_num_threads(), "world_size": trainer.world_size})


def train_fn(config: dict) -> None:
    fn_start = time.time()
    warnings.filterwarnings("ignore")
    logging.getLogger("lightning.pytorch").setLevel(logging.WARNING)
    impl = config["impl"]
    callbacks = [StepTimer(config, fn_start)]
    common = dict(max_steps=config["max_steps"], accelerator="cpu", logger=False,
                  enable_progress_bar=False, enable_model_summary=False,
                  default_root_dir=os.path.join(config["scratch"], "lightning"))
    if impl == "plain":
        trainer = pl.Trainer(strategy="ddp", devices=config["workers"], num_nodes=1,
                             enable_checkpointing=config["checkpoint"], callbacks=callbacks,
                             **common)
    else:
        lightning = importlib.import_module(f"{impl}.train.lightning")
        if config["checkpoint"]:
            callbacks.append(lightning.RayTrainReportCallback())
        trainer = pl.Trainer(strategy=lightning.RayDDPStrategy(), devices="auto",
                             plugins=[lightning.RayLightningEnvironment()],
                             enable_checkpointing=False, callbacks=callbacks, **common)
        trainer = lightning.prepare_trainer(trainer)
    loader = torch.utils.data.DataLoader(dataset(), batch_size=BATCH, shuffle=True)
    trainer.fit(Regressor(), train_dataloaders=loader)


# ------------------------------------------------------------------------------ driver
def main() -> None:
    args = fb.parse_args(
        __doc__, steps=300, warmup=30,
        quick={"steps": 30, "warmup": 5, "startup_steps": 8},
        extra=lambda p: p.add_argument(
            "--startup-steps", type=int, default=SAMPLES // BATCH // 2,
            help="steps of the start-up fit (default: one epoch with 2 workers)"))
    if args.child:
        fb.child_main(args, train_fn)
        return
    base = {"workers": args.workers, "threads": args.threads}
    plan = fb.Plan(
        script=str(Path(__file__).resolve()), train_fn=train_fn, preload=PRELOAD,
        timed={**base, "steps": args.steps, "warmup": args.warmup,
               "max_steps": args.warmup + args.steps},
        variants=VARIANTS,
        startup={**base, "steps": 0, "warmup": 0, "max_steps": args.startup_steps,
                 "checkpoint": True, "set_threads": True})
    outcome = fb.run_rounds(plan, args)
    header = (f"Lightning {pl.__version__}, {args.workers} CPU processes, batch {BATCH} per "
              f"worker ({SAMPLES // BATCH // args.workers} steps per epoch), {args.steps} "
              f"timed steps after {args.warmup}, {args.threads} torch thread(s) per process "
              "(unless launched), ")
    fb.report(outcome, args, header, TARGET,
              f"start-up of a {args.startup_steps}-step fit with the report callback, "
              f"{args.workers} workers (seconds, best (median))")


if __name__ == "__main__":
    main()
