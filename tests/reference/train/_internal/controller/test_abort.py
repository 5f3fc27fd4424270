"""Ctrl-C on the driver aborts a distributed fit cleanly: the driver raises
KeyboardInterrupt, every worker process is gone, and the latest checkpoint is intact."""

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from simcluster import procfs

DRIVER = textwrap.dedent('''
    import faulthandler, os, signal, sys, time
    import reference.train as t

    faulthandler.register(signal.SIGUSR1, all_threads=True)

    out = sys.argv[1]

    def train(config):
        ctx = t.get_context()
        with open(os.path.join(out, f"pid-{ctx.get_world_rank()}"), "w") as f:
            f.write(str(os.getpid()))
        for step in range(10_000):
            d = os.path.join(out, "local", f"{ctx.get_world_rank()}-{step}")
            os.makedirs(d)
            with open(os.path.join(d, f"shard-{ctx.get_world_rank()}.json"), "w") as f:
                f.write('{"step": %d}' % step)
            t.report({"step": step}, checkpoint=t.Checkpoint.from_directory(d))
            if step >= 2 and ctx.get_world_rank() == 0:
                open(os.path.join(out, "ready"), "w").close()
            time.sleep(0.05)

    trainer = t.DataParallelTrainer(
        train, scaling_config=t.ScalingConfig(num_workers=2),
        run_config=t.RunConfig(storage_path=os.path.join(out, "storage"), name="abort",
                               checkpoint_config=t.CheckpointConfig(num_to_keep=2)))
    try:
        trainer.fit()
    except KeyboardInterrupt:
        print("INTERRUPTED", flush=True)
        sys.exit(3)
''')


def _alive(pid: int) -> bool:
    return procfs.state(pid) not in (None, "Z", "X")


@pytest.mark.slow
def test_sigint_aborts_cleanly(tmp_path):
    script = tmp_path / "driver.py"
    script.write_text(DRIVER)
    # The driver starts as a user's script would: none of the cluster or launcher variables
    # that other tests of this process may have set, SIGINT at its default disposition.
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("SIMCLUSTER_", "REFERENCE_"))
           and k not in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "NODE_RANK",
                         "MASTER_ADDR", "MASTER_PORT")}
    proc = subprocess.Popen([sys.executable, str(script), str(tmp_path)], env=env,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 60
        while not (tmp_path / "ready").exists():
            assert proc.poll() is None, proc.stdout.read()
            assert time.monotonic() < deadline, "the fit never reached step 2"
            time.sleep(0.05)
        pids = [int((tmp_path / f"pid-{r}").read_text()) for r in (0, 1)]
        proc.send_signal(signal.SIGINT)
        try:
            out, _ = proc.communicate(timeout=90)  # generous: CI machines are shared
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGUSR1)  # the driver dumps its stacks (faulthandler)
            time.sleep(2)  # let it write them before it is killed
            proc.kill()
            raise AssertionError("the driver did not exit within 90 s of SIGINT:\n"
                                 + proc.communicate()[0][-6000:]) from None
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 3 and "INTERRUPTED" in out, out[-3000:]
    deadline = time.monotonic() + 10
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(_alive(p) for p in pids), f"workers {pids} outlived the driver"
    run = tmp_path / "storage" / "abort"
    snapshot = json.loads((run / "checkpoint_manager_snapshot.json").read_text())
    latest = snapshot["latest_checkpoint_result"]["checkpoint_dir_name"]
    shards = sorted(os.listdir(run / latest))
    assert shards == ["shard-0.json", "shard-1.json"]
    for name in shards:
        json.loads((run / latest / name).read_text())  # whole, not truncated
