"""PopulationBasedTraining, as Ray's: every `perturbation_interval` (time_attr units, after
`burn_in_period`) a trial in the bottom `quantile_fraction` of the population (by its latest
score) clones a trial of the top fraction: its checkpoint and an explored copy of its config.

Async (`synch=False`): at a trial's perturbation point its score is recorded and the
population split (trials with a score that is not NaN and that are not finished, sorted;
`ceil(n * q)` at each end, at most `n // 2`, none below two trials). A top trial offers the
checkpoint it reported with this result; a bottom trial picks a top one (`random.choice`)
and, if that one offers a checkpoint, is paused (`controller.pause_trial(trial,
should_checkpoint=False)`), given the new tag and config and `trial.restore_from`, and the
answer is NOOP. Otherwise the answer is PAUSE when some trial is PENDING or PAUSED (to let
it run), else CONTINUE. Synch (`synch=True`): a trial at its perturbation point waits
(PAUSE) until every live trial has passed the next sync time, then all are split at once.

Explore (of the clone's config, per key of `hyperparam_mutations`): a list or tuple is
resampled with `resample_probability` (or when the value is not in it), else shifted to a
neighbouring index; a search-space Domain or a function is resampled with the same
probability, else multiplied by one of `perturbation_factors`; ints are rounded, bools
kept bool; dicts are explored key by key. Draws use python's `random`, as in Ray. A Domain
draws with a seed taken from numpy's global generator (Ray draws from that generator
itself): seeding both makes a run repeatable, though those values differ from Ray's.

Which checkpoint a trial offers: the one reported with its latest result (a result whose
`checkpoint_dir_name` is None reported none, as Ray's function trainables then offer
none); a PAUSED trial offers its latest, the cloned one after an exploit. The controller
registers a result's checkpoint (`trial.checkpoint`) before it calls `on_trial_result`.
"""

from __future__ import annotations

import copy
import json
import logging
import math
import os
import random
import re
import shutil

import numpy as np

from reference.tune.error import TuneError
from reference.tune.schedulers._base import MetricScheduler
from reference.tune.search import SearchGenerator
from reference.tune.search.sample import Domain, Function

logger = logging.getLogger(__name__)

PENDING, RUNNING, PAUSED = "PENDING", "RUNNING", "PAUSED"


def _sample(domain: Domain):
    return domain.sample(random_state=int(np.random.randint(2**31)))


def _explore(config: dict, mutations: dict, resample_probability: float,
             factors: tuple, custom_explore_fn=None) -> tuple[dict, dict]:
    """The explored config and, per key, what was done ("resample", "* 1.2", "shift left")."""
    new, ops = copy.deepcopy(config), {}
    for key, space in mutations.items():
        if isinstance(space, dict):
            new[key], ops[key] = _explore(config[key], space, resample_probability, factors)
        elif isinstance(space, (list, tuple)):
            if random.random() < resample_probability or config[key] not in space:
                new[key], ops[key] = random.choice(space), "resample"
            else:
                shift = random.choice([-1, 1])
                old = space.index(config[key])
                index = min(max(old + shift, 0), len(space) - 1)
                new[key] = space[index]
                ops[key] = f"shift {'left' if shift == -1 else 'right'}" + \
                    (" (noop)" if index == old else "")
        elif isinstance(space, Domain) or callable(space):
            if random.random() < resample_probability:
                new[key] = _sample(space) if isinstance(space, Domain) else space()
                ops[key] = "resample"
            else:
                factor = random.choice(factors)
                new[key], ops[key] = config[key] * factor, f"* {factor}"
            if isinstance(config[key], bool):
                new[key] = bool(new[key])
            elif isinstance(config[key], int):
                new[key] = int(round(new[key]))
        else:
            raise ValueError(f"Unsupported hyperparameter distribution type: {type(space)}")
    if custom_explore_fn:
        new = custom_explore_fn(new)
        if new is None:
            raise AssertionError("Custom explore fn failed to return new config")
    return new, ops


