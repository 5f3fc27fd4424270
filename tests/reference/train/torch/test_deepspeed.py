"""Ray's DeepSpeed guide on the reference, on CPUs: a TorchTrainer of 2 workers whose
training function calls `deepspeed.initialize` (ZeRO stage 1 or 2 with torch's Adam, not
DeepSpeed's compiled optimizers) on the gloo group the trainer made, reports a `save_checkpoint` folder each step, and
resumes from it after a worker died. Needs the `deepspeed` extra and a C++ compiler: on
CPUs, `deepspeed.initialize` JIT-builds DeepSpeed's shared-memory collectives
(`deepspeed_shm_comm`, g++ with OpenMP) once per TORCH_EXTENSIONS_DIR, 2 to 5 minutes on
2 busy cores, and fails without a compiler. The module builds it (or finds it built) first,
in a child process with a deadline of its own, so the fits' deadline counts the fits only.
A fresh venv gives every source and header a new mtime, so ninja compiles it again in each;
where `ccache` is installed torch runs the compiler through it, which answers from what an
earlier venv compiled out of the same sources in about a second (CI installs it)."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys

import pytest

# found, not imported: deepspeed loads in the workers; this process only drives the fit
if importlib.util.find_spec("deepspeed") is None:
    pytest.skip("deepspeed is not installed (the deepspeed extra)", allow_module_level=True)
if shutil.which(os.environ.get("CXX", "c++")) is None:
    pytest.skip("no C++ compiler: DeepSpeed's CPU backend builds its deepspeed_shm_comm op "
                "with one at deepspeed.initialize", allow_module_level=True)

import deepspeed_fns as fns  # noqa: E402

import reference.train as train  # noqa: E402
from reference.train.torch import TorchTrainer  # noqa: E402

# the helpers the framework folders share live one folder up
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from framework_fixtures import TORCH_PRELOAD, bounded, gbdt_cluster  # noqa: E402, F401

pytestmark = pytest.mark.slow
# the `bounded` deadline of a test: a fit that resumes once (the op is built by then)
LIMIT_S = 240
#: the most seconds building deepspeed_shm_comm may take
BUILD_LIMIT_S = 1200
CONFIG = {"n": 48, "batch": 4, "lr": 0.05, "steps": 6}
BUILD = """
import torch.utils.cpp_extension as extensions
print(extensions._get_build_directory("deepspeed_shm_comm", False), flush=True)
from deepspeed.comm.torch import build_shm_op  # what deepspeed.initialize calls on CPUs
build_shm_op()
"""


def _kill_session(sid: int) -> None:
    """SIGKILL every process of session `sid` (ninja puts each compiler in a process group
    of its own, which a signal to the builder's group would miss)."""
    from simcluster import procfs

    for name in os.listdir("/proc"):
        got = procfs.fields(name) if name.isdigit() else None
        if got and int(got[3]) == sid:  # proc(5) field 6, the session
            try:
                os.kill(int(name), signal.SIGKILL)
            except ProcessLookupError:
                pass


def _build_shm_comm() -> None:
    """DeepSpeed's CPU collectives op, built or found built. A build killed at its deadline
    leaves torch's lock file behind, which would make every later build wait forever: it is
    removed."""
    proc = subprocess.Popen([sys.executable, "-c", BUILD], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=BUILD_LIMIT_S)
    except subprocess.TimeoutExpired:
        _kill_session(proc.pid)  # its own session (start_new_session): the pid is its id
        out, _ = proc.communicate()
        lock = os.path.join(out.splitlines()[0], "lock") if out else ""
        if lock and os.path.exists(lock):
            os.remove(lock)
        pytest.fail(f"building deepspeed_shm_comm took more than {BUILD_LIMIT_S} s:\n"
                    f"{out[-2000:]}")
    assert proc.returncode == 0, f"building deepspeed_shm_comm failed:\n{out[-3000:]}"


@pytest.fixture(scope="module")
def deepspeed_cluster():
    """Two CPUs whose workers fork with torch, deepspeed and the training function loaded;
    the op every rank's deepspeed.initialize loads is built before."""
    _build_shm_comm()
    with gbdt_cluster(*TORCH_PRELOAD, "deepspeed", "deepspeed_fns", cpus=2):
        yield


def _records(out, rank: int) -> list:
    return [json.loads(line) for line in (out / f"rank{rank}.jsonl").read_text().splitlines()]


def _max_abs_error(a: list, b: list) -> float:
    return max(abs(x - y) for x, y in zip(a, b, strict=True))


@pytest.mark.parametrize("stage", [1, 2])
def test_zero_resumes_from_its_checkpoint_after_a_worker_died(deepspeed_cluster, tmp_path,
                                                               stage):
    """Rank 1 exits after the report of step 2 (of 0..5); the second group loads that
    checkpoint (`load_checkpoint`, optimizer shards included) and trains steps 3..5. Both
    ranks end with the same parameters, those of Adam on the whole batch in one process."""
    out = tmp_path / "out"
    out.mkdir()
    config = {**CONFIG, "stage": stage, "out": str(out), "kill_after": 2}
    result = TorchTrainer(
        fns.deepspeed_loop, train_loop_config=config,
        scaling_config=train.ScalingConfig(num_workers=2),
        run_config=train.RunConfig(name=f"zero{stage}", storage_path=str(tmp_path / "s"),
                                   failure_config=train.FailureConfig(max_failures=1))).fit()
    assert result.error is None
    assert (out / "killed").read_text() == "2"

    ranks = [_records(out, r) for r in (0, 1)]
    for records in ranks:
        starts = [r for r in records if "start" in r]
        assert [(s["start"], s["resumed"]) for s in starts] == [(0, False), (3, True)]
        assert {(s["zero_stage"], s["backend"]) for s in starts} == {(stage, "gloo")}
    weights = [records[-1]["weights"] for records in ranks]
    assert weights[0] == weights[1]  # ZeRO gathers every rank's updated partition
    assert _max_abs_error(weights[0], fns.single_process(config)) < 1e-5

    assert result.metrics["step"] == CONFIG["steps"] - 1
    assert [m["step"] for _, m in result.best_checkpoints][-3:] == [3, 4, 5]
    # One folder in DeepSpeed's layout, every rank's files in it: rank 0's model states
    # and one optimizer shard per rank.
    with result.checkpoint.as_directory() as folder:
        tag = open(os.path.join(folder, "latest")).read().strip()
        assert sorted(os.listdir(os.path.join(folder, tag))) == [
            "mp_rank_00_model_states.pt", "zero_pp_rank_0_mp_rank_00_optim_states.pt",
            "zero_pp_rank_1_mp_rank_00_optim_states.pt"]
