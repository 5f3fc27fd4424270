"""Which accelerator devices a GPU worker sees (clauses `accelerator.*`).

Each check builds a cluster whose nodes declare GPUs and journals, from every worker, the
device variables its training function starts with. The GPU ids are the node's logical ids,
so the same rule is checked whether the GPUs are real or declared: on simcluster (the
reference) and on a local Ray session they are declared, on a GPU machine they are real.
Each check records which it was (`hardware`: "simulated" or "real", from whether a worker
could reach a CUDA device), and the report keeps it beside the verdict.
"""

from __future__ import annotations

import os

import pytest

from conformance import assertions
from conformance.adapters.base import NodeSpec
from conformance.catalogue import clause
from conformance.probe import Journal, accelerator_view
from conformance.scenarios import TrainerFactory, shared, workspace


def _fit(impl, scaling: dict, torch: bool, node: NodeSpec):
    """(per-rank accelerator views, setting) of one fit of `accelerator_view`, on the
    cluster the caller opened; None for a torch fit where torch is not installed."""
    t = impl.train
    folder = workspace()
    journal = os.path.join(folder, "journal")
    os.makedirs(journal)
    kwargs = dict(train_loop_per_worker=accelerator_view,
                  train_loop_config={"train_module": t.__name__, "journal": journal},
                  scaling_config=t.ScalingConfig(**scaling),
                  run_config=t.RunConfig(name="accel", storage_path=os.path.join(folder, "s")))
    if torch:
        try:
            tt = impl.framework("torch")
        except ImportError:
            return None
        # gloo: the rule is about device ids, and a CPU build of torch has no NCCL
        cls, kwargs["torch_config"] = tt.TorchTrainer, tt.TorchConfig(backend="gloo")
    else:
        cls = impl.DataParallelTrainer
    outcome = impl.fit(TrainerFactory(cls, kwargs))
    setting = (f"{impl.name}: {cls.__name__}(ScalingConfig("
               f"{', '.join(f'{k}={v!r}' for k, v in scaling.items())})) on a node of "
               f"{node.gpus} {node.accelerator or 'CUDA'} GPU(s)")
    assertions.succeeded(outcome, setting)
    rows = sorted(Journal(journal).events("accelerator"), key=lambda e: e["rank"])
    assertions.equal(len(rows), scaling["num_workers"], "workers that journalled", setting)
    return rows, setting


#: the fits on one 2-GPU node, shared by the checks that read them (one cluster for all)
TWO_GPUS = {"own": ({"num_workers": 2, "use_gpu": True}, False),
            "two-each": ({"num_workers": 1, "use_gpu": True,
                          "resources_per_worker": {"GPU": 2}}, False),
            "torch": ({"num_workers": 2, "use_gpu": True}, True)}
HALF = {"num_workers": 2, "use_gpu": True, "resources_per_worker": {"GPU": 0.5}}
ONE_GPU = {"dp": (HALF, False), "torch": (HALF, True)}


def _views(impl, record_property, key: str, node: NodeSpec, fits: dict, name: str):
    """Fit `name` of `fits`, all run once on one cluster of `node`; records `hardware`."""
    def build(impl):
        with impl.cluster([node]):
            return {n: _fit(impl, scaling, torch, node) for n, (scaling, torch) in fits.items()}

    got = shared(impl, key, build)[name]
    if got is None:
        pytest.skip("torch is not installed")
    rows, setting = got
    record_property("hardware", "real" if any(r["real_cuda"] for r in rows) else "simulated")
    return rows, setting


@pytest.mark.cluster
@clause("accelerator.gpu-ids")
def check_each_gpu_worker_sees_its_own_gpus(impl, record_property):
    node = NodeSpec(cpus=4, gpus=2)
    rows, setting = _views(impl, record_property, "accel-2gpu", node, TWO_GPUS, "own")
    assertions.equal(sorted(r["cuda"] for r in rows), ["0", "1"],
                     "the workers' CUDA_VISIBLE_DEVICES", setting)
    rows, setting = _views(impl, record_property, "accel-2gpu", node, TWO_GPUS, "two-each")
    assertions.equal([r["cuda"] for r in rows], ["0,1"], "CUDA_VISIBLE_DEVICES", setting)


@pytest.mark.cluster
@clause("accelerator.gpu-share")
def check_torch_workers_share_their_nodes_gpus(impl, record_property):
    rows, setting = _views(impl, record_property, "accel-2gpu", NodeSpec(cpus=4, gpus=2),
                           TWO_GPUS, "torch")
    assertions.equal([r["cuda"] for r in rows], ["0,1", "0,1"],
                     "the workers' CUDA_VISIBLE_DEVICES", setting)


@pytest.mark.cluster
@clause("accelerator.fractional-gpu")
def check_fractional_gpus_pack_workers_onto_one_gpu(impl, record_property):
    for name in ONE_GPU:
        rows, setting = _views(impl, record_property, "accel-1gpu", NodeSpec(cpus=4, gpus=1),
                               ONE_GPU, name)
        assertions.equal([r["cuda"] for r in rows], ["0", "0"],
                         "the workers' CUDA_VISIBLE_DEVICES", setting)


@pytest.mark.cluster
@clause("accelerator.rocm-ids")
def check_amd_gpus_are_named_in_hip_visible_devices(impl, record_property):
    rows, setting = _views(impl, record_property, "accel-rocm",
                           NodeSpec(cpus=4, gpus=2, accelerator="ROCm"),
                           {"own": ({"num_workers": 2, "use_gpu": True}, False)}, "own")
    assertions.equal(sorted(r["hip"] for r in rows), ["0", "1"],
                     "the workers' HIP_VISIBLE_DEVICES", setting)
    assertions.equal([r["cuda"] for r in rows], [None, None],
                     "the workers' CUDA_VISIBLE_DEVICES", setting)
