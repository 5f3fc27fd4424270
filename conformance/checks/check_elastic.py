"""Elastic training, num_workers=(min, max), on a cluster that grows (`elastic.*`)."""

from __future__ import annotations

import time

import pytest

from conformance import assertions, journal_checks
from conformance.adapters.base import NodeSpec, require
from conformance.catalogue import clause
from conformance.scenarios import new_script, run, verify_history, wait_for, workspace


def _grow(impl, num_workers, target, observe_s: float):
    require(impl, "elastic")
    with impl.cluster([NodeSpec(cpus=2)]) as cluster:
        folder = workspace()
        script = new_script(impl, folder, steps=600, step_sleep_s=0.25,
                            stop_at_world_size=target)
        handle, r = run(impl, script, num_workers=num_workers, folder=folder,
                        elastic_interval_s=impl.elastic_interval_s, deadline_s=3 * impl.fit_deadline_s,
                        failure_config=impl.train.FailureConfig(max_failures=0),
                        background=True)
        # until a group starts (or, when none should, for a few monitor intervals)
        started = wait_for(lambda: r.events("start"), timeout_s=observe_s)
        before = [s["world_size"] for s in r.events("start")]
        cluster.add_node(NodeSpec(cpus=2))
        r.outcome = handle.wait()
    verify_history(impl, r)
    setting = f"{r.setting}, 1 node x 2 CPUs, then a second added"
    return r, bool(started), before, setting


@pytest.mark.cluster
@clause("elastic.start-what-fits", "elastic.grow")
def check_elastic_grows_onto_new_node(impl):
    r, started, before, setting = _grow(impl, (1, 4), 4, impl.fit_deadline_s / 2)
    assertions.succeeded(r.outcome, setting + " (max_failures=0: a resize is not a failure)")
    assertions.equal(started, True, "a worker group started before the node was added", setting)
    assertions.equal(sorted(set(before)), [2], "world size before the node was added", setting)
    events = r.events()
    sizes = [starts[0]["world_size"] for starts in journal_checks.attempts(events).values()]
    assertions.equal(sizes[-1], 4, "world size of the last attempt", setting)
    assertions.verdict(journal_checks.world_size_within(events, 1, 4), setting)
    assertions.verdict(journal_checks.ranks_complete(events), setting)
    # the resize stops the group at a poll of the controller's choosing: each rank's newest
    # returned report may still wait in its queue (clause elastic.grow)
    assertions.verdict(journal_checks.restores_latest(events, in_flight=1), setting)


@pytest.mark.cluster
@clause("elastic.wait-below-min")
def check_elastic_waits_below_min(impl):
    r, started, before, setting = _grow(impl, (3, 4), 3, 4 * impl.elastic_interval_s)
    assertions.succeeded(r.outcome, setting)
    assertions.equal(before, [], "world sizes started while only 2 CPUs existed (min is 3)",
                     setting)
    sizes = [s["world_size"] for s in r.events("start")]
    assertions.equal(bool(sizes) and min(sizes) >= 3, True,
                     f"every started world size >= 3 (seen {sizes})", setting)


@pytest.mark.cluster
@clause("elastic.steady")
def check_elastic_group_is_left_alone_while_nothing_changes(impl):
    require(impl, "elastic")
    interval = impl.elastic_interval_s
    step_s = 0.25
    steps = int(5 * interval / step_s) + 1  # the run outlasts five monitor intervals
    with impl.cluster([NodeSpec(cpus=2)]):
        folder = workspace()
        script = new_script(impl, folder, steps=steps, step_sleep_s=step_s)
        r = run(impl, script, num_workers=(1, 4), folder=folder, elastic_interval_s=interval,
                deadline_s=3 * impl.fit_deadline_s,
                failure_config=impl.train.FailureConfig(max_failures=0))
    setting = (f"{r.setting}, 1 node x 2 CPUs throughout, {steps} steps of {step_s} s, "
               f"elastic_resize_monitor_interval_s={interval}")
    result = assertions.succeeded(r.outcome, setting)
    sizes = [s["world_size"] for s in r.events("start")]
    assertions.equal(sizes, [2, 2], "world sizes of every rank's start (one attempt)", setting)
    assertions.equal(len(journal_checks.attempts(r.events())), 1, "attempts", setting)
    assertions.equal(result.metrics["step"], steps - 1, "result.metrics['step']", setting)


@pytest.mark.cluster
@clause("elastic.start-what-fits")
def check_elastic_starts_when_exactly_min_fits(impl):
    require(impl, "elastic")
    with impl.cluster([NodeSpec(cpus=2)]):
        folder = workspace()
        script = new_script(impl, folder, steps=2)
        r = run(impl, script, num_workers=(2, 4), folder=folder,
                elastic_interval_s=impl.elastic_interval_s,
                failure_config=impl.train.FailureConfig(max_failures=0))
    setting = f"{r.setting}, 1 node x 2 CPUs: exactly min_workers=2 fit"
    assertions.succeeded(r.outcome, setting)
    assertions.equal([s["world_size"] for s in r.events("start")], [2, 2],
                     "world sizes of every rank's start", setting)


