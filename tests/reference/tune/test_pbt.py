"""PopulationBasedTraining decides as Ray 2.60's does.

Both are driven by the same drawn schedules (a population, a few trials running at once,
results with and without checkpoints, completions) through a controller that behaves as
Ray's TuneController; python's `random` and numpy's global generator are seeded the same
for both. Compared after every event: each answer (CONTINUE, PAUSE, STOP, NOOP), every
trial's status, config and experiment tag, and where each trial would restore from (which
trial it cloned, at which point); at the end `debug_string()` (checkpoints, perturbations).

Exact equality of the configs holds wherever explore uses python's `random` (lists,
tuples, functions, nested dicts, perturbation by a factor). A search-space Domain that is
resampled draws a different value on each side (Ray draws from numpy's global generator,
the reference's Domains from a seeded generator of their own), so where resampling is
possible (resample_probability > 0) the values under Domain keys, and those in the tags,
are masked: for them the comparison is structural (same keys, same operations, same
clone), and `test_explore_matches_rays_operation_by_operation` checks the operations.
"""

from __future__ import annotations

import copy
import json
import math
import random
import re

import numpy as np
import pytest
import scheduler_standins as standins
from hypothesis import given, settings
from hypothesis import strategies as st

import reference.tune as tune
from reference.tune.error import TuneError
from reference.tune.schedulers import PopulationBasedTraining, TrialScheduler
from reference.tune.schedulers._pbt import _experiment_tag, _explore
from reference.tune.search import Searcher, SearchGenerator

Trial = standins.Trial


class Controller(standins.Controller):
    """Ray's TuneController as PBT sees it. `_schedule_trial_save` (what Ray's PBT asks of
    it) resolves at once to the checkpoint of the trial's latest report, as a function
    trainable's save does."""

    def __init__(self, scheduler):
        super().__init__(scheduler)
        self.reported: dict = {}  # id(trial) -> the checkpoint of its latest report

    def _schedule_trial_save(self, trial, result=None):
        from ray.train._internal.session import _FutureTrainingResult, _TrainingResult

        class Resolved(_FutureTrainingResult):
            def __init__(self, value):
                self.value = value

            def resolve(self, block=True):
                return self.value

        return Resolved(_TrainingResult(self.reported.get(id(trial)), result or {}))


def draw_dropout():
    return random.uniform(0, 0.5)


def draw_flag():
    return random.random() < 0.5


def draw_eps():
    return random.choice([1e-8, 1e-7, 1e-6])


def mutations(lib, keys) -> dict:
    """The mutation menu, built from `lib` (reference.tune or ray.tune)."""
    menu = {
        "lr": lib.uniform(1e-4, 1e-1), "bs": lib.randint(16, 256),
        "width": lib.choice([1, 2, 4, 8]), "mom": [0.8, 0.9, 0.95, 0.99],
        "act": ("relu", "tanh", "gelu"), "drop": draw_dropout, "flag": draw_flag,
        "opt": {"beta": [0.9, 0.99, 0.999], "eps": draw_eps},
    }
    return {k: menu[k] for k in keys}


DOMAIN_KEYS = {"lr", "bs", "width"}


class RefSide:
    scheduler = PopulationBasedTraining
    lib = tune

    @staticmethod
    def trial(i, config):
        return Trial(f"t{i}", config, experiment_tag=str(i))

    @staticmethod
    def report(trial, checkpoint, result):
        # the reference's controller registers a reported checkpoint before the scheduler
        # sees the result; the trial's own latest then wins over an earlier clone
        if checkpoint is not None:
            trial.checkpoint, trial.restore_from = checkpoint, None

    @staticmethod
    def keep_result(trial, result):
        trial.last_result = result

    @staticmethod
    def restore_point(trial):
        return trial.restore_from if trial.restore_from is not None else trial.checkpoint


class RaySide:
    @property
    def scheduler(self):
        from ray.tune.schedulers import PopulationBasedTraining as RayPBT

        return RayPBT

    @property
    def lib(self):
        import ray.tune

        return ray.tune

    @staticmethod
    def trial(i, config):
        from ray.tune.experiment import Trial as RayTrial

        return RayTrial("__fake", config=config, experiment_tag=str(i), stub=True)

    @staticmethod
    def report(trial, checkpoint, result):
        from ray.train._internal.session import _TrainingResult

        if checkpoint is not None:
            trial.run_metadata.checkpoint_manager._latest_checkpoint_result = \
                _TrainingResult(checkpoint, result)

    @staticmethod
    def keep_result(trial, result):
        trial.run_metadata.last_result = dict(result)

    @staticmethod
    def restore_point(trial):
        return trial.checkpoint


