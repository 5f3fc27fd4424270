"""Hugging Face Transformers and Accelerate inside a TorchTrainer training function (clauses
`transformers.*`, `accelerate.*`).

The training functions are in `conformance.transformers_probe`: `transformers_probe` trains
a tiny GPT-2 (one layer, random weights, synthetic tokens: nothing is downloaded) with
`transformers.Trainer`, `RayTrainReportCallback` and `prepare_trainer`, evaluating and
saving once per epoch; it journals what the Trainer saw and every `report()` the callback
made (the implementation's `report` is wrapped for the duration of the function). Each rank
writes to its own `output_dir`, so a rank's copy of the newest checkpoint folder never races
rank 0's writes. `accelerate_probe` journals what `accelerate.Accelerator` sees and trains a
linear layer a few prepared steps.
"""

from __future__ import annotations

import os

import pytest

from conformance import assertions
from conformance.catalogue import clause
from conformance.checks.check_lightning import DriverFit
from conformance.probe import Journal
from conformance.scenarios import TrainerFactory, shared, workspace
from conformance.transformers_probe import (
    DATA,
    DATA_ROWS,
    DATA_STEPS,
    accelerate_probe,
    token_items,
    transformers_data_probe,
    transformers_probe,
)

WORKERS = 2


def _transformers(impl):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    pytest.importorskip("accelerate")
    return impl.framework("huggingface.transformers")


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
