"""Which accelerator devices a GPU worker sees (clauses `accelerator.*`).

Each check builds a cluster whose nodes declare GPUs and journals, from every worker, the
device variables its training function starts with. The GPU ids are the node's logical ids,
so the same rule is checked whether the GPUs are real or declared: on simcluster (the
reference) and on a local Ray session they are declared, on a GPU machine they are real.
Each check records which it was (`hardware`: "simulated" or "real", from whether a worker
could reach a CUDA device), and the report keeps it beside the verdict.
"""

from __future__ import annotations

import dataclasses
import os

import pytest

from conformance import assertions
from conformance.accelerator_probe import accelerator_view
from conformance.adapters.base import NodeSpec
from conformance.catalogue import clause
from conformance.probe import Journal
from conformance.scenarios import TrainerFactory, shared, workspace


@dataclasses.dataclass(frozen=True)
class Fit:
    """One fit of `accelerator_view`: its ScalingConfig's arguments; `torch`: a TorchTrainer
    (the probe then journals the torch devices) with process-group backend `backend`
    (None: TorchConfig's default); `prepare`: the probe also prepares a model and a loader;
    `real_only`: run only where an earlier fit on the cluster reached a real CUDA device."""

    scaling: dict
    torch: bool = False
    backend: str | None = "gloo"  # the device-id rules need no NCCL (a CPU torch has none)
    prepare: bool = False
    real_only: bool = False


def _fit(impl, fit: Fit, node: NodeSpec):
    """(per-rank accelerator views, setting) of one fit on the cluster the caller opened;
    None for a torch fit where torch is not installed."""
    t = impl.train
    folder = workspace()
    journal = os.path.join(folder, "journal")
    os.makedirs(journal)
    config = {"train_module": t.__name__, "journal": journal,
              "node_id": impl.node_id_function(), "prepare": fit.prepare}
    kwargs = dict(train_loop_per_worker=accelerator_view, train_loop_config=config,
                  scaling_config=t.ScalingConfig(**fit.scaling),
                  run_config=t.RunConfig(name="accel", storage_path=os.path.join(folder, "s")))
    if fit.torch:
        try:
            tt = impl.framework("torch")
        except ImportError:
            return None
        config["torch_module"] = tt.__name__
        cls, kwargs["torch_config"] = tt.TorchTrainer, tt.TorchConfig(backend=fit.backend)
    else:
        cls = impl.DataParallelTrainer
    outcome = impl.fit(TrainerFactory(cls, kwargs))
    kind = node.accelerator or ("TPU" if node.tpus else "CUDA")
    count = node.tpus or node.gpus
    setting = (f"{impl.name}: {cls.__name__}(ScalingConfig("
               f"{', '.join(f'{k}={v!r}' for k, v in fit.scaling.items())})"
               f"{f', backend {fit.backend!r}' if fit.torch and fit.backend else ''}) on a "
               f"node of {count} {kind} {'chip' if node.tpus else 'GPU'}(s)")
    assertions.succeeded(outcome, setting)
    rows = sorted(Journal(journal).events("accelerator"), key=lambda e: e["rank"])
    assertions.equal(len(rows), fit.scaling["num_workers"], "workers that journalled", setting)
    return rows, setting


def _real(rows) -> bool:
    return any(r["real_cuda"] for r in rows)


#: the fits on one 2-GPU node, shared by the checks that read them (one cluster for all)
TWO_GPUS = {"own": Fit({"num_workers": 2, "use_gpu": True}),
            "two-each": Fit({"num_workers": 1, "use_gpu": True,
                             "resources_per_worker": {"GPU": 2}}),
            "torch": Fit({"num_workers": 2, "use_gpu": True}, torch=True),
            "torch-two-each": Fit({"num_workers": 1, "use_gpu": True,
                                   "resources_per_worker": {"GPU": 2}}, torch=True)}
HALF = {"num_workers": 2, "use_gpu": True, "resources_per_worker": {"GPU": 0.5}}
#: one 1-GPU node: fractional GPUs; one worker preparing a model and a loader (on a real
#: GPU with TorchConfig's default backend, NCCL, else with gloo)
ONE_GPU = {"dp": Fit(HALF), "torch": Fit(HALF, torch=True),
           "prepare": Fit({"num_workers": 1, "use_gpu": True}, torch=True, prepare=True),
           "nccl": Fit({"num_workers": 1, "use_gpu": True}, torch=True, backend=None,
                       prepare=True, real_only=True)}


