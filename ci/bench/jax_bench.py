"""JAX benchmark (not a test): a 2-process SPMD training step on the CPU, launched by hand
(the limit), by the reference's JaxTrainer and by Ray 2.60's; then JaxTrainer fits that
reserve whole simulated TPU slices on a 64-host simcluster.

    python ci/bench/jax_bench.py [--rounds 3] [--steps 200] [--warmup 20] [--batch 512]
        [--sides limit,reference[,ray]] [--tpu-hosts 64] [--timeout 600]

1. SPMD step overhead. Every side runs `spmd_steps`: an MLP 64-256-256-1 (float32, the same
   seeded params on every process), --batch x 64 rows per process seeded per rank, global
   arrays (`jax.make_array_from_process_local_data` on a Mesh over jax.devices()), one
   jitted SGD step whose loss is the mean over the global batch (XLA all-reduces the
   gradients, gloo between the processes); --warmup untimed steps, --steps timed ones.
     limit:     2 processes started here: `jax.distributed.initialize("127.0.0.1:<port>",
                2, rank)`, JAX_PLATFORMS=cpu (OMP_NUM_THREADS=1 unless set, as both give);
     reference: reference.train.v2.jax.JaxTrainer, JaxConfig(use_gpu=True), 2 workers,
                worker_runtime_env JAX_PLATFORMS=cpu (its backend initializes
                jax.distributed), after `reference.init(num_cpus=4)`;
     ray:       the same with ray.train.v2.jax, `ray.init(address="local", num_cpus=4)`.
   Each launch is a fresh process, sides alternate order between rounds, medians of
   --rounds. steps/s: the slowest rank's; overhead: against the limit (target: the
   reference within 5%); CPU ms/step: a worker's process CPU per timed step; other CPU: what
   the rest of the launch's processes (driver, controller, node supervisors, Ray's daemons)
   used during the timed steps, in cores. Start-up, from the launch (limit: the first Popen;
   else `fit()`): init s (reference/ray .init), ->procs (the workers exist), ->fn (the
   steps' function starts: interpreter, jax import, jax.distributed), ->1st step (its end),
   1st step s (array set-up and the jit compile); fit wall s: the whole fit / launch.
2. TPU slice placement. --tpu-hosts hosts (a multiple of 4) = slices of
   `simcluster.tpu_slice(name, "TPU-V4", "2x2x4", cpus=1)`: the cluster's start, then a
   no-op JaxTrainer fit (JaxConfig(): no jax.distributed; use_tpu, topology 2x2x4) with
   W = 4, 16, 64 workers (1, 4, 16 slices; those that fit): the fit's wall time (whole slices
   reserved, workers started, run). --tpu-hosts 0 skips it; past --timeout it is reported
   as not done. Every launch has --timeout; its process tree is killed after it.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from itertools import pairwise
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parents[1])]

import framework_bench as fb  # noqa: E402

SIDES = ("limit", "reference", "ray")
TARGET = 0.05
DIMS = (64, 256, 256, 1)
THROUGHPUT = [("steps/s", "rate", ".1f"), ("overhead", "overhead", "+.1%"),
              ("CPU ms/step", "cpu_ms", ".2f"), ("other CPU", "other", ".1%")]
STARTUP = [("fit wall s", "fit_wall", ".2f"), ("init s", "init_s", ".2f"),
           ("->procs s", "to_proc", ".2f"), ("->fn s", "to_fn", ".2f"),
           ("->1st step s", "startup", ".2f"), ("1st step s", "first", ".2f")]


# ------------------------------------------------------------------ what every side runs
def spmd_steps(config: dict, rank: int) -> dict:
    """The data-parallel steps, on a process whose jax.distributed is initialized."""
    fn_start = time.time()
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    mesh = Mesh(np.array(jax.devices()), ("d",))
    repl, split = NamedSharding(mesh, PartitionSpec()), NamedSharding(mesh, PartitionSpec("d"))
    rng = np.random.default_rng(0)  # the same params on every process
    host_params = [(rng.normal(0, (2 / m) ** 0.5, (m, n)).astype(np.float32),
                    np.zeros(n, np.float32)) for m, n in pairwise(DIMS)]
    params = jax.tree.map(lambda a: jax.make_array_from_process_local_data(repl, a),
                          host_params)
    data = np.random.default_rng(1000 + rank)
    b, world = config["batch"], jax.process_count()
    x = data.standard_normal((b, DIMS[0]), dtype=np.float32)
    y = np.sin(x[:, :1]) + 0.1 * data.standard_normal((b, 1), dtype=np.float32)
    gx = jax.make_array_from_process_local_data(split, x, (b * world, DIMS[0]))
    gy = jax.make_array_from_process_local_data(split, y, (b * world, 1))

    def loss_fn(p, x, y):
        for w, bias in p[:-1]:
            x = jax.nn.relu(x @ w + bias)
        return jnp.mean((x @ p[-1][0] + p[-1][1] - y) ** 2)  # over the global batch

    def step(p, x, y):
        loss, grads = jax.value_and_grad(loss_fn)(p, x, y)
        return jax.tree.map(lambda a, g: a - 0.01 * g, p, grads), loss

    step = jax.jit(step, out_shardings=(repl, repl), donate_argnums=0)
    params, first_loss = step(params, gx, gy)
    jax.block_until_ready(params)
    first_step = time.time()
    for _ in range(config["warmup"] - 1):
        params, _ = step(params, gx, gy)
    jax.block_until_ready(params)
    tree = tree_cpu(config["root"])
    cpu, start = time.process_time(), time.perf_counter()
    for _ in range(config["steps"]):
        params, loss = step(params, gx, gy)
    jax.block_until_ready((params, loss))
    elapsed = time.perf_counter() - start
    cpu, tree = time.process_time() - cpu, tree_cpu(config["root"]) - tree
    return {"world": world, "rate": config["steps"] / elapsed, "elapsed": elapsed, "cpu": cpu,
            "cpu_per_step": cpu / config["steps"], "tree_cpu": tree, "proc_start": proc_start(),
            "fn_start": fn_start, "first_step": first_step,
            "loss": (float(first_loss), float(loss)), "omp": os.environ.get("OMP_NUM_THREADS")}


def proc_start() -> float:
    """When this process was created (fork or exec), as time.time(), to 10 ms."""
    with open("/proc/self/stat") as f:
        ticks = int(f.read().rsplit(")", 1)[1].split()[19])
    age = time.clock_gettime(time.CLOCK_BOOTTIME) - ticks / os.sysconf("SC_CLK_TCK")
    return time.time() - age


def tree_cpu(root: int) -> float:
    """CPU seconds the live processes of root's tree (root included) have used so far."""
    import proctree

    total = 0
    for pid in [root, *proctree.descendants(root)]:
        try:
            with open(f"/proc/{pid}/stat") as f:
                total += sum(map(int, f.read().rsplit(")", 1)[1].split()[11:13]))
        except (OSError, ValueError):
            pass
    return total / os.sysconf("SC_CLK_TCK")


