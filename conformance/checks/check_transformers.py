"""Hugging Face Transformers and Accelerate inside a TorchTrainer training function (clauses
`transformers.*`, `accelerate.*`).

`transformers_probe` trains a tiny GPT-2 (one layer, random weights, synthetic tokens:
nothing is downloaded) with `transformers.Trainer`, `RayTrainReportCallback` and
`prepare_trainer`, evaluating and saving once per epoch; it journals what the Trainer saw
and every `report()` the callback made (the implementation's `report` is wrapped for the
duration of the function). Each rank writes to its own `output_dir`, so a rank's copy of
the newest checkpoint folder never races rank 0's writes. `accelerate_probe` journals what
`accelerate.Accelerator` sees and trains a linear layer a few prepared steps.
"""

from __future__ import annotations

import importlib
import os

import pytest

from conformance import assertions
from conformance.catalogue import clause
from conformance.checks.check_lightning import DriverFit
from conformance.probe import Journal
from conformance.scenarios import TrainerFactory, shared, workspace

WORKERS = 2
DATA = {"n": 16, "batch": 4, "epochs": 2, "vocab": 32, "length": 8}
#: the shards run: steps trained (max_steps) and rows of "train" and "valid" (2 workers)
DATA_STEPS, DATA_ROWS = 3, {"train": 16, "valid": 16}


def _transformers(impl):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    pytest.importorskip("accelerate")
    return impl.framework("huggingface.transformers")


def tiny_gpt2():
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    return GPT2LMHeadModel(GPT2Config(vocab_size=DATA["vocab"], n_positions=DATA["length"],
                                      n_embd=8, n_layer=1, n_head=2, bos_token_id=0,
                                      eos_token_id=0))


def tokens(n: int, seed: int) -> list:
    import torch

    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, DATA["vocab"], (n, DATA["length"]), generator=g)
    return [{"input_ids": row, "labels": row,
             "attention_mask": torch.ones(DATA["length"], dtype=torch.long)} for row in ids]


class TokenRows:
    """A map-style dataset of `tokens` rows (a torch Dataset by protocol: __len__ and
    __getitem__); its class name sorts before '_', as most do."""

    def __init__(self, n: int, seed: int):
        self.rows = tokens(n, seed)

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, i):
        return self.rows[i]


def token_items(n: int, seed: int) -> list:
    """`tokens` rows as plain lists, for a Ray Data dataset."""
    return [{k: v.tolist() for k, v in row.items()} for row in tokens(n, seed)]


def _listing(checkpoint) -> list | None:
    if checkpoint is None:
        return None
    path = checkpoint.path
    if not os.path.isdir(path):
        return ["<gone>"]
    return {name: sorted(os.listdir(os.path.join(path, name)))
            if os.path.isdir(os.path.join(path, name)) else None for name in os.listdir(path)}


def _journal_reports(train, journal: Journal, rank: int, ev: str):
    original = train.report

    def journaled_report(*args, **kwargs):
        metrics = kwargs.get("metrics", args[0] if args else None)
        checkpoint = kwargs.get("checkpoint", args[1] if len(args) > 1 else None)
        journal.record(ev=ev, rank=rank, metrics=metrics, files=_listing(checkpoint))
        return original(*args, **kwargs)

    return original, journaled_report