def _views(impl, record_property, key: str, node: NodeSpec, fits: dict, name: str):
    """Fit `name` of `fits`, all run once on one cluster of `node`; records `hardware`."""
    def build(impl):
        got = {}
        with impl.accelerator_cluster([node]) as handle:
            existing = getattr(handle, "existing", False)
            for n, fit in fits.items():
                seen = [v[0] for v in got.values() if isinstance(v, tuple)]
                if fit.real_only and not any(_real(rows) for rows in seen):
                    got[n] = "the GPUs are declared, not real (no worker reached a CUDA device)"
                    continue
                got[n] = _fit(impl, fit, node)
                if existing and got[n] is not None:
                    got[n] = _as_if_alone(*got[n])
        return got

    got = shared(impl, key, build)[name]
    if got is None:
        pytest.skip("torch is not installed")
    if isinstance(got, str):
        pytest.skip(got)
    rows, setting = got
    # a worker reaching CUDA proves real hardware only for a node of NVIDIA GPUs: a ROCm or
    # TPU worker on a machine with an NVIDIA GPU reaches it too, its own devices declared
    cuda_node = node.gpus and node.accelerator in (None, "CUDA")
    record_property("hardware", "real" if cuda_node and _real(rows) else "simulated")
    return rows, setting


def _as_if_alone(rows: list[dict], setting: str):
    """The rows of a fit on a node of a cluster the suite does not own, with the device ids
    the workers saw renumbered 0, 1, ... in numeric order: which of a node's GPUs are free
    there is not the suite's to choose, so the checks judge the pattern (one id each,
    distinct, shared, the same) rather than the numbers. Workers placed on several nodes
    give the reason to skip (a str): the pattern is a one-node one."""
    if len({r["node"] for r in rows}) > 1:
        return (f"{setting}: the workers ran on {len({r['node'] for r in rows})} nodes of "
                "the cluster (no one node had their GPUs free)")
    ids = sorted({i for r in rows for var in ("cuda", "hip") if r[var]
                  for i in r[var].split(",")}, key=lambda i: (len(i), i))
    new = {old: str(n) for n, old in enumerate(ids)}
    out = [{**r, **{var: ",".join(new[i] for i in r[var].split(","))
                    for var in ("cuda", "hip") if r[var]}} for r in rows]
    return out, f"{setting}; the node's GPU ids renumbered from 0 ({', '.join(ids)} seen)"


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
    for name in ("dp", "torch"):
        rows, setting = _views(impl, record_property, "accel-1gpu", NodeSpec(cpus=4, gpus=1),
                               ONE_GPU, name)
        assertions.equal([r["cuda"] for r in rows], ["0", "0"],
                         "the workers' CUDA_VISIBLE_DEVICES", setting)


@pytest.mark.cluster
@clause("accelerator.rocm-ids")
def check_amd_gpus_are_named_in_hip_visible_devices(impl, record_property):
    rows, setting = _views(impl, record_property, "accel-rocm",
                           NodeSpec(cpus=4, gpus=2, accelerator="ROCm"),
                           {"own": Fit({"num_workers": 2, "use_gpu": True})}, "own")
    assertions.equal(sorted(r["hip"] for r in rows), ["0", "1"],
                     "the workers' HIP_VISIBLE_DEVICES", setting)
    assertions.equal([r["cuda"] for r in rows], [None, None],
                     "the workers' CUDA_VISIBLE_DEVICES", setting)


def _no_error(rows, setting: str) -> None:
    for r in rows:
        assertions.equal(r.get("error"), None, f"what rank {r['rank']}'s torch calls raised",
                         setting)


@pytest.mark.cluster
@clause("accelerator.torch-devices")
def check_torch_devices_are_the_workers_visible_gpus(impl, record_property):
    cases = [("accel-2gpu", NodeSpec(cpus=4, gpus=2), TWO_GPUS, "torch", ["cuda:0", "cuda:1"]),
             ("accel-2gpu", NodeSpec(cpus=4, gpus=2), TWO_GPUS, "torch-two-each",
              ["cuda:0,cuda:1"]),
             ("accel-1gpu", NodeSpec(cpus=4, gpus=1), ONE_GPU, "torch", ["cuda:0", "cuda:0"])]
    for key, node, fits, name, expected in cases:
        rows, setting = _views(impl, record_property, key, node, fits, name)
        _no_error(rows, setting)
        got = sorted(",".join(r["devices"]) for r in rows)
        if not _real(rows) and got == ["cpu"] * len(rows):
            continue  # declared GPUs torch cannot reach: computing on the CPU is allowed
        assertions.equal(got, expected, "the workers' get_devices()", setting)
        assertions.equal([r["device"] for r in rows], [r["devices"][0] for r in rows],
                         "each worker's get_device() (the first of its get_devices())",
                         setting)