def train_fn(config: dict):
    """The JaxTrainer training function (reference and Ray): the steps, a report."""
    train = importlib.import_module(config["impl"] + ".train")
    rank = train.get_context().get_world_rank()
    out = spmd_steps(config, rank)
    fb.write_json(os.path.join(config["out"], f"rank{rank}.json"), out)
    train.report({"steps_per_s": out["rate"]})
    return out["rate"]


def tpu_noop():  # the TPU fits' training function
    pass


# ------------------------------------------------------------------ the children
def child_limit_worker(config: dict) -> dict:
    import jax

    jax.distributed.initialize(config["coordinator"], num_processes=config["workers"],
                               process_id=config["rank"])
    try:
        return spmd_steps(config, config["rank"])
    finally:
        jax.distributed.shutdown()


def child_limit(config: dict) -> dict:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    env.setdefault("OMP_NUM_THREADS", "1")  # what both trainers give a 1-CPU worker
    with tempfile.TemporaryDirectory() as scratch:
        called, procs = time.time(), []
        for rank in range(config["workers"]):
            cfg = dict(config, rank=rank, coordinator=f"127.0.0.1:{port}", root=os.getpid())
            procs.append(subprocess.Popen(
                [sys.executable, __file__, "--child", "limit-worker", "--config",
                 json.dumps(cfg), "--result", os.path.join(scratch, f"rank{rank}.json")],
                env=env))
        deadline = time.monotonic() + config["timeout"]
        try:  # until all exit, one fails (the others would wait on it) or the deadline
            while time.monotonic() < deadline and not any(p.poll() for p in procs) and any(
                    p.poll() is None for p in procs):
                time.sleep(0.05)
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
                    p.wait()
        returned = time.time()
        if any(p.returncode for p in procs):
            raise RuntimeError(f"limit workers exited with {[p.returncode for p in procs]}")
        ranks = [fb.read_json(os.path.join(scratch, f"rank{r}.json"))
                 for r in range(config["workers"])]
    return {"ranks": ranks, "fit_called": called, "fit_wall": returned - called}