def transformers_probe(config: dict):
    """The training function of the transformers checks (see the module docstring)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from transformers import Trainer, TrainingArguments

    train = importlib.import_module(config["train_module"])
    hf = importlib.import_module(config["train_module"] + ".huggingface.transformers")
    journal = Journal(config["journal"])
    ctx = train.get_context()
    rank = ctx.get_world_rank()
    args = TrainingArguments(
        output_dir=os.path.join(config["journal"], f"hf-rank{rank}"),
        num_train_epochs=DATA["epochs"], per_device_train_batch_size=DATA["batch"],
        per_device_eval_batch_size=DATA["batch"], learning_rate=1e-3, eval_strategy="epoch",
        save_strategy="epoch", logging_strategy="epoch", report_to="none", disable_tqdm=True,
        seed=0, dataloader_num_workers=0, use_cpu=True)
    trainer = Trainer(model=tiny_gpt2(), args=args, train_dataset=TokenRows(DATA["n"], 0),
                      eval_dataset=TokenRows(8, 1))
    trainer.add_callback(hf.RayTrainReportCallback())
    former = type(trainer)
    same = hf.prepare_trainer(trainer) is trainer
    original, journaled = _journal_reports(train, journal, rank, "transformers_report")
    train.report = journaled
    try:
        trainer.train()
    finally:
        train.report = original
    journal.record(
        ev="transformers", rank=rank, prepare_same=same, cls=type(trainer).__name__,
        subclass=issubclass(type(trainer), former),
        context=[ctx.get_world_size(), rank, ctx.get_local_rank()],
        args=[args.world_size, args.process_index, args.local_process_index],
        parallel_mode=str(args.parallel_mode), device=str(args.device),
        global_step=trainer.state.global_step)


def transformers_data_probe(config: dict):
    """A transformers.Trainer (through prepare_trainer) reading this rank's shards as
    iterators of batches: "train" as train_dataset (max_steps set), "valid" under its name
    in an eval_dataset dict; journals the batch shapes of its loaders and what it trained."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from transformers import Trainer, TrainingArguments

    train = importlib.import_module(config["train_module"])
    hf = importlib.import_module(config["train_module"] + ".huggingface.transformers")
    rank = train.get_context().get_world_rank()
    batch = DATA["batch"]
    shards = {name: train.get_dataset_shard(name).iter_torch_batches(batch_size=batch)
              for name in ("train", "valid")}
    args = TrainingArguments(
        output_dir=os.path.join(config["journal"], f"hf-data-rank{rank}"),
        max_steps=DATA_STEPS, per_device_train_batch_size=batch,
        per_device_eval_batch_size=batch, learning_rate=1e-3, eval_strategy="steps",
        eval_steps=DATA_STEPS, save_strategy="no", logging_strategy="steps",
        logging_steps=DATA_STEPS, report_to="none", disable_tqdm=True, seed=0,
        dataloader_num_workers=0, use_cpu=True)
    trainer = hf.prepare_trainer(Trainer(model=tiny_gpt2(), args=args,
                                         train_dataset=shards["train"],
                                         eval_dataset={"valid": shards["valid"]}))

    def shapes(loader):
        return [list(b["input_ids"].shape) for b in loader]

    loaders = {"train": shapes(trainer.get_train_dataloader()),
               "valid": shapes(trainer.get_eval_dataloader("valid")),
               "direct": shapes(trainer.get_eval_dataloader(shards["valid"]))}
    trainer.train()
    Journal(config["journal"]).record(
        ev="transformers_data", rank=rank, loaders=loaders,
        global_step=trainer.state.global_step,
        keys=sorted({k for entry in trainer.state.log_history for k in entry}))
    train.report({"rank": rank})


def accelerate_probe(config: dict):
    """The training function of the accelerate checks."""
    import torch
    from accelerate import Accelerator
    from accelerate.state import AcceleratorState

    train = importlib.import_module(config["train_module"])
    ctx = train.get_context()
    rank = ctx.get_world_rank()
    plain = Accelerator()
    seen = {"plain": [plain.num_processes, plain.process_index, str(plain.distributed_type)]}
    AcceleratorState._reset_state(reset_partial_state=True)  # build the next one afresh
    accelerator = Accelerator(cpu=True)
    seen["cpu"] = [accelerator.num_processes, accelerator.process_index,
                   accelerator.local_process_index, str(accelerator.device),
                   str(accelerator.distributed_type)]
    torch.manual_seed(0)
    model = torch.nn.Linear(2, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.arange(8, dtype=torch.float32).repeat(2, 1).T
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, torch.ones(8, 1)),
                                         batch_size=2)
    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
    items = []
    for xb, yb in loader:
        items += [int(v) for v in xb[:, 0]]
        optimizer.zero_grad()
        accelerator.backward(torch.nn.functional.mse_loss(model(xb), yb))
        optimizer.step()
    AcceleratorState._reset_state(reset_partial_state=True)  # leave no state behind
    Journal(config["journal"]).record(
        ev="accelerate", rank=rank, context=[ctx.get_world_size(), rank, ctx.get_local_rank()],
        items=items, weights=[p.detach().flatten().tolist() for p in model.parameters()], **seen)
    train.report({"rank": rank})


