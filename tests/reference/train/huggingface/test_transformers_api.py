"""reference.train.huggingface(.transformers) outside a fit: names, legacy trainers, the
callback and prepare_trainer on their own."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch
import transformers_fns as fns
from transformers import Trainer, TrainingArguments

import reference.train.huggingface as rth
import reference.train.huggingface.transformers as rtt
from reference.train.huggingface.transformers import RayTrainReportCallback, prepare_trainer


def _public(module) -> set:
    # (pytest rewrites this package's asserts and adds "@..." names)
    return {n for n in vars(module) if n[0] not in "_@"}


def test_public_names_are_rays():
    assert rtt.__all__ == ["RayTrainReportCallback", "prepare_trainer"]
    assert _public(rtt) == set(rtt.__all__)
    assert _public(rth) == {"transformers"}  # the submodule, once imported
    assert RayTrainReportCallback.CHECKPOINT_NAME == "checkpoint"


@pytest.mark.parametrize("module,legacy", [
    ("reference.train.huggingface", "TransformersTrainer"),
    ("reference.train.huggingface", "AccelerateTrainer"),
    ("reference.train.huggingface.transformers", "TransformersTrainer"),
    ("reference.train.huggingface.transformers", "CHECKPOINT_NAME"),
])
def test_legacy_names_fail_to_import(module, legacy):
    with pytest.raises(ImportError, match=f"cannot import name '{legacy}' from '{module}'"):
        exec(f"from {module} import {legacy}")


@pytest.mark.parametrize("module", ["reference.train.huggingface.accelerate",
                                    "reference.train.accelerate"])
def test_no_accelerate_module(module):
    with pytest.raises(ModuleNotFoundError, match=f"No module named '{module}'"):
        __import__(module)


def test_callback_builds_anywhere():
    from transformers import TrainerCallback

    assert isinstance(RayTrainReportCallback(), TrainerCallback)


def _trainer(tmp_path, **kwargs):
    args = TrainingArguments(output_dir=str(tmp_path), report_to="none", use_cpu=True,
                             max_steps=2, per_device_train_batch_size=2)
    return Trainer(model=fns.tiny_gpt2(), args=args, **kwargs)


def test_prepare_trainer_keeps_the_object_and_reads_batch_iterators(tmp_path):
    import reference.data as rd

    batch = fns.Tokens(2)[0]
    batches = [{k: v.unsqueeze(0) for k, v in batch.items()}] * 3
    shard = rd.from_items([{k: v.numpy() for k, v in batch.items()}] * 3)
    trainer = _trainer(tmp_path, train_dataset=shard.iter_torch_batches(batch_size=1),
                       eval_dataset={"a": shard.iter_torch_batches(batch_size=1),
                                     "b": fns.Tokens(4)})
    base = type(trainer)
    assert prepare_trainer(trainer) is trainer
    assert type(trainer).__name__ == "RayTransformersTrainer"
    assert isinstance(trainer, base)
    # One iterator item (already a batch) per step.
    for loader in (trainer.get_train_dataloader(), trainer.get_eval_dataloader("a")):
        got = list(loader)
        assert len(got) == 3
        assert torch.equal(got[0]["input_ids"], batches[0]["input_ids"])
    # Anything else is the Trainer's own business.
    assert len(trainer.get_eval_dataloader("b")) == 1  # 4 samples, eval batch size 8


def test_prepare_trainer_without_transformers_raises_its_import_error():
    script = (
        "import sys; sys.modules['transformers'] = None\n"
        "import reference.train.huggingface.transformers as t\n"
        "assert t.RayTrainReportCallback.__mro__[1] is object\n"
        "try:\n"
        "    t.prepare_trainer(object())\n"
        "except ImportError as e:\n"
        "    print(type(e).__name__, e)\n")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=120, cwd=os.path.dirname(__file__), check=True)
    # The error of its own `import transformers.trainer`, stored when the module loaded.
    assert out.stdout.startswith("ModuleNotFoundError No module named 'transformers."), out.stderr


@pytest.mark.parametrize("name", ["RayTrainReportCallback", "prepare_trainer"])
def test_public_members_match_rays(name):
    ray_hf = pytest.importorskip("ray.train.huggingface.transformers")
    ours, theirs = getattr(rtt, name), getattr(ray_hf, name)
    assert {n for n in dir(ours) if not n.startswith("_")} == {
        n for n in dir(theirs) if not n.startswith("_")}