def masked(value, masks: set):
    if isinstance(value, dict):
        return {k: "~" if k in masks else masked(v, masks) for k, v in value.items()}
    return value


def masked_tag(tag: str, masks: set) -> str:
    for key in masks:
        tag = re.sub(rf"(?<=[\[,]){key}=[^,\]]*", f"{key}=~", tag)
    return tag


def drive(side, kwargs: dict, keys, configs, events, slots: int, seed: int) -> list:
    """Play the events through a Ray-like controller; log what the scheduler decided.

    A result event: ("result", pick, step, value, with_checkpoint, with_metric). A trial
    started again resumes from its restore point (a checkpoint names its owner and the
    time and iteration it was taken at), else goes on from where it was."""
    random.seed(seed)
    np.random.seed(seed)
    masks = DOMAIN_KEYS if kwargs["resample_probability"] > 0 else set()
    scheduler = side.scheduler(hyperparam_mutations=mutations(side.lib, keys), **kwargs)
    controller = Controller(scheduler)
    clock: dict = {}
    log: list = []

    def snapshot():
        return tuple((t.status, repr(masked(t.config, masks)),
                      masked_tag(t.experiment_tag, masks), side.restore_point(t))
                     for t in controller.trials)

    try:
        for i, config in enumerate(configs):
            trial = side.trial(i, copy.deepcopy(config))
            controller.trials.append(trial)
            clock[i] = (0, 0)
            scheduler.on_trial_add(controller, trial)
        log.append(snapshot())
        for event in events:
            while sum(t.status == "RUNNING" for t in controller.trials) < slots:
                chosen = scheduler.choose_trial_to_run(controller)
                if chosen is None:
                    break
                index = controller.trials.index(chosen)
                point = side.restore_point(chosen)
                if point is not None:
                    clock[index] = point[2:]
                log.append(("run", index, chosen.status, point))
                chosen.status = "RUNNING"
            running = [t for t in controller.trials if t.status == "RUNNING"]
            if not running:
                break
            trial = running[event[1] % len(running)]
            index = controller.trials.index(trial)
            if event[0] == "complete":
                controller.stop_trial(trial)
                log.append((index, "complete"))
            else:
                _, _, step, value, with_checkpoint, with_metric = event
                now, iteration = clock[index][0] + step, clock[index][1] + 1
                clock[index] = (now, iteration)
                checkpoint = ("ckpt", index, now, iteration) if with_checkpoint else None
                result = {"time_total_s": now, "training_iteration": iteration,
                          "checkpoint_dir_name":
                              f"checkpoint_{iteration:06d}" if with_checkpoint else None}
                if with_metric:
                    result["score"] = value
                side.report(trial, checkpoint, result)
                controller.reported[id(trial)] = checkpoint
                action = scheduler.on_trial_result(controller, trial, result)
                side.keep_result(trial, result)
                log.append((index, now, action))
                if action == "PAUSE":
                    controller.pause_trial(trial)
                elif action == "STOP":
                    controller.stop_trial(trial)
            log.append(snapshot())
    except Exception as e:  # Ray's errors: the same on both sides
        log.append(("raised", type(e).__name__))
    log.append(("pauses", tuple(controller.pauses)))
    log.append(scheduler.debug_string())
    return log


def compare(kwargs, keys, configs, events, slots, seed) -> list:
    pytest.importorskip("ray.tune.schedulers")
    ours = drive(RefSide, kwargs, keys, configs, events, slots, seed)
    theirs = drive(RaySide(), kwargs, keys, configs, events, slots, seed)
    assert ours == theirs, (kwargs, keys, slots, seed)
    return ours


def initial_config(rng: random.Random, keys) -> dict:
    config = {}
    if "lr" in keys:
        config["lr"] = rng.choice([0.01, 0.05, 0.003])
    if "bs" in keys:
        config["bs"] = rng.choice([32, 64, 100])
    if "width" in keys:
        config["width"] = rng.choice([1, 2, 4, 8])
    if "mom" in keys:
        config["mom"] = rng.choice([0.8, 0.9, 0.95, 0.99, 0.5])  # 0.5: not in the list
    if "act" in keys and rng.random() < 0.7:  # else filled in by on_trial_add
        config["act"] = rng.choice(["relu", "tanh", "gelu"])
    if "drop" in keys and rng.random() < 0.7:
        config["drop"] = rng.choice([0.1, 0.2])
    if "flag" in keys:
        config["flag"] = rng.random() < 0.5
    if "opt" in keys:
        config["opt"] = {"beta": rng.choice([0.9, 0.99, 0.5]), "eps": 1e-8}
    config["other"] = rng.randrange(3)
    return config