def _fit(impl, probe, name: str, num_workers: int, datasets: dict | None = None):
    tt = impl.framework("torch")
    t = impl.train
    folder = workspace()
    journal = os.path.join(folder, "journal")
    os.makedirs(journal)
    factory = TrainerFactory(tt.TorchTrainer, dict(
        train_loop_per_worker=probe,
        train_loop_config={"train_module": t.__name__, "journal": journal},
        scaling_config=t.ScalingConfig(num_workers=num_workers),
        run_config=t.RunConfig(name=name, storage_path=os.path.join(folder, "s")),
        **({"datasets": datasets} if datasets else {})))
    if num_workers == 0:
        factory = DriverFit(factory, journal)
    outcome = impl.fit(factory, max(impl.fit_deadline_s, 180.0))
    setting = f"{impl.name}: TorchTrainer(num_workers={num_workers}) running {probe.__name__}"
    result = assertions.succeeded(outcome, setting + f", {DATA}")
    return result, Journal(journal), setting + f", {DATA}"


def _run(impl, num_workers: int):
    def build(impl):
        _transformers(impl)
        result, journal, setting = _fit(impl, transformers_probe, "hf", num_workers)
        rows = sorted(journal.events("transformers"), key=lambda e: e["rank"])
        return result, rows, journal.events("transformers_report"), setting

    return shared(impl, f"transformers-{num_workers}", build)


def _accelerate_run(impl, num_workers: int):
    def build(impl):
        _transformers(impl)
        result, journal, setting = _fit(impl, accelerate_probe, "accelerate", num_workers)
        rows = sorted(journal.events("accelerate"), key=lambda e: e["rank"])
        return result, rows, setting

    return shared(impl, f"accelerate-{num_workers}", build)


# ------------------------------------------------------------------------ no fit
def _import_fails(module: str, name: str, setting: str) -> None:
    __tracebackhide__ = True
    try:
        exec(f"from {module} import {name}", {})
    except ImportError as exc:
        assertions.equal(f"cannot import name '{name}' from '{module}'" in str(exc), True,
                         f"ImportError message {str(exc)!r}", setting)
    else:
        raise AssertionError(f"from {module} import {name} succeeded, expected ImportError "
                             f"[{setting}]")


@clause("transformers.names")
def check_public_names(impl):
    hf = _transformers(impl)
    assertions.equal(list(hf.__all__), ["RayTrainReportCallback", "prepare_trainer"],
                     f"{hf.__name__}.__all__", impl.name)
    assertions.equal(hf.RayTrainReportCallback.CHECKPOINT_NAME, "checkpoint",
                     "RayTrainReportCallback.CHECKPOINT_NAME", impl.name)
    parent = impl.framework("huggingface")
    assertions.equal(list(getattr(parent, "__all__", [])), [],
                     f"{parent.__name__}.__all__", impl.name)
    _import_fails(hf.__name__, "CHECKPOINT_NAME", impl.name)
    for legacy in ("TransformersTrainer", "AccelerateTrainer"):
        _import_fails(parent.__name__, legacy, impl.name)
    _import_fails(hf.__name__, "TransformersTrainer", impl.name)


# ------------------------------------------------------------------------ fits
@clause("transformers.ranks")
def check_trainer_ranks(impl):
    result, rows, _, setting = _run(impl, WORKERS)
    assertions.equal([r["rank"] for r in rows], list(range(WORKERS)), "ranks that finished",
                     setting)
    steps = DATA["epochs"] * DATA["n"] // (WORKERS * DATA["batch"])
    for r in rows:
        who = f"rank {r['rank']}"
        assertions.equal(r["args"], r["context"],
                         f"{who} TrainingArguments (world_size, process_index, "
                         "local_process_index)", setting)
        assertions.equal((r["parallel_mode"], r["device"]), ("ParallelMode.DISTRIBUTED", "cpu"),
                         f"{who} TrainingArguments (parallel_mode, device)", setting)
        assertions.equal(r["global_step"], steps, f"{who} steps trained", setting)


