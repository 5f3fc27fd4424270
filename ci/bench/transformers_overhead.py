"""Hugging Face Transformers overhead benchmark (not a test): `transformers.Trainer` under
plain torchrun, inside the reference's TorchTrainer, and inside Ray 2.60's TorchTrainer.

    python ci/bench/transformers_overhead.py [--workers 2] [--steps 200] [--warmup 20]
        [--rounds 3] [--sides plain,reference,ray] [--save-steps 50] [--quick]

The same `transformers.Trainer` run, in `--workers` CPU processes: a GPT-2 built from
`GPT2Config(n_layer=2, n_embd=64, n_head=2, vocab_size=256, n_positions=64)` with random
weights, on 2,048 synthetic sequences of 64 random tokens built in the process,
`TrainingArguments(use_cpu=True, per_device_train_batch_size=8, max_steps=warmup + steps,
report_to="none", logging_steps=--save-steps)`, an output folder per rank. Three ways:

  plain:     `torchrun --standalone --nproc-per-node=W`, the Trainer as it is (Accelerate
             sets up torch.distributed from torchrun's variables);
  reference: the same in a training function of `reference.train.torch.TorchTrainer`,
             with `reference.train.huggingface.transformers.prepare_trainer`, on a one-node
             simcluster whose supervisors preloaded torch, transformers and accelerate;
  Ray:       the same with `ray.train.huggingface.transformers` and
             `ray.train.torch.TorchTrainer`, in a process of its own per fit
             (`ray.init(address="local", num_cpus=W)`,
             RAY_TRAIN_HEALTH_CHECK_INTERVAL_S=0.1); skipped with a note when `import ray`
             fails.

Two variants: "no saving" (`save_strategy="no"`), and "save every N steps"
(`save_strategy="steps", save_steps=N`: model, optimizer and trainer state, rank 0 writing;
the reference and Ray add `RayTrainReportCallback()`, which copies each saved checkpoint
and reports it, on every rank).

Steps per second on rank 0, measured by a TrainerCallback between two barriers
(`torch.distributed.barrier()`): at `on_step_begin` of step `--warmup` and at `on_step_end`
of step `--warmup + --steps`. Saves of the steps in between (and the reference's and Ray's
reports of them) are in the figure. Best and median of `--rounds` rounds; in a round each
variant runs on every side in turn, the orders reversed every other round. Every process
uses CPUs / workers torch threads, set at `on_train_begin` (the threads each side had before
are printed under the table). Beside it, rank 0's process CPU time per timed step
(`time.process_time()`, all its threads), which other load on the machine moves less than
steps/s; it leaves out time spent waiting (for the other rank, for I/O). The wall time of
each launch (plain: the whole torchrun launch; reference and Ray: the `fit()` call) is
printed beside it for context. With `--startup-steps N` (N > 0) the start-up of an N-step
fit is measured as in lightning_overhead.py.

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
import torch  # noqa: E402

VOCAB, LENGTH, SAMPLES, BATCH = 256, 64, 2048, 8
TARGET = 0.05
PRELOAD = ("transformers", "transformers.trainer", "accelerate",
           "reference.train.huggingface.transformers")


class Tokens(torch.utils.data.Dataset):
    def __init__(self):
        g = torch.Generator().manual_seed(0)
        self.ids = torch.randint(0, VOCAB, (SAMPLES, LENGTH), generator=g)

    def __len__(self):
        return len(self.ids)

    def __getitem__(self, i):
        return {"input_ids": self.ids[i], "labels": self.ids[i],
                "attention_mask": torch.ones(LENGTH, dtype=torch.long)}


def tiny_gpt2():
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    return GPT2LMHeadModel(GPT2Config(n_layer=2, n_embd=64, n_head=2, vocab_size=VOCAB,
                                      n_positions=LENGTH, bos_token_id=0, eos_token_id=0))


def step_timer(config: dict, fn_start: float):
    """A TrainerCallback: rank 0's first step (wall clock) and the steps/s between two
    barriers. Built inside the training function, after transformers is imported."""
    import torch.distributed as dist
    from transformers import TrainerCallback

    class StepTimer(TrainerCallback):
        first_step = start = stop = launched_threads = omp = None
        warmup, steps = config["warmup"], config["steps"]

        def on_train_begin(self, args, state, control, **kwargs):
            self.launched_threads = torch.get_num_threads()
            self.omp = os.environ.get("OMP_NUM_THREADS")
            torch.set_num_threads(config["threads"])

        def on_step_begin(self, args, state, control, **kwargs):
            if self.first_step is None:
                self.first_step = time.time()
            if self.steps and self.start is None and state.global_step == self.warmup:
                dist.barrier()
                self.start = time.perf_counter()
                self.cpu_start = time.process_time()

        def on_step_end(self, args, state, control, **kwargs):
            if (self.start is not None and self.stop is None
                    and state.global_step == self.warmup + self.steps):
                dist.barrier()
                self.stop = time.perf_counter()
                self.cpu_stop = time.process_time()

        def on_train_end(self, args, state, control, **kwargs):
            if state.is_world_process_zero:
                rate = None if self.stop is None else self.steps / (self.stop - self.start)
                cpu = (None if self.stop is None
                       else (self.cpu_stop - self.cpu_start) / self.steps)
                fb.write_json(config["result"], {
                    "rate": rate, "cpu_per_step": cpu,
                    "fn_start": fn_start, "first_step": self.first_step,
                    "global_step": state.global_step, "world_size": args.world_size,
                    "launched_threads": self.launched_threads, "omp": self.omp,
                    "threads": torch.get_num_threads()})

    return StepTimer()


def train_fn(config: dict) -> None:
    fn_start = time.time()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    warnings.filterwarnings("ignore")
    from transformers import PrinterCallback, Trainer, TrainingArguments
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    logging.getLogger("accelerate").setLevel(logging.ERROR)
    impl = config["impl"]
    rank = int(os.environ.get("RANK", "0"))
    save = config["save_steps"] > 0
    args = TrainingArguments(
        output_dir=os.path.join(config["scratch"], f"hf-output-rank{rank}"),
        max_steps=config["max_steps"], per_device_train_batch_size=BATCH,
        learning_rate=1e-3, logging_steps=max(1, config["log_steps"]),
        save_strategy="steps" if save else "no", save_steps=max(1, config["save_steps"]),
        report_to="none", disable_tqdm=True, use_cpu=True, seed=0)
    trainer = Trainer(model=tiny_gpt2(), args=args, train_dataset=Tokens(),
                      callbacks=[step_timer(config, fn_start)])
    trainer.remove_callback(PrinterCallback)  # the logs printed to stdout, on every side
    if impl != "plain":
        hf = importlib.import_module(f"{impl}.train.huggingface.transformers")
        if save:
            trainer.add_callback(hf.RayTrainReportCallback())
        trainer = hf.prepare_trainer(trainer)
    trainer.train()


# ------------------------------------------------------------------------------ driver
def main() -> None:
    def extra(parser):
        parser.add_argument("--save-steps", type=int, default=50,
                            help="steps between saves in the saving variant")
        parser.add_argument("--startup-steps", type=int, default=0,
                            help="also measure the start-up of a fit of this many steps")

    args = fb.parse_args(__doc__, steps=200, warmup=20, extra=extra,
                         quick={"steps": 20, "warmup": 4, "save_steps": 10})
    if args.child:
        fb.child_main(args, train_fn)
        return
    base = {"workers": args.workers, "threads": args.threads, "log_steps": args.save_steps}
    variants = {"no saving": {"save_steps": 0},
                f"save every {args.save_steps} steps": {"save_steps": args.save_steps}}
    plan = fb.Plan(
        script=str(Path(__file__).resolve()), train_fn=train_fn, preload=PRELOAD,
        timed={**base, "steps": args.steps, "warmup": args.warmup,
               "max_steps": args.warmup + args.steps},
        variants=variants,
        startup=None if args.startup_steps <= 0 else {
            **base, "steps": 0, "warmup": 0, "max_steps": args.startup_steps,
            "save_steps": args.startup_steps})
    outcome = fb.run_rounds(plan, args)
    import transformers

    saves = sum(1 for s in range(args.warmup + 1, args.warmup + args.steps + 1)
                if s % args.save_steps == 0)
    header = (f"transformers {transformers.__version__}, GPT-2 (2 layers, 64 wide, vocab "
              f"{VOCAB}, random weights), {args.workers} CPU processes, batch {BATCH} x "
              f"{LENGTH} tokens per worker, {args.steps} timed steps after {args.warmup} "
              f"({saves} saves among them when saving), {args.threads} torch thread(s) per "
              "process, ")
    fb.report(outcome, args, header, TARGET,
              f"start-up of a {args.startup_steps}-step fit with the report callback, "
              f"{args.workers} workers (seconds, best (median))")


if __name__ == "__main__":
    main()