def add_one(config: dict) -> dict:
    return {**config, "other": config.get("other", 0) + 1}


MENU = ["lr", "bs", "width", "mom", "act", "drop", "flag", "opt"]


def setting(rng: random.Random):
    keys = sorted(rng.sample(MENU, rng.randint(1, len(MENU))))
    kwargs = dict(time_attr=rng.choice(["time_total_s", "training_iteration"]),
                  metric="score", mode=rng.choice(["min", "max"]),
                  perturbation_interval=rng.choice([1, 2, 3]),
                  burn_in_period=rng.choice([0, 0, 2]),
                  quantile_fraction=rng.choice([0.25, 0.5, 0.34, 0.0]),
                  resample_probability=rng.choice([0.0, 0.25, 1.0]),
                  perturbation_factors=rng.choice([(1.2, 0.8), (2, 0.5, 1)]),
                  custom_explore_fn=rng.choice([None, add_one]), log_config=False,
                  require_attrs=rng.random() < 0.9, synch=rng.random() < 0.4)
    configs = [initial_config(rng, keys) for _ in range(rng.randint(2, 8))]
    return kwargs, keys, configs


def seeded_events(rng: random.Random) -> list:
    values = [0.0, 1.0, math.nan, rng.uniform(-3, 3), rng.uniform(-3, 3), rng.uniform(-3, 3)]
    events = []
    for _ in range(rng.randint(20, 120)):
        if rng.random() < 0.03:
            events.append(("complete", rng.randrange(8)))
        else:
            events.append(("result", rng.randrange(8), rng.choice([0.5, 1, 1, 2]),
                           rng.choice(values), rng.random() < 0.7, rng.random() < 0.99))
    return events


@settings(max_examples=200, deadline=None)
@given(st.randoms(use_true_random=False), st.integers(1, 4), st.integers(0, 2**31))
def test_decisions_equal_rays(rng, slots, seed):
    kwargs, keys, configs = setting(rng)
    compare(kwargs, keys, configs, seeded_events(rng), slots, seed)


def test_seeded_streams_equal_rays_and_cover_exploits():
    """200 fixed streams (the same on every run): equal to Ray's, and between them they
    pause, stop and exploit (clone) many times, in async and synch mode."""
    counts = dict(streams=0, exact_streams=0, decisions=0, pauses=0, noops=0, stops=0,
                  exploits=0, synch_exploits=0)
    for seed in range(200):
        rng = random.Random(seed)
        kwargs, keys, configs = setting(rng)
        log = compare(kwargs, keys, configs, seeded_events(rng), rng.randint(1, 4), seed)
        actions = [e[2] for e in log if isinstance(e, tuple) and len(e) == 3 and
                   e[2] in ("CONTINUE", "PAUSE", "STOP", "NOOP")]
        perturbs = int(re.search(r"(\d+) perturbs", log[-1]).group(1))
        counts["streams"] += 1
        counts["exact_streams"] += kwargs["resample_probability"] == 0 or \
            not DOMAIN_KEYS & set(keys)
        counts["decisions"] += len(actions)
        counts["pauses"] += actions.count("PAUSE")
        counts["noops"] += actions.count("NOOP")
        counts["stops"] += actions.count("STOP")
        counts["exploits"] += perturbs
        counts["synch_exploits"] += perturbs if kwargs["synch"] else 0
    print(counts)
    assert counts["noops"] > 100 and counts["synch_exploits"] > 50, counts


# -- explore, tags, errors: against Ray's own functions ----------------------------------

def test_explore_matches_rays_operation_by_operation():
    ray_tune = pytest.importorskip("ray.tune")
    from ray.tune.schedulers import pbt as ray_pbt

    for seed in range(300):
        rng = random.Random(seed)
        keys = sorted(rng.sample(MENU, rng.randint(1, len(MENU))))
        config = initial_config(rng, keys)
        for key in ("act", "drop"):
            config.setdefault(key, {"act": "tanh", "drop": 0.3}[key])
        p, factors = rng.choice([0.0, 0.25, 1.0]), rng.choice([(1.2, 0.8), (2, 0.5, 1)])
        random.seed(seed)
        ours, our_ops = _explore(config, mutations(tune, keys), p, factors)
        random.seed(seed)
        theirs, their_ops = ray_pbt._explore(config, mutations(ray_tune, keys), p, factors,
                                             None)
        assert our_ops == their_ops, seed
        assert masked(ours, DOMAIN_KEYS) == masked(theirs, DOMAIN_KEYS), seed
        for key in DOMAIN_KEYS & set(keys):
            if our_ops[key] == "resample":
                assert mutations(tune, [key])[key].is_valid(ours[key]), (seed, key, ours)
            else:
                assert ours[key] == theirs[key], (seed, key)
            assert type(ours[key]) is type(config[key]), (seed, key)