@clause("transformers.report")
def check_report_per_save_from_every_rank(impl):
    result, rows, reports, setting = _run(impl, WORKERS)
    steps_per_epoch = DATA["n"] // (WORKERS * DATA["batch"])
    for rank in range(WORKERS):
        mine = [e["metrics"] for e in reports if e["rank"] == rank]
        assertions.equal([(m.get("epoch"), m.get("step")) for m in mine],
                         [(e + 1.0, (e + 1) * steps_per_epoch) for e in range(DATA["epochs"])],
                         f"rank {rank}: (epoch, step) of each report()", setting)
        for m in mine:
            missing = {"loss", "learning_rate", "grad_norm", "eval_loss"} - set(m)
            assertions.equal(missing, set(), f"rank {rank}: keys missing from a report", setting)
    assertions.equal(result.metrics, [e["metrics"] for e in reports if e["rank"] == 0][-1],
                     "result.metrics (rank 0's last report)", setting)
    assertions.equal(len(result.best_checkpoints), DATA["epochs"],
                     "registered checkpoints (one per save)", setting)


@clause("transformers.checkpoint")
def check_checkpoint_folder_and_load(impl):
    result, rows, reports, setting = _run(impl, WORKERS)  # skips without transformers
    from transformers import GPT2LMHeadModel

    for e in reports:
        assertions.equal(sorted(e["files"] or {}), ["checkpoint"],
                         f"rank {e['rank']}: top level of the reported folder", setting)
    with result.checkpoint.as_directory() as d:
        assertions.equal(sorted(os.listdir(d)), ["checkpoint"], "result.checkpoint top level",
                         setting)
        files = set(os.listdir(os.path.join(d, "checkpoint")))
        missing = {"config.json", "model.safetensors", "trainer_state.json"} - files
        assertions.equal(missing, set(), "Hugging Face files missing from checkpoint/", setting)
        model = GPT2LMHeadModel.from_pretrained(os.path.join(d, "checkpoint"))
    assertions.equal((model.config.n_layer, model.config.vocab_size), (1, DATA["vocab"]),
                     "from_pretrained(checkpoint/) config (n_layer, vocab_size)", setting)


@clause("transformers.prepare-trainer")
def check_prepare_trainer_class(impl):
    result, rows, _, setting = _run(impl, WORKERS)
    for r in rows:
        assertions.equal((r["prepare_same"], r["cls"], r["subclass"]),
                         (True, "RayTransformersTrainer", True),
                         f"rank {r['rank']} (same object, class name, subclass of the former "
                         "class)", setting)


