"""The training functions of the Transformers and Accelerate checks
(`conformance/checks/check_transformers.py`).

`transformers_probe` trains a tiny GPT-2 (one layer, random weights, synthetic tokens:
nothing is downloaded) with `transformers.Trainer`, `RayTrainReportCallback` and
`prepare_trainer`, evaluating and saving once per epoch; it journals what the Trainer saw
and every `report()` the callback made (the implementation's `report` is wrapped for the
duration of the function). Each rank writes to its own `output_dir`, so a rank's copy of
the newest checkpoint folder never races rank 0's writes. `transformers_data_probe` feeds
the Trainer this rank's dataset shards; `accelerate_probe` journals what
`accelerate.Accelerator` sees and trains a linear layer a few prepared steps. A module of
its own, apart from the checks, so a worker that unpickles these imports neither pytest nor
the suite's check modules.
"""

from __future__ import annotations

import importlib
import os

from conformance.probe import Journal

DATA = {"n": 16, "batch": 4, "epochs": 2, "vocab": 32, "length": 8}
#: the shards run: steps trained (max_steps) and rows of "train" and "valid" (2 workers)
DATA_STEPS, DATA_ROWS = 3, {"train": 16, "valid": 16}


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