def test_experiment_tags_are_rays():
    _make_experiment_tag = pytest.importorskip("ray.tune.schedulers.pbt")._make_experiment_tag

    space = {"lr": tune.uniform(0, 1), "act": ["a b", "c/d"], "opt": {"x": [1]}, "n": [1]}
    for config in ({"lr": 0.123456, "act": "a b", "opt": {"x": 1}, "n": 3},
                   {"lr": 1, "act": "c/d", "opt": {"x": 2.5}, "n": -1}):
        assert _experiment_tag("3_lr=0.1", config, space) == \
            _make_experiment_tag("3_lr=0.1", config, space)


BAD = [dict(), dict(hyperparam_mutations={"a": 3}),
       dict(hyperparam_mutations={"a": "abc"}),
       dict(hyperparam_mutations={"a": [1]}, quantile_fraction=0.6),
       dict(hyperparam_mutations={"a": [1]}, quantile_fraction=-0.1),
       dict(hyperparam_mutations={"a": [1]}, perturbation_interval=0),
       dict(hyperparam_mutations={"a": [1]}, mode="maximum")]


@pytest.mark.parametrize("kwargs", BAD, ids=lambda k: ",".join(f"{a}" for a in k) or "none")
def test_bad_arguments_fail_as_rays_do(kwargs):
    RayPBT = pytest.importorskip("ray.tune.schedulers").PopulationBasedTraining

    with pytest.raises(Exception) as theirs:
        RayPBT(**kwargs)
    with pytest.raises(Exception) as ours:
        PopulationBasedTraining(**kwargs)
    assert type(ours.value).__name__ == type(theirs.value).__name__
    assert str(ours.value).startswith(str(theirs.value).rstrip(".")), (ours.value, theirs.value)


def test_a_search_algorithm_is_refused_as_ray_refuses_it():
    class Fixed(Searcher):
        def suggest(self, trial_id):
            return {"lr": 0.1}

    controller = Controller(None)
    controller.search_alg = SearchGenerator(Fixed(metric="score", mode="max"))
    pbt = PopulationBasedTraining(metric="score", mode="max", hyperparam_mutations={"x": [1]})
    with pytest.raises(ValueError, match="Search algorithms cannot be used with "
                                         "PopulationBasedTraining schedulers"):
        pbt.on_trial_add(controller, Trial("t0"))


def test_sample_from_cannot_be_mutated():
    with pytest.raises(ValueError, match=r"sample_from.*\(hyperparam_mutations\['a'\]\)"):
        PopulationBasedTraining(hyperparam_mutations={"a": tune.sample_from(lambda c: 1)})
    with pytest.raises(TuneError, match="at least one of `hyperparam_mutations`"):
        PopulationBasedTraining()


# -- exploit, as the controller sees it ---------------------------------------------------

def population(scheduler, n: int = 4):
    controller = Controller(scheduler)
    for i in range(n):
        trial = Trial(f"t{i}", {"lr": 0.1, "act": "tanh"})
        controller.trials.append(trial)
        scheduler.on_trial_add(controller, trial)
        trial.status = "RUNNING"
    return controller


def report(scheduler, controller, trial, t: float, score: float, checkpoint=None):
    trial.checkpoint = checkpoint or trial.checkpoint
    result = {"time_total_s": t, "score": score,
              "checkpoint_dir_name": "checkpoint_000001" if checkpoint else None}
    answer = scheduler.on_trial_result(controller, trial, result)
    trial.last_result = result
    return answer


def test_a_bottom_trial_clones_a_top_trials_checkpoint_and_explored_config():
    pbt = PopulationBasedTraining(metric="score", mode="max", perturbation_interval=1,
                                  hyperparam_mutations={"lr": [0.1, 0.2, 0.4],
                                                        "act": ["relu", "tanh"]})
    controller = population(pbt)
    best, second, third, worst = controller.trials
    # a top trial offers the checkpoint of the result at which it was last split off at
    # the top: the best reports last of the three, so that it is (second was, before it)
    for trial, score in ((third, 4), (second, 5), (best, 10)):
        assert report(pbt, controller, trial, 1, score, checkpoint=f"ck-{trial.trial_id}") \
            == TrialScheduler.CONTINUE
    random.seed(0)
    assert report(pbt, controller, worst, 1, 0) == TrialScheduler.NOOP
    assert controller.pauses == [(3, False)] and worst.status == "PAUSED"
    assert worst.restore_from == "ck-t0"
    assert worst.config["lr"] in (0.1, 0.2) and worst.config["act"] in ("relu", "tanh")
    assert worst.experiment_tag.startswith("@perturbed[act=") and "lr=0." in \
        worst.experiment_tag
    assert pbt.debug_string() == "PopulationBasedTraining: 2 checkpoints, 1 perturbs"
    assert best.config == {"lr": 0.1, "act": "tanh"}  # the clone is left as it was