def child_trainer(impl: str, config: dict) -> dict:
    start = time.perf_counter()
    if impl == "ray":
        os.environ.update(fb.RAY_ENV)
        import ray

        ray.init(address="local", num_cpus=4, include_dashboard=False, log_to_driver=False,
                 logging_level="ERROR")
    else:
        importlib.import_module("reference").init(num_cpus=4)
    init_s = time.perf_counter() - start
    try:
        train = importlib.import_module(impl + ".train")
        jax_mod = importlib.import_module(impl + ".train.v2.jax")
        with tempfile.TemporaryDirectory() as scratch:
            trainer = jax_mod.JaxTrainer(
                train_fn, train_loop_config=dict(config, impl=impl, out=scratch,
                                                 root=os.getpid()),
                jax_config=jax_mod.JaxConfig(use_gpu=True),
                scaling_config=train.ScalingConfig(num_workers=config["workers"]),
                run_config=train.RunConfig(storage_path=scratch, name="spmd",
                                           worker_runtime_env={"env_vars": {
                                               "JAX_PLATFORMS": "cpu"}}))
            called = time.time()
            trainer.fit()
            fit_wall = time.time() - called
            ranks = [fb.read_json(os.path.join(scratch, f"rank{r}.json"))
                     for r in range(config["workers"])]
    finally:
        importlib.import_module(impl).shutdown()
    return {"ranks": ranks, "fit_called": called, "fit_wall": fit_wall, "init_s": init_s}


