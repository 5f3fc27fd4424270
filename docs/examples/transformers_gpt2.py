"""Hugging Face Transformers on the Train API: transformers.Trainer inside TorchTrainer.

    python docs/examples/transformers_gpt2.py [--impl reference|ray] [--epochs 2]

What it shows (the "TransformersTrainer" workflow of older guides, in its current form):
- the whole Transformers script (data, model, `TrainingArguments`, `Trainer`) inside the
  training function; TorchTrainer starts the workers and their process group, and the
  Trainer trains with DDP through it (`use_cpu=True` on GPU-less workers, else Accelerate
  treats each worker as a single process);
- `RayTrainReportCallback` reports the Trainer's logged metrics and a copy of its newest
  checkpoint folder each time it saves (here once per epoch, after evaluating);
  `prepare_trainer` lets the Trainer read batch iterators as datasets;
- the model loaded in the driver with `from_pretrained` from `<checkpoint>/checkpoint`.

The model is a GPT-2 built from a small config with random weights, trained on synthetic
token sequences (a repeating pattern a causal LM can learn), so nothing is downloaded.
`--impl ray` runs the same code on Ray Train: only the import root changes.
"""

from __future__ import annotations

import argparse
import importlib
import os
import tempfile

import torch

VOCAB, LENGTH = 64, 16


class Sequences(torch.utils.data.Dataset):
    """Token sequences counting up from a random start (mod VOCAB): easy to predict."""

    def __init__(self, n: int, seed: int):
        starts = torch.randint(0, VOCAB, (n, 1), generator=torch.Generator().manual_seed(seed))
        self.ids = (starts + torch.arange(LENGTH)) % VOCAB

    def __len__(self):
        return len(self.ids)

    def __getitem__(self, i):
        return {"input_ids": self.ids[i], "labels": self.ids[i],
                "attention_mask": torch.ones(LENGTH, dtype=torch.long)}


def small_gpt2():
    from transformers import GPT2Config, GPT2LMHeadModel

    return GPT2LMHeadModel(GPT2Config(vocab_size=VOCAB, n_positions=LENGTH, n_embd=32,
                                      n_layer=2, n_head=2, bos_token_id=0, eos_token_id=0))


def train_func(config: dict) -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from transformers import Trainer, TrainingArguments

    train = importlib.import_module(config["impl"] + ".train")
    hf = importlib.import_module(config["impl"] + ".train.huggingface.transformers")
    rank = train.get_context().get_world_rank()

    args = TrainingArguments(
        # A folder per rank: the callback copies the newest checkpoint folder it finds
        # there, and rank 0 alone writes the model files.
        output_dir=os.path.join(config["scratch"], f"hf-output-rank{rank}"),
        num_train_epochs=config["epochs"], per_device_train_batch_size=16,
        per_device_eval_batch_size=32, learning_rate=3e-3, eval_strategy="epoch",
        save_strategy="epoch", logging_strategy="epoch", report_to="none",
        disable_tqdm=True, use_cpu=not torch.cuda.is_available())
    trainer = Trainer(model=small_gpt2(), args=args,
                      train_dataset=Sequences(config["samples"], seed=1),
                      eval_dataset=Sequences(64, seed=2))
    trainer.add_callback(hf.RayTrainReportCallback())
    trainer = hf.prepare_trainer(trainer)
    trainer.train()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--impl", choices=["reference", "ray"], default="reference")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--samples", type=int, default=512)
    parser.add_argument("--storage", default=None)
    args = parser.parse_args()
    train = importlib.import_module(args.impl + ".train")
    train_torch = importlib.import_module(args.impl + ".train.torch")

    with tempfile.TemporaryDirectory() as scratch:
        config = {"impl": args.impl, "epochs": args.epochs, "samples": args.samples,
                  "scratch": scratch}
        trainer = train_torch.TorchTrainer(
            train_func, train_loop_config=config,
            scaling_config=train.ScalingConfig(num_workers=2),
            run_config=train.RunConfig(
                name="transformers-gpt2",
                storage_path=args.storage or os.path.join(scratch, "runs")))
        result = trainer.fit()
        print(f"final metrics: step {result.metrics['step']}, epoch {result.metrics['epoch']}, "
              f"eval_loss {result.metrics['eval_loss']:.3f}")

        from transformers import GPT2LMHeadModel

        with result.checkpoint.as_directory() as directory:
            model = GPT2LMHeadModel.from_pretrained(os.path.join(directory, "checkpoint"))
        model.eval()
        prompt = torch.arange(5, 5 + LENGTH // 2).unsqueeze(0)
        with torch.no_grad():
            following = model(prompt).logits[0, -1].argmax().item()
        print(f"after {prompt[0].tolist()} the model predicts {following} "
              f"(the pattern continues with {5 + LENGTH // 2})")


if __name__ == "__main__":
    main()