def _prepared(impl, record_property, name: str):
    rows, setting = _views(impl, record_property, "accel-1gpu", NodeSpec(cpus=4, gpus=1),
                           ONE_GPU, name)
    (row,) = rows
    if row.get("error") and not row["real_cuda"] and row.get("device", "").startswith("cuda"):
        pytest.skip(f"get_device() is {row['device']} on a GPU that is declared, not real: "
                    f"this machine's torch cannot move a model there ({row['error']})")
    _no_error(rows, setting)
    return row, setting


@pytest.mark.cluster
@clause("accelerator.prepare-on-device")
def check_prepare_puts_the_model_and_batches_on_the_device(impl, record_property):
    row, setting = _prepared(impl, record_property, "prepare")
    assertions.equal((row["model_device"], row["batch_device"]), (row["device"],) * 2,
                     "(the prepared model's parameters' device, a prepared batch's device) "
                     f"against get_device() {row['device']}", setting)
    if row["real_cuda"]:
        assertions.equal(row["device"], "cuda:0", "get_device() of the GPU worker", setting)


@pytest.mark.cluster
@clause("accelerator.nccl")
def check_torch_gpu_workers_join_an_nccl_group(impl, record_property):
    row, setting = _prepared(impl, record_property, "nccl")
    assertions.equal((row["backend"], row["device"], row["model_device"], row["all_reduce"]),
                     ("nccl", "cuda:0", "cuda:0", 1.0),
                     "(process group backend, get_device(), model device, all_reduce of "
                     "ones on one worker)", setting)


@pytest.mark.cluster
@clause("accelerator.type")
def check_accelerator_type_picks_the_nodes_of_that_type(impl, record_property):
    if impl.node_id_function() is None:
        pytest.skip(f"adapter {impl.name!r} cannot tell which node a worker ran on")
    nodes = [NodeSpec(cpus=2, gpus=2, resources={"accelerator_type:A100": 1}),
             NodeSpec(cpus=2, gpus=2, resources={"accelerator_type:T4": 1})]
    setting = (f"{impl.name}: DataParallelTrainer(ScalingConfig(num_workers=2, use_gpu=True, "
               "accelerator_type=...)) on a node of 2 A100 GPUs and one of 2 T4 GPUs, "
               "fits of A100, T4, A100 in turn")
    placed = {}
    with impl.accelerator_cluster(nodes):
        for kind in ("A100", "T4", "A100"):
            fit = Fit({"num_workers": 2, "use_gpu": True, "accelerator_type": kind})
            rows, _ = _fit(impl, fit, nodes[0])
            record_property("hardware", "real" if _real(rows) else "simulated")
            where = {r["node"] for r in rows}
            assertions.equal(len(where), 1, f"nodes the {kind} workers ran on ({where})",
                             setting)
            placed.setdefault(kind, set()).update(where)
    assertions.equal(len(placed["A100"]), 1, "nodes the two A100 fits ran on", setting)
    assertions.equal(placed["A100"] != placed["T4"], True,
                     f"the A100 fits' node {placed['A100']} differs from the T4 fit's "
                     f"{placed['T4']}", setting)


TPU_FITS = {"one": Fit({"num_workers": 1, "use_tpu": True}),
            "two": Fit({"num_workers": 1, "use_tpu": True, "resources_per_worker": {"TPU": 2}})}


@pytest.mark.cluster
@clause("accelerator.tpu-chips")
def check_tpu_workers_see_their_chips(impl, record_property):
    node = NodeSpec(cpus=4, tpus=4)
    for name, chips, bounds in (("one", 1, "1,1,1"), ("two", 2, "1,2,1")):
        rows, setting = _views(impl, record_property, "accel-tpu", node, TPU_FITS, name)
        (row,) = rows
        ids = (row["tpu"] or "").split(",")
        assertions.equal((len(ids), all(i in ("0", "1", "2", "3") for i in ids),
                          len(set(ids))), (chips, True, chips),
                         f"(count, all chip ids of the node, distinct) of TPU_VISIBLE_CHIPS "
                         f"{row['tpu']!r}", setting)
        assertions.equal((row["tpu_chip_bounds"], row["tpu_host_bounds"]), (bounds, "1,1,1"),
                         "(TPU_CHIPS_PER_HOST_BOUNDS, TPU_HOST_BOUNDS)", setting)