@clause("transformers.prepare-trainer")
def check_prepare_trainer_reads_dataset_shards(impl):
    _transformers(impl)
    d = impl.data
    datasets = {name: d.from_items(token_items(rows, seed)) for (name, rows), seed
                in zip(DATA_ROWS.items(), (0, 1), strict=True)}
    result, journal, setting = _fit(impl, transformers_data_probe, "hf-data", WORKERS,
                                    datasets)
    setting += (f", datasets {DATA_ROWS} rows; Trainer(train_dataset=<'train' shard>."
                f"iter_torch_batches(batch_size={DATA['batch']}), eval_dataset={{'valid': "
                f"<'valid' shard's>}}, max_steps={DATA_STEPS}) through prepare_trainer")
    rows = sorted(journal.events("transformers_data"), key=lambda e: e["rank"])
    assertions.equal([r["rank"] for r in rows], list(range(WORKERS)), "ranks that finished",
                     setting)
    one = [DATA["batch"], DATA["length"]]
    for r in rows:
        who = f"rank {r['rank']}"
        per_rank = {k: [one] * (n // (WORKERS * DATA["batch"])) for k, n in DATA_ROWS.items()}
        assertions.equal(r["loaders"], {"train": per_rank["train"], "valid": per_rank["valid"],
                                        "direct": per_rank["valid"]},
                         f"{who}: input_ids shape of each batch of get_train_dataloader(), "
                         "get_eval_dataloader('valid') and get_eval_dataloader(<the shard's "
                         "iterator>) (one shard batch per step)", setting)
        assertions.equal(r["global_step"], DATA_STEPS, f"{who}: steps trained", setting)
        assertions.equal("eval_valid_loss" in r["keys"], True,
                         f"{who}: 'eval_valid_loss' among the log history's keys "
                         f"{r['keys']}", setting)


@clause("transformers.import-error")
def check_import_without_transformers(impl):
    import subprocess
    import sys

    name = impl.train.__name__ + ".huggingface.transformers"
    code = ("import sys\nsys.modules['transformers'] = None\n"
            f"import {name} as hf\n"
            "try:\n    hf.prepare_trainer(object())\n"
            "except ImportError as e:\n    print('raised', type(e).__name__)\n"
            "else:\n    print('returned')\n")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    root = os.path.dirname(root)
    path = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, env=dict(os.environ, PYTHONPATH=path), cwd=root)
    assertions.equal(done.stdout.strip().splitlines()[-1:], ["raised ModuleNotFoundError"],
                     f"import {name} with transformers missing, then prepare_trainer(...) "
                     f"(stderr: {done.stderr[-1500:]!r})", impl.name)


@clause("transformers.local")
def check_local_mode(impl):
    result, rows, reports, setting = _run(impl, 0)
    (r,) = rows
    steps = DATA["epochs"] * DATA["n"] // DATA["batch"]
    assertions.equal((r["args"], r["global_step"]), ([1, 0, 0], steps),
                     "TrainingArguments (world_size, process_index, local_process_index), "
                     "steps", setting)
    assertions.equal((result.metrics.get("step"), result.metrics.get("epoch"),
                      "eval_loss" in result.metrics), (steps, float(DATA["epochs"]), True),
                     "result.metrics (step, epoch, has eval_loss)", setting)
    assertions.equal(len(reports), DATA["epochs"], "report() calls", setting)
    assertions.equal(result.checkpoint is not None and os.path.exists(result.checkpoint.path),
                     False, "result.checkpoint exists on disk (on_save's temporary folder "
                     "is gone)", setting)


@clause("accelerate.world")
def check_accelerator_world(impl):
    result, rows, setting = _accelerate_run(impl, WORKERS)
    assertions.equal([r["rank"] for r in rows], list(range(WORKERS)), "ranks that finished",
                     setting)
    for r in rows:
        who = f"rank {r['rank']}"
        assertions.equal(r["cpu"], [*r["context"], "cpu", "DistributedType.MULTI_CPU"],
                         f"{who} Accelerator(cpu=True) (num_processes, process_index, "
                         "local_process_index, device, distributed_type)", setting)
        assertions.equal(r["plain"], [1, 0, "DistributedType.NO"],
                         f"{who} Accelerator() (num_processes, process_index, "
                         "distributed_type)", setting)
    items = [x for r in rows for x in r["items"]]
    assertions.equal(sorted(items), list(range(8)), "items over the ranks' prepared loaders",
                     setting)
    assertions.equal(len(set(items)), len(items), "items seen by more than one rank", setting)
    assertions.equal(rows[1]["weights"], rows[0]["weights"], "rank 1's weights (rank 0's)",
                     setting)


@clause("accelerate.local")
def check_accelerator_local_mode(impl):
    result, rows, setting = _accelerate_run(impl, 0)
    (r,) = rows
    assertions.equal(r["cpu"], [1, 0, 0, "cpu", "DistributedType.NO"],
                     "Accelerator(cpu=True) in local mode", setting)
    assertions.equal(sorted(r["items"]), list(range(8)), "items of the prepared loader", setting)
    assertions.equal(result.metrics, {"rank": 0}, "result.metrics", setting)
