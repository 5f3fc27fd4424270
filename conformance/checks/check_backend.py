"""The backend developer API (clauses `backend.*`): a Backend written for Ray 2.60
(`conformance/custom_backend.py`) runs unmodified on the implementation, the import root
swapped for the implementation's."""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import re
import sys

from conformance import assertions
from conformance.catalogue import clause
from conformance.scenarios import TrainerFactory, shared, workspace

SOURCE = os.path.join(os.path.dirname(os.path.dirname(__file__)), "custom_backend.py")


def custom_backend(impl):
    """conformance.custom_backend for Ray; for another implementation, the same source with
    `ray` replaced by its root package, loaded from a file (its functions travel to the
    workers by value)."""
    root = impl.train.__name__.rsplit(".", 1)[0]
    if root == "ray":
        return importlib.import_module("conformance.custom_backend")
    name = f"trainspec_custom_backend_{root}"
    if name in sys.modules:
        return sys.modules[name]
    folder = workspace("trainspec-backend-")
    path = os.path.join(folder, f"{name}.py")
    with open(SOURCE) as f:
        source = re.sub(r"\bray\b", root, f.read())
    with open(path, "w") as f:
        f.write(source)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    import cloudpickle

    cloudpickle.register_pickle_by_value(module)
    return module


def _fit(impl, fail_in=None, name="backend", failure_config=None, callbacks=None):
    module = custom_backend(impl)
    t = impl.train
    folder = workspace()
    journal = os.path.join(folder, "journal")
    os.makedirs(journal)
    factory = TrainerFactory(impl.DataParallelTrainer, dict(
        train_loop_per_worker=module.train_fn, train_loop_config={"journal": journal},
        backend_config=module.CustomConfig(journal=journal, fail_in=fail_in),
        scaling_config=t.ScalingConfig(num_workers=2),
        run_config=t.RunConfig(name=name, storage_path=os.path.join(folder, "s"),
                               failure_config=failure_config or t.FailureConfig(max_failures=0),
                               **({} if callbacks is None else {"callbacks": callbacks}))))
    return impl.fit(factory), journal


def _read(journal: str):
    hooks = []
    if os.path.exists(os.path.join(journal, "hooks.jsonl")):
        with open(os.path.join(journal, "hooks.jsonl")) as f:
            hooks = [json.loads(line) for line in f]
    files = {}
    for entry in sorted(os.listdir(journal)):
        if entry.endswith(".json"):
            with open(os.path.join(journal, entry)) as f:
                files[entry[:-5]] = json.load(f)
    return hooks, files


def _hooks_run(impl):
    def build(impl):
        outcome, journal = _fit(impl)
        setting = f"{impl.name}: DataParallelTrainer(num_workers=2, backend_config=CustomConfig())"
        assertions.succeeded(outcome, setting)
        return (*_read(journal), setting)

    return shared(impl, "custom-backend", build)


@clause("backend.hooks")
def check_hooks_order_and_effects(impl):
    hooks, files, setting = _hooks_run(impl)
    assertions.equal([h["hook"] for h in hooks], ["on_start", "on_training_start", "on_shutdown"],
                     "hooks called, in order", setting)
    worker_pids = [files[f"worker-{r}"]["pid"] for r in range(2)]
    assertions.equal(len({h["pid"] for h in hooks}), 1, "processes the hooks ran in", setting)
    assertions.equal(hooks[0]["pid"] in worker_pids, False,
                     "the hooks ran in a worker process", setting)
    master = files["worker-0"]["CUSTOM_MASTER"]
    for rank in range(2):
        seen = files[f"worker-{rank}"]
        assertions.equal(
            {k: seen[k] for k in ("CUSTOM_ON_START", "CUSTOM_RANK", "CUSTOM_TRAINING_START",
                                  "CUSTOM_IN_CONTEXT", "CUSTOM_MASTER")},
            {"CUSTOM_ON_START": "1", "CUSTOM_RANK": str(rank), "CUSTOM_TRAINING_START": "1",
             "CUSTOM_IN_CONTEXT": "1", "CUSTOM_MASTER": master},
            f"variables the hooks and train_func_context set, seen by rank {rank}'s "
            "training function", setting)
        down = files.get(f"shutdown-{rank}")
        assertions.equal(down, {"pid": worker_pids[rank], "in_context": "exited"},
                         f"what on_shutdown's function saw on rank {rank} (its pid, the "
                         "train_func_context exited)", setting)
    assertions.equal(hooks[1]["context_ranks"], [0, 1],
                     "get_context().get_world_rank() in functions on_training_start ran",
                     setting)