def test_no_exploit_when_the_clone_offers_no_checkpoint():
    pbt = PopulationBasedTraining(metric="score", mode="min", perturbation_interval=1,
                                  hyperparam_mutations={"lr": [0.1, 0.2]})
    controller = population(pbt, n=2)
    good, bad = controller.trials
    good.checkpoint = "an older one"  # its latest report (this one) carries none
    assert report(pbt, controller, good, 1, 0.0) == "CONTINUE"
    assert report(pbt, controller, bad, 1, 9.0) == "CONTINUE"
    assert bad.restore_from is None and controller.pauses == []
    assert bad.config == {"lr": 0.1, "act": "tanh"}


def test_a_waiting_trial_makes_the_perturbed_trial_pause_and_is_chosen_least_trained():
    pbt = PopulationBasedTraining(metric="score", mode="max", perturbation_interval=2,
                                  hyperparam_mutations={"lr": [0.1]})
    controller = population(pbt, n=3)
    a, b, c = controller.trials
    c.status = "PENDING"
    assert report(pbt, controller, a, 1, 1.0) == "CONTINUE"  # before its interval
    assert report(pbt, controller, a, 2, 1.0) == "PAUSE"     # c waits
    a.status = "PAUSED"
    assert pbt.choose_trial_to_run(controller) is c
    assert report(pbt, controller, b, 4, 1.0) == "PAUSE"
    b.status, c.status = "PAUSED", "TERMINATED"
    assert pbt.choose_trial_to_run(controller) is a  # trained to 2, b to 4


def test_missing_attributes_raise_unless_not_required():
    pbt = PopulationBasedTraining(metric="score", mode="max", hyperparam_mutations={"x": [1]})
    controller = population(pbt, n=1)
    with pytest.raises(RuntimeError, match="Cannot find metric score in trial result"):
        pbt.on_trial_result(controller, controller.trials[0], {"time_total_s": 1})
    lax = PopulationBasedTraining(metric="score", mode="max", hyperparam_mutations={"x": [1]},
                                  require_attrs=False)
    controller = population(lax, n=1)
    assert lax.on_trial_result(controller, controller.trials[0], {"score": 1}) == "CONTINUE"


def test_missing_mutated_keys_are_filled_in_on_add_and_domains_repeat_with_the_seeds():
    def run():
        random.seed(1)
        np.random.seed(1)
        pbt = PopulationBasedTraining(metric="score", mode="max", hyperparam_mutations={
            "lr": tune.loguniform(1e-4, 1e-1), "act": ["relu", "tanh"],
            "opt": {"beta": [0.9, 0.99]}})
        return population(pbt, n=3).trials

    first, again = run(), run()
    assert [t.config for t in first] == [t.config for t in again]
    for trial in first:
        assert 1e-4 <= trial.config["lr"] <= 1e-1 and trial.config["act"] == "tanh"
        assert trial.config["opt"]["beta"] in (0.9, 0.99)


def test_log_config_writes_rays_policy_files(tmp_path):
    pbt = PopulationBasedTraining(metric="score", mode="max", perturbation_interval=1,
                                  hyperparam_mutations={"lr": [0.1, 0.2]})
    controller = population(pbt, n=2)
    for trial in controller.trials:
        trial.experiment_path = str(tmp_path)
    top, bottom = controller.trials
    report(pbt, controller, bottom, 1, 0.0)
    report(pbt, controller, top, 1, 1.0, checkpoint="ck")
    random.seed(3)
    assert report(pbt, controller, bottom, 2, 0.0) == "NOOP"
    # [tag, clone's tag, iteration, clone's iteration, clone's config, new config]
    expected = json.dumps(["", "", 0, 0, {"lr": 0.1, "act": "tanh"}, bottom.config]) + "\n"
    assert (tmp_path / "pbt_global.txt").read_text() == expected
    assert (tmp_path / "pbt_policy_t1.txt").read_text() == expected
