"""TorchTrainer and ray.train.torch utilities on CPU workers (clauses `torch.*`)."""

from __future__ import annotations

import inspect
import os

import pytest

from conformance import assertions
from conformance.catalogue import clause
from conformance.probe import Journal
from conformance.scenarios import TrainerFactory, shared, workspace


def _torch(impl):
    pytest.importorskip("torch")
    return impl.framework("torch")


def _torch_run(impl):
    def build(impl):
        tt = _torch(impl)
        t = impl.train
        folder = workspace()
        journal = os.path.join(folder, "journal")
        os.makedirs(journal)
        from conformance.torch_probe import torch_probe

        factory = TrainerFactory(tt.TorchTrainer, dict(
            train_loop_per_worker=torch_probe,
            train_loop_config={"train_module": t.__name__, "journal": journal},
            scaling_config=t.ScalingConfig(num_workers=2),
            run_config=t.RunConfig(name="torch", storage_path=os.path.join(folder, "s"))))
        outcome = impl.fit(factory)
        setting = f"{impl.name}: TorchTrainer(num_workers=2), CPU workers"
        assertions.succeeded(outcome, setting)
        rows = sorted(Journal(journal).events("torch"), key=lambda e: e["rank"])
        return rows, setting

    return shared(impl, "torch", build)


@clause("torch.config")
def check_torch_config_defaults(impl):
    tt = _torch(impl)
    params = inspect.signature(tt.TorchConfig).parameters
    seen = {k: params[k].default for k in ("backend", "init_method", "timeout_s")}
    assertions.equal(seen, {"backend": None, "init_method": "env", "timeout_s": 1800},
                     "TorchConfig defaults", impl.name)
    config = tt.TorchConfig()
    assertions.equal((config.backend, config.init_method, config.timeout_s), (None, "env", 1800),
                     "TorchConfig() fields", impl.name)


@clause("torch.process-group")
def check_process_group(impl):
    rows, setting = _torch_run(impl)
    assertions.equal(len(rows), 2, "workers that recorded", setting)
    for r in rows:
        seen = (r["initialized"], r.get("pg_world"), r.get("pg_rank"), r.get("pg_backend"),
                r.get("all_reduce"))
        assertions.equal(seen, (True, 2, r["rank"], "gloo", 3.0),
                         f"rank {r['rank']} (initialized, world size, rank, backend, "
                         "all_reduce of rank+1)", setting)


@clause("torch.env")
def check_torchrun_environment(impl):
    rows, setting = _torch_run(impl)
    for r in rows:
        env = r["env"]
        seen = [env[k] for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE",
                                 "NODE_RANK")]
        want = [str(r[k]) for k in ("rank", "world", "local_rank", "local_world", "node_rank")]
        assertions.equal(seen, want, f"rank {r['rank']} RANK..NODE_RANK", setting)
    masters = {(r["env"]["MASTER_ADDR"], r["env"]["MASTER_PORT"]) for r in rows}
    assertions.equal(len(masters), 1, f"distinct (MASTER_ADDR, MASTER_PORT) over ranks {masters}",
                     setting)
    assertions.equal(None in next(iter(masters)), False, "MASTER_ADDR/PORT set", setting)


@clause("torch.device")
def check_get_device_is_cpu(impl):
    rows, setting = _torch_run(impl)
    for r in rows:
        assertions.equal((r["device"], r["devices"]), ("cpu", ["cpu"]),
                         f"rank {r['rank']} (get_device(), get_devices())", setting)


@clause("torch.prepare-model")
def check_prepare_model(impl):
    rows, setting = _torch_run(impl)
    for r in rows:
        assertions.equal((r["model"], r["model_none"]), ("DistributedDataParallel", "Linear"),
                         f"rank {r['rank']} prepare_model(...) types (ddp, None)", setting)


@clause("torch.prepare-data-loader")
def check_prepare_data_loader(impl):
    rows, setting = _torch_run(impl)
    for shuffle in (False, True):
        for r in rows:
            assertions.equal(r[f"sampler_{shuffle}"], ["DistributedSampler", 2, r["rank"], shuffle],
                             f"rank {r['rank']} sampler (type, num_replicas, rank, shuffle) with "
                             f"shuffle={shuffle}", setting)
        items = [x for r in rows for x in r[f"items_{shuffle}"]]
        assertions.equal(sorted(items), list(range(16)),
                         f"items over both ranks (shuffle={shuffle})", setting)