@clause("backend.worker-group")
def check_worker_group_surface(impl):
    hooks, files, setting = _hooks_run(impl)
    start = hooks[0]
    worker_pids = [files[f"worker-{r}"]["pid"] for r in range(2)]
    assertions.equal(start["size"], 2, "len(worker_group)", setting)
    assertions.equal(start["executed_pids"], worker_pids,
                     "execute(fn) values (each worker's pid), in rank order", setting)
    assertions.equal(start["metadata_pids"], worker_pids,
                     "get_workers()[i].metadata.pid", setting)
    assertions.equal(start["ranks"], [0, 1],
                     "get_workers()[i].distributed_context.world_rank", setting)
    assertions.equal(start["local_ranks"], [0, 1],
                     "get_workers()[i].distributed_context.local_rank (one node)", setting)
    assertions.equal(all(isinstance(ip, str) and ip for ip in start["node_ips"]), True,
                     f"metadata.node_ip values {start['node_ips']!r} are addresses", setting)
    assertions.equal(start["resources"].get("CPU"), 1,
                     "get_resources_per_worker()['CPU']", setting)


def _fails_before_training(impl, fail_in: str, cause_type: type, setting: str) -> None:
    outcome, journal = _fit(impl, fail_in=fail_in, name=f"backend-{fail_in}")
    error = assertions.failed(outcome, impl.train.ControllerError, setting)
    cause = getattr(error, "controller_failure", None)
    assertions.equal(isinstance(cause, cause_type), True,
                     f"ControllerError.controller_failure={cause!r} is an instance of "
                     f"{cause_type.__name__}", setting)
    hooks, files = _read(journal)
    assertions.equal(sorted(files), [], "files of training functions that ran", setting)


@clause("backend.on-start-error")
def check_driver_side_error_fails_at_once(impl):
    _fails_before_training(impl, "on_start", ValueError,
                           f"{impl.name}: a custom backend's on_start raises ValueError")


@clause("backend.worker-error")
def check_worker_side_error_is_a_controller_error(impl):
    _fails_before_training(impl, "worker", KeyError,
                           f"{impl.name}: a function on_start runs raises KeyError on rank 1")


@clause("backend.on-shutdown-error")
def check_shutdown_error_fails_the_run(impl):
    setting = f"{impl.name}: a custom backend's on_shutdown raises RuntimeError after training"
    outcome, journal = _fit(impl, fail_in="on_shutdown", name="backend-on_shutdown")
    error = assertions.failed(outcome, impl.train.ControllerError, setting)
    cause = getattr(error, "controller_failure", None)
    assertions.equal(isinstance(cause, RuntimeError), True,
                     f"ControllerError.controller_failure={cause!r} is a RuntimeError", setting)
    hooks, files = _read(journal)
    assertions.equal([h["hook"] for h in hooks], ["on_start", "on_training_start", "on_shutdown"],
                     "hooks called, in order", setting)
    assertions.equal(sorted(k for k in files if k.startswith("worker-")),
                     ["worker-0", "worker-1"], "training functions that ran", setting)


@clause("backend.worker-death-retried")
def check_worker_death_in_setup_is_retried(impl):
    setting = (f"{impl.name}: rank 1's process exits while the first group's on_start runs a "
               "function there; FailureConfig(max_failures=0)")
    outcome, journal = _fit(impl, fail_in="worker_dies_once", name="backend-worker-dies")
    assertions.succeeded(outcome, setting + " (controller_failure_limit=-1 by default)")
    hooks, files = _read(journal)
    assertions.equal(os.path.exists(os.path.join(journal, "rank-1-died")), True,
                     "the first group's rank 1 was made to exit", setting)
    assertions.equal([h["hook"] for h in hooks][-3:],
                     ["on_start", "on_training_start", "on_shutdown"],
                     "the last hooks called, in order (the group started again)", setting)
    assertions.equal(sorted(k for k in files if k.startswith("worker-")),
                     ["worker-0", "worker-1"], "training functions that ran", setting)


@clause("backend.worker-death-retried")
def check_worker_death_in_setup_with_no_controller_retries(impl):
    setting = (f"{impl.name}: rank 1's process exits while the first group's on_start runs a "
               "function there; FailureConfig(max_failures=2, controller_failure_limit=0)")
    outcome, journal = _fit(impl, fail_in="worker_dies_once", name="backend-worker-dies-0",
                            failure_config=impl.train.FailureConfig(
                                max_failures=2, controller_failure_limit=0))
    assertions.failed(outcome, impl.train.ControllerError, setting)
    hooks, files = _read(journal)
    assertions.equal(sorted(k for k in files if k.startswith("worker-")), [],
                     "training functions that ran", setting)


@clause("backend.controller-error-shutdown")
def check_controller_error_stops_the_group(impl):
    module = custom_backend(impl)
    setting = (f"{impl.name}: a UserCallback's after_report raises RuntimeError at the first "
               "report")
    outcome, journal = _fit(impl, name="backend-callback-fails",
                            callbacks=[module.FailingCallback()])
    error = assertions.failed(outcome, impl.train.ControllerError, setting)
    cause = getattr(error, "controller_failure", None)
    assertions.equal(isinstance(cause, RuntimeError), True,
                     f"ControllerError.controller_failure={cause!r} is a RuntimeError", setting)
    hooks, files = _read(journal)
    assertions.equal([h["hook"] for h in hooks], ["on_start", "on_training_start", "on_shutdown"],
                     "hooks called, in order", setting)