def child_tpu(config: dict, result: str) -> None:
    """The slices' cluster and the fits; the results so far are written after each."""
    import reference
    import reference.train as train
    import simcluster
    from reference.train.v2.jax import JaxConfig, JaxTrainer

    nodes = [spec for i in range(config["hosts"] // 4)
             for spec in simcluster.tpu_slice(f"slice-{i}", "TPU-V4", "2x2x4", cpus=1)]
    out: dict = {"fits": []}
    start = time.perf_counter()
    with simcluster.Cluster(nodes=nodes, preload=reference.PRELOAD) as cluster:
        out["start_s"] = time.perf_counter() - start
        fb.write_json(result, out)
        reference.init(address=cluster.address)
        try:
            with tempfile.TemporaryDirectory() as storage:
                for w in [w for w in (4, 16, 64) if w <= config["hosts"]]:
                    trainer = JaxTrainer(
                        tpu_noop, jax_config=JaxConfig(),
                        scaling_config=train.ScalingConfig(
                            num_workers=w, use_tpu=True, topology="2x2x4",
                            accelerator_type="TPU-V4"),
                        run_config=train.RunConfig(storage_path=storage, name=f"tpu-{w}"))
                    called = time.perf_counter()
                    trainer.fit()
                    out["fits"].append({"workers": w, "wall": time.perf_counter() - called})
                    fb.write_json(result, out)
        finally:
            reference.shutdown()


# ------------------------------------------------------------------ driver
def launch(side: str, config: dict, timeout: float) -> tuple[int | None, str, dict]:
    """`--child side` in a fresh process: (exit status or None on timeout, its output's
    tail, the result it wrote, or {} if none)."""
    with tempfile.TemporaryDirectory() as scratch:
        result = os.path.join(scratch, "result.json")
        rc, _, text = fb.run_command([sys.executable, __file__, "--child", side, "--config",
                                      json.dumps(dict(config, timeout=timeout)),
                                      "--result", result], timeout)
        try:
            return rc, text, fb.read_json(result)
        except (OSError, ValueError):
            return rc, text, {}


def measure(side: str, config: dict, timeout: float) -> dict:
    rc, text, out = launch(side, config, timeout)
    if rc != 0 or not out:
        raise fb.LaunchError(f"{'timed out' if rc is None else f'exit status {rc}'}\n"
                             f"{text[-3000:]}")
    ranks, t0 = out["ranks"], out["fit_called"]
    if {r["world"] for r in ranks} != {config["workers"]}:
        raise fb.LaunchError(f"not one {config['workers']}-process program: {ranks}")
    return {"rate": min(r["rate"] for r in ranks),
            "cpu_ms": 1e3 * max(r["cpu_per_step"] for r in ranks),
            # CPU the rest of the launch's processes used while rank 0 timed its steps
            "other": (ranks[0]["tree_cpu"] - sum(r["cpu"] for r in ranks)) / ranks[0]["elapsed"],
            "fit_wall": out["fit_wall"], "init_s": out.get("init_s"),
            "to_proc": max(0.0, max(r["proc_start"] for r in ranks) - t0),  # 10 ms ticks
            "to_fn": max(r["fn_start"] for r in ranks) - t0,
            "startup": max(r["first_step"] for r in ranks) - t0,
            "first": max(r["first_step"] - r["fn_start"] for r in ranks),
            "loss": ranks[0]["loss"], "omp": ranks[0]["omp"]}


def cell(value, spec: str = ".2f", width: int = 10) -> str:
    return (format(value, spec) if value is not None else "n/a").rjust(width)


def spmd_section(args, errors: list[str]) -> None:
    sides = list(args.sides)
    if "ray" in sides and (why := fb.ray_importable()) is not None:
        sides.remove("ray")
        print(f"note: Ray skipped: {why}")
    config = {"workers": 2, "steps": args.steps, "warmup": args.warmup, "batch": args.batch}
    runs: dict[str, list[dict]] = {s: [] for s in sides}
    for round_ in range(args.rounds):
        for side in fb.alternate(sides, round_):
            print(f"[{round_ + 1}/{args.rounds}] {side} ...", file=sys.stderr, flush=True)
            run = fb.attempt(errors, side, lambda s=side: measure(s, config, args.timeout))
            if run is not None:
                runs[side].append(run)
                print(f"  {run['rate']:.1f} steps/s, loss {run['loss'][0]:.4f} -> "
                      f"{run['loss'][1]:.4f}", file=sys.stderr, flush=True)

    def med(side: str, key: str, pick=statistics.median):
        values = [r[key] for r in runs.get(side, []) if r.get(key) is not None]
        return pick(values) if values else None

    limit = med("limit", "rate")
    for side in sides:
        over = (limit - med(side, "rate")) / limit if limit and runs[side] else None
        runs[side] = [dict(r, overhead=over) for r in runs[side]]
    print(f"\n1. SPMD step: 2 processes, MLP {'-'.join(map(str, DIMS))} float32, local batch "
          f"{args.batch}, {args.steps} timed steps after {args.warmup}; median of "
          f"{args.rounds} round(s); load average "
          f"{', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    for columns in (THROUGHPUT, STARTUP):
        print(f"{'side':<11}" + "".join(f"{head:>13}" for head, _, _ in columns))
        for side in sides:
            print(f"{side:<11}" + "".join(cell(med(side, key), spec, 13)
                                          for _, key, spec in columns))
    print("OMP_NUM_THREADS in the workers: " + "; ".join(
        f"{s} {','.join(sorted({str(r['omp']) for r in runs[s]}))}" for s in sides if runs[s]))
    ours, verdict = med("reference", "rate"), "n/a (needs the limit and the reference)"
    if limit and ours is not None:
        over, best = (limit - ours) / limit, 1 - med("reference", "rate", max) / med(
            "limit", "rate", max)
        verdict = (f"{'met' if over <= TARGET else 'NOT met'} ({over:+.1%} median; "
                   f"{best:+.1%} best against best)")
    print(f"reference within {TARGET:.0%} of the limit: {verdict}")


def tpu_section(args, errors: list[str]) -> None:
    if args.tpu_hosts <= 0:
        print("\n2. TPU slice placement: skipped (--tpu-hosts 0)")
        return
    if args.tpu_hosts % 4:
        errors.append(f"--tpu-hosts {args.tpu_hosts}: not a multiple of 4 (hosts per slice)")
        return
    print(f"[tpu] {args.tpu_hosts} hosts ...", file=sys.stderr, flush=True)
    rc, text, out = launch("tpu", {"hosts": args.tpu_hosts}, args.timeout)
    print(f"\n2. TPU slice placement: {args.tpu_hosts} simulated TPU-V4 hosts = "
          f"{args.tpu_hosts // 4} slices of 2x2x4, no-op JaxTrainer fits (in this order)")
    start = out.get("start_s")
    print(f"cluster start: {'n/a' if start is None else f'{start:.2f} s'}")
    print(f"{'workers':>8}{'slices':>8}{'fit wall s':>12}")
    for fit in out.get("fits", []):
        print(f"{fit['workers']:>8}{fit['workers'] // 4:>8}{fit['wall']:>12.2f}")
    if rc is None:
        print(f"skipped the rest: this machine did not finish within --timeout "
              f"{args.timeout:.0f} s")
    elif rc != 0:
        errors.append(f"tpu: exit status {rc}\n{text[-3000:]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=200, help="timed steps")
    parser.add_argument("--warmup", type=int, default=20, help="untimed steps before them")
    parser.add_argument("--batch", type=int, default=512, help="rows per process per step")
    parser.add_argument("--sides", default="limit,reference", help="of " + ",".join(SIDES))
    parser.add_argument("--tpu-hosts", type=int, default=64, help="0: skip the TPU part")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per launch")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--config", help=argparse.SUPPRESS)
    parser.add_argument("--result", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        config = json.loads(args.config)
        if args.child == "tpu":
            return child_tpu(config, args.result)
        out = (child_limit_worker(config) if args.child == "limit-worker" else
               child_limit(config) if args.child == "limit" else
               child_trainer(args.child, config))
        return fb.write_json(args.result, out)
    args.sides = [s for s in SIDES if s in args.sides.split(",")]
    fb.setup_environment()
    errors: list[str] = []
    if args.sides:
        spmd_section(args, errors)
    tpu_section(args, errors)
    for error in errors:
        print("failed: " + error.replace("\n", "\n    "))
    sys.exit(1 if errors else 0)


if __name__ == "__main__":
    main()