def _fill(config: dict, key: str, space) -> None:
    """Give a trial whose config lacks a mutated key a first value drawn from its space."""
    if isinstance(space, Domain):
        config[key] = _sample(space)
    elif callable(space):
        config[key] = space()
    elif isinstance(space, (list, tuple)):
        config[key] = random.choice(space)
    elif isinstance(space, dict):
        config[key] = {}
        for k, v in space.items():
            _fill(config[key], k, v)


def _clean(value) -> str:
    if isinstance(value, float):
        return f"{value:.4f}"
    return re.sub(r"[^a-zA-Z0-9_-]+", "_", str(value)).strip("_")


def _experiment_tag(orig_tag: str, config: dict, mutations: dict) -> str:
    """`<orig>@perturbed[key=value,...]`, the mutated top-level keys sorted (Ray's format)."""
    pairs = ",".join(f"{_clean(k)}={_clean(config[k])}" for k in sorted(mutations))
    return f"{orig_tag}@perturbed[{pairs}]"


def _json_default(value):
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    return str(value)


class _TrialState:
    def __init__(self, trial):
        self.orig_tag = trial.experiment_tag
        self.last_score: float | None = None
        self.last_result: dict | None = None
        self.last_checkpoint = None   # what it offers as a top trial, set at each split
        self.last_perturbation_time = 0
        self.last_train_time = 0
        self.reported = None          # the checkpoint reported with its latest result
        self.latest = trial.checkpoint  # what it resumes from: its own latest, or a clone's


