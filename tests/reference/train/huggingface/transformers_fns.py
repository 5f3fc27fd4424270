"""Training functions of the Hugging Face tests (importable, so they pickle by reference):
a tiny GPT-2 with random weights on synthetic tokens, nothing downloaded."""

from __future__ import annotations

import json
import os

import torch

VOCAB, LENGTH = 32, 8
os.environ.setdefault("HF_HUB_OFFLINE", "1")


def tiny_gpt2():
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    config = GPT2Config(vocab_size=VOCAB, n_positions=LENGTH, n_embd=8, n_layer=1, n_head=2,
                        bos_token_id=0, eos_token_id=0)
    return GPT2LMHeadModel(config)


class Tokens(torch.utils.data.Dataset):
    """n sequences of LENGTH random token ids, labels = inputs (causal LM)."""

    def __init__(self, n: int, seed: int = 0):
        g = torch.Generator().manual_seed(seed)
        self.ids = torch.randint(0, VOCAB, (n, LENGTH), generator=g)

    def __len__(self):
        return len(self.ids)

    def __getitem__(self, i):
        return {"input_ids": self.ids[i], "labels": self.ids[i],
                "attention_mask": torch.ones(LENGTH, dtype=torch.long)}


def transformers_loop(config: dict):
    """transformers.Trainer in its Ray Train form; writes what each rank saw to config['out']."""
    from transformers import Trainer, TrainingArguments

    from reference.train import get_context
    from reference.train.huggingface.transformers import RayTrainReportCallback, prepare_trainer

    rank = get_context().get_world_rank()
    args = TrainingArguments(
        # One folder per rank: rank 0 writes the checkpoint while the others' on_save copies
        # would otherwise read it half-written.
        output_dir=os.path.join(config["out"], f"hf-rank{rank}"),
        num_train_epochs=config["epochs"], per_device_train_batch_size=config["batch"],
        per_device_eval_batch_size=config["batch"], learning_rate=1e-3,
        eval_strategy="epoch", save_strategy="epoch", logging_strategy="epoch",
        report_to="none", disable_tqdm=True, seed=0, dataloader_num_workers=0,
        # Accelerate treats a process without a GPU as distributed only when told to use the
        # CPU: without it each rank would train alone on the whole dataset.
        use_cpu=True)
    trainer = Trainer(model=tiny_gpt2(), args=args, train_dataset=Tokens(config["n"]),
                      eval_dataset=Tokens(8, seed=1))
    trainer.add_callback(RayTrainReportCallback())
    trainer = prepare_trainer(trainer)
    trainer.train()
    seen = {
        "rank": rank,
        "args": [args.world_size, args.process_index, args.local_process_index,
                 str(args.device), str(args.parallel_mode)],
        "accelerator": [trainer.accelerator.num_processes, trainer.accelerator.process_index,
                        str(trainer.accelerator.device)],
        "class": type(trainer).__name__,
        "global_step": trainer.state.global_step,
    }
    with open(os.path.join(config["out"], f"rank{rank}.json"), "w") as f:
        json.dump(seen, f)


def accelerate_loop(config: dict):
    """Accelerate in a training function: what Accelerator sees, and a few prepared steps."""
    from accelerate import Accelerator
    from accelerate.state import AcceleratorState

    from reference.train import get_context, report

    rank = get_context().get_world_rank()
    plain = Accelerator()
    seen = {"plain": [plain.num_processes, plain.process_index, str(plain.distributed_type)]}
    AcceleratorState._reset_state(reset_partial_state=True)  # a second Accelerator afresh
    accelerator = Accelerator(cpu=True)
    seen["cpu"] = [accelerator.num_processes, accelerator.process_index,
                   accelerator.local_process_index, str(accelerator.device),
                   str(accelerator.distributed_type)]
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    data = torch.utils.data.TensorDataset(torch.arange(8, dtype=torch.float32).repeat(3, 1).T,
                                          torch.ones(8, 1))
    loader = torch.utils.data.DataLoader(data, batch_size=2)
    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
    items = []
    for x, y in loader:
        items += [int(v) for v in x[:, 0]]
        optimizer.zero_grad()
        accelerator.backward(torch.nn.functional.mse_loss(model(x), y))
        optimizer.step()
    seen["items"] = items
    seen["weights"] = [p.detach().flatten().tolist() for p in model.parameters()]
    with open(os.path.join(config["out"], f"rank{rank}.json"), "w") as f:
        json.dump(seen, f)
    report({"rank": rank})
