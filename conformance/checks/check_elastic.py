"""Elastic training, num_workers=(min, max), on a cluster that grows (`elastic.*`)."""

from __future__ import annotations

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