class PopulationBasedTraining(MetricScheduler):
    def __init__(self, time_attr: str = "time_total_s", metric: str | None = None,
                 mode: str | None = None, perturbation_interval: float = 60.0,
                 burn_in_period: float = 0.0, hyperparam_mutations: dict | None = None,
                 quantile_fraction: float = 0.25, resample_probability: float = 0.25,
                 perturbation_factors: tuple = (1.2, 0.8), custom_explore_fn=None,
                 log_config: bool = True, require_attrs: bool = True, synch: bool = False):
        mutations = hyperparam_mutations or {}
        for key, value in mutations.items():  # Ray's types and messages, then the key
            if not isinstance(value, (dict, list, tuple, Domain)) and not callable(value):
                raise TypeError("`hyperparam_mutation` values must be either a List, Tuple, "
                                "Dict, a tune search space object, or a callable. "
                                f"(hyperparam_mutations[{key!r}]={value!r})")
            if isinstance(value, Function):
                raise ValueError("arbitrary tune.sample_from objects are not supported for "
                                 "`hyperparam_mutation` values.You must use other built in "
                                 "primitives liketune.uniform, tune.loguniform, etc. "
                                 f"(hyperparam_mutations[{key!r}])")
        if not mutations and not custom_explore_fn:
            raise TuneError("You must specify at least one of `hyperparam_mutations` or "
                            "`custom_explore_fn` to use PBT.")
        if not 0 <= quantile_fraction <= 0.5:
            raise ValueError("You must set `quantile_fraction` to a value between 0 and0.5. "
                             f"Current value: '{quantile_fraction}'")
        if perturbation_interval <= 0:
            raise ValueError("perturbation_interval must be a positive number greater than "
                             f"0. Current value: '{perturbation_interval}'")
        if mode and mode not in ("min", "max"):
            raise AssertionError(f"`mode` must be 'min' or 'max'. (PopulationBasedTraining("
                                 f"mode={mode!r}))")
        self._time_attr, self._metric, self._mode = time_attr, metric, mode
        self._interval, self._burn_in = perturbation_interval, burn_in_period
        self._mutations, self._quantile_fraction = mutations, quantile_fraction
        self._resample_probability = resample_probability
        self._factors, self._custom_explore_fn = perturbation_factors, custom_explore_fn
        self._log_config, self._require_attrs, self._synch = log_config, require_attrs, synch
        self._next_sync = max(perturbation_interval, burn_in_period)
        self._state: dict = {}  # trial_id -> _TrialState, in the order added
        self._trials: dict = {}  # trial_id -> trial
        self._num_checkpoints = self._num_perturbations = 0
        self._warned: set = set()

    def on_trial_add(self, tune_controller, trial) -> None:
        search_alg = getattr(tune_controller, "search_alg", None)
        if isinstance(search_alg, SearchGenerator):  # PBT explores configs itself
            raise ValueError(f"Search algorithms cannot be used with {type(self).__name__} "
                             f"schedulers. Please remove {search_alg}.")
        super().on_trial_add(tune_controller, trial)
        self._state[trial.trial_id] = _TrialState(trial)
        self._trials[trial.trial_id] = trial
        for key, space in self._mutations.items():
            if key not in trial.config:
                _fill(trial.config, key, space)

    def _missing(self, what: str, key: str, result: dict) -> None:
        message = (f"Cannot find {what} {key} in trial result {result}. Make sure that this "
                   "attribute is returned in the results of your Trainable.")
        if self._require_attrs:
            raise RuntimeError(message + "If this error is expected, you can change this to a "
                               "warning message by setting PBT(require_attrs=False)")
        if what not in self._warned:  # once, as Ray's log_once
            self._warned.add(what)
            logger.warning(message)

    def on_trial_result(self, tune_controller, trial, result: dict) -> str:
        if self._time_attr not in result:
            self._missing("time_attr", self._time_attr, result)
        if self._metric not in result:
            self._missing("metric", self._metric, result)
        state = self._state[trial.trial_id]
        state.reported = None if result.get("checkpoint_dir_name", "") is None \
            else trial.checkpoint
        if state.reported is not None:
            state.latest = state.reported
        if self._metric not in result or self._time_attr not in result:
            return self.CONTINUE
        time = result[self._time_attr]
        if time < self._burn_in or time - state.last_perturbation_time < self._interval:
            return self.CONTINUE
        state.last_score = self._sign * result[self._metric]
        state.last_train_time, state.last_result = time, result
        if not self._synch:
            state.last_perturbation_time = time
            lower, upper = self._quantiles()
            waiting = any(t.status in (PENDING, PAUSED) for t in tune_controller.get_trials())
            self._checkpoint_or_exploit(tune_controller, trial, upper, lower)
            if trial.status == PAUSED:
                return self.NOOP
            return self.PAUSE if waiting else self.CONTINUE
        if not any(self._state[t.trial_id].last_train_time < self._next_sync
                   and t.trial_id != trial.trial_id for t in tune_controller.get_live_trials()):
            self._perturb_all(tune_controller, time)
        return self.NOOP if trial.status == PAUSED else self.PAUSE

    def _perturb_all(self, tune_controller, time) -> None:
        """Synch mode, once every live trial passed the sync time: top trials first, then
        the middle and the finished ones, then the bottom ones."""
        lower, upper = self._quantiles()
        trials = tune_controller.get_trials()
        split = {t.trial_id for t in lower + upper}
        middle = [t for t in trials if t.trial_id not in split]
        for trial in upper + middle + lower:
            self._state[trial.trial_id].last_perturbation_time = time
            self._checkpoint_or_exploit(tune_controller, trial, upper, lower)
        latest = max(self._state[t.trial_id].last_train_time for t in trials)
        self._next_sync = max(self._next_sync + self._interval, latest)

    def _quantiles(self) -> tuple[list, list]:
        """The bottom and top trials, by their latest score (ties: in the order added)."""
        scored = [self._trials[k] for k, s in self._state.items()
                  if s.last_score is not None and not math.isnan(s.last_score)
                  and not self._trials[k].is_finished()]
        scored.sort(key=lambda t: self._state[t.trial_id].last_score)
        if len(scored) <= 1:
            return [], []
        count = int(math.ceil(len(scored) * self._quantile_fraction))
        if count > len(scored) / 2:
            count = int(math.floor(len(scored) / 2))
        return scored[:count], scored[len(scored) - count:]

    def _checkpoint_or_exploit(self, tune_controller, trial, upper: list, lower: list) -> None:
        state = self._state[trial.trial_id]
        if any(t.trial_id == trial.trial_id for t in upper):
            state.last_checkpoint = state.latest if trial.status == PAUSED else state.reported
            self._num_checkpoints += 1
        else:
            state.last_checkpoint = None
        if not any(t.trial_id == trial.trial_id for t in lower):
            return
        clone = random.choice(upper)
        if not self._state[clone.trial_id].last_checkpoint:
            logger.info("[pbt]: no checkpoint for trial %s. Skip exploit for Trial %s",
                        clone.trial_id, trial.trial_id)
            return
        self._exploit(tune_controller, trial, clone)

    def _exploit(self, tune_controller, trial, clone) -> None:
        state, clone_state = self._state[trial.trial_id], self._state[clone.trial_id]
        new_config, ops = _explore(clone.config, self._mutations, self._resample_probability,
                                   self._factors, self._custom_explore_fn)
        logger.info("[PopulationBasedTraining] [Exploit] Cloning trial %s (score = %f) into "
                    "trial %s (score = %f); explored: %s", clone.trial_id,
                    clone_state.last_score, trial.trial_id, state.last_score, ops)
        if self._log_config:
            self._log_policy(trial, clone, new_config)
        tag = _experiment_tag(state.orig_tag, new_config, self._mutations)
        if trial.status == PAUSED:
            if not self._synch:
                raise TuneError("Trials should be paused here only if in synchronous mode. "
                                "If you encounter this error please raise an issue on Ray "
                                "Github.")
        else:
            tune_controller.pause_trial(trial, should_checkpoint=False)
        trial.set_experiment_tag(tag)
        trial.set_config(new_config)
        trial.restore_from = state.latest = copy.copy(clone_state.last_checkpoint)
        self._num_perturbations += 1
        state.last_perturbation_time = clone_state.last_perturbation_time
        state.last_train_time = clone_state.last_train_time

    def _log_policy(self, trial, clone, new_config: dict) -> None:
        """Ray's policy log, where the trial names its experiment folder
        (`experiment_path`): one JSON line [tag, clone's tag, iteration, clone's iteration,
        clone's config, new config] appended to pbt_global.txt, and the clone's
        pbt_policy_<id>.txt copied to the trial's with the line appended."""
        folder = getattr(trial, "experiment_path", "")
        if not folder:
            return
        policy = [self._state[trial.trial_id].orig_tag, self._state[clone.trial_id].orig_tag,
                  (trial.last_result or {}).get("training_iteration", 0),
                  (clone.last_result or {}).get("training_iteration", 0),
                  clone.config, new_config]
        line = json.dumps(policy, default=_json_default) + "\n"
        with open(os.path.join(folder, "pbt_global.txt"), "a+") as f:
            f.write(line)
        source = os.path.join(folder, f"pbt_policy_{clone.trial_id}.txt")
        target = os.path.join(folder, f"pbt_policy_{trial.trial_id}.txt")
        if os.path.exists(source):
            shutil.copyfile(source, target)
        with open(target, "a+") as f:
            f.write(line)

    def choose_trial_to_run(self, tune_controller):
        """The waiting trial that trained least (synch: only those short of the sync time)."""
        waiting = [t for t in tune_controller.get_trials() if t.status in (PENDING, PAUSED)
                   and (not self._synch
                        or self._state[t.trial_id].last_train_time < self._next_sync)]
        waiting.sort(key=lambda t: self._state[t.trial_id].last_train_time)
        return waiting[0] if waiting else None

    def debug_string(self) -> str:
        return (f"PopulationBasedTraining: {self._num_checkpoints} checkpoints, "
                f"{self._num_perturbations} perturbs")