def _gated_fit(impl, *, interval: float, steps: int, step_s: float = 0.25):
    """An elastic fit, num_workers=(1, 4), whose first group's Backend.on_start waits for a
    file (conformance/custom_backend.py); (handle, run, path of that file, backend journal)."""
    import os

    from conformance.checks.check_backend import custom_backend
    from conformance.probe import Journal, run_script
    from conformance.scenarios import Run, TrainerFactory

    module = custom_backend(impl)
    t = impl.train
    folder = workspace()
    script = new_script(impl, folder, steps=steps, step_sleep_s=step_s, stop_at_world_size=4)
    hooks = os.path.join(folder, "hooks")
    os.makedirs(hooks)
    gate = os.path.join(folder, "go")
    name = "elastic-gated"
    factory = TrainerFactory(impl.DataParallelTrainer, dict(
        train_loop_per_worker=run_script, train_loop_config={"script": script},
        backend_config=module.CustomConfig(journal=hooks, wait_for=gate),
        scaling_config=t.ScalingConfig(num_workers=(1, 4),
                                       elastic_resize_monitor_interval_s=interval),
        run_config=t.RunConfig(name=name, storage_path=os.path.join(folder, "storage"),
                               failure_config=t.FailureConfig(max_failures=0))),
        journal_dir=script.journal_dir)
    handle = impl.start_fit(factory, 3 * impl.fit_deadline_s)
    setting = (f"{impl.name}: DataParallelTrainer(num_workers=(1, 4), "
               f"elastic_resize_monitor_interval_s={interval}), {steps} steps of {step_s} s, "
               "1 node x 2 CPUs")
    return handle, Run(None, Journal(script.journal_dir), os.path.join(folder, "storage"),
                       name, setting), gate, hooks


def _on_start_waits(hooks: str) -> bool:
    import json
    import os

    path = os.path.join(hooks, "hooks.jsonl")
    if not os.path.exists(path):
        return False
    with open(path) as f:
        return any(json.loads(line)["hook"] == "on_start_waits" for line in f if line.strip())


@pytest.mark.cluster
@clause("elastic.monitor-interval")
def check_elastic_capacity_during_start_waits_for_the_interval(impl):
    require(impl, "elastic")
    # an interval far longer than the run: the group must finish at the size it started with
    interval = 30 * impl.elastic_interval_s
    with impl.cluster([NodeSpec(cpus=2)]) as cluster:
        handle, r, gate, hooks = _gated_fit(impl, interval=interval, steps=4)
        waiting = wait_for(lambda: _on_start_waits(hooks), timeout_s=impl.fit_deadline_s)
        cluster.add_node(NodeSpec(cpus=2))
        open(gate, "w").close()
        r.outcome = handle.wait()
    verify_history(impl, r)
    setting = (f"{r.setting}, a second node added while the first group's Backend.on_start "
               "ran (after the group's size was chosen)")
    assertions.equal(waiting, True, "the first group's on_start began", setting)
    result = assertions.succeeded(r.outcome, setting)
    sizes = [s["world_size"] for s in r.events("start")]
    assertions.equal(sizes, [2, 2], "world sizes of every rank's start (one attempt: no "
                     "resize before the interval passed)", setting)
    assertions.equal(result.metrics["step"], 3, "result.metrics['step']", setting)


@pytest.mark.cluster
@clause("elastic.monitor-interval", "elastic.grow")
def check_elastic_grows_at_a_later_interval(impl):
    require(impl, "elastic")
    interval = 3 * impl.elastic_interval_s
    step_s = 0.25
    steps = int(8 * interval / step_s)  # long enough to grow; bounded when it never does
    with impl.cluster([NodeSpec(cpus=2)]) as cluster:
        handle, r, gate, hooks = _gated_fit(impl, interval=interval, steps=steps,
                                            step_s=step_s)
        open(gate, "w").close()
        started = wait_for(lambda: r.events("start"), timeout_s=impl.fit_deadline_s)
        # past the first resize consideration (one interval after the group started),
        # which found nothing to grow onto
        time.sleep(2.5 * interval)
        cluster.add_node(NodeSpec(cpus=2))
        r.outcome = handle.wait()
    verify_history(impl, r)
    setting = (f"{r.setting}, a second node added {2.5 * interval} s after the first group "
               "started")
    assertions.equal(bool(started), True, "a worker group started", setting)
    assertions.succeeded(r.outcome, setting)
    events = r.events()
    sizes = [starts[0]["world_size"] for starts in journal_checks.attempts(events).values()]
    assertions.equal((sizes[0], sizes[-1]), (2, 4),
                     "world sizes of the first and the last attempt", setting)
    assertions.verdict(journal_checks.ranks_complete(events), setting)
