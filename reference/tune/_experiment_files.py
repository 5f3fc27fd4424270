"""The Tune controller's experiment folder (`ExperimentFiles`, a part of `TuneController`):
the experiment state and the searcher's state (for `Tuner.restore`), a failed trial's
error files, the retention of its checkpoints; and the experiment tag a trial's folder is
named by (`_tag`, from the searched leaves of the space, `_searched`).
"""

from __future__ import annotations

import json
import os
import pickle
import shutil
import time
from typing import Any

from reference.tune.experiment.trial import Trial
from reference.tune.stopper import flatten

EXPERIMENT_STATE = "experiment_state.json"
SEARCHER_STATE = "searcher_state.pkl"
#: how often the experiment state and a terminal's table are refreshed while trials run
REFRESH_S = 0.5


class ExperimentFiles:
    """The file half of `TuneController` (its state: experiment_path, checkpoint_config,
    search_alg, trials, _saved_at)."""

    def _write_error(self, trial: Trial) -> None:
        os.makedirs(trial.path, exist_ok=True)  # a trial that never started has no folder yet
        with open(os.path.join(trial.path, "error.txt"), "w") as f:
            f.write(trial.error_text or "")
        try:
            with open(os.path.join(trial.path, "error.pkl"), "wb") as f:
                pickle.dump(trial.error, f)
        except Exception:  # noqa: BLE001 - the text is kept either way
            pass

    def _apply_retention(self, trial: Trial) -> None:
        keep = self.checkpoint_config.num_to_keep
        if keep is None or len(trial.checkpoints) <= keep:
            return
        latest = trial.checkpoints[-1]
        attr = self.checkpoint_config.checkpoint_score_attribute
        ranked = list(trial.checkpoints)
        if attr is not None:
            sign = 1 if self.checkpoint_config.checkpoint_score_order == "max" else -1
            ranked.sort(key=lambda pair: sign * flatten(pair[1]).get(attr, float("-inf")))
        while len(ranked) > keep:
            worst = next(pair for pair in ranked if pair is not latest)
            ranked.remove(worst)
            trial.checkpoints.remove(worst)
            shutil.rmtree(worst[0].path, ignore_errors=True)

    def _save(self, throttle: bool = False) -> None:
        now = time.monotonic()
        if throttle and now - self._saved_at < REFRESH_S:
            return
        self._saved_at = now
        state = {"experiment_id": self.experiment_id, "timestamp": time.time(),
                 "trials": [t.state() for t in self.trials]}
        path = os.path.join(self.experiment_path, EXPERIMENT_STATE)
        staging = path + ".tmp"
        with open(staging, "w") as f:
            json.dump(state, f, default=repr)
        os.replace(staging, path)
        try:
            search_state = self.search_alg.get_state()
        except Exception:  # noqa: BLE001 - a searcher without state restarts its search
            return
        staging = os.path.join(self.experiment_path, SEARCHER_STATE + ".tmp")
        with open(staging, "wb") as f:
            import cloudpickle

            cloudpickle.dump(search_state, f)
        os.replace(staging, os.path.join(self.experiment_path, SEARCHER_STATE))


def _searched(param_space: dict, config: dict) -> list[tuple[tuple, Any]]:
    """(path, value in `config`) of each searched leaf of `param_space` (a domain or a
    grid_search), in the order of the space."""
    from reference.tune.search.sample import Domain
    from reference.tune.search.variant_generator import _leaves

    pairs = []
    for path, leaf in _leaves(param_space):
        if isinstance(leaf, Domain) or (isinstance(leaf, dict) and set(leaf) == {"grid_search"}):
            value: Any = config
            for key in path:
                value = value[key]
            pairs.append((path, value))
    return pairs


def _tag(param_space: dict, config: dict) -> str:
    """Ray's experiment tag: `name=value` of each searched leaf (last key), sorted, floats
    with 4 decimals, other characters than [a-zA-Z0-9_-] made `_`."""
    import re

    def clean(value: Any) -> str:
        if isinstance(value, float):
            return f"{value:.4f}"
        return re.sub(r"[^a-zA-Z0-9_-]+", "_", str(value)).strip("_")

    return ",".join(f"{clean(path[-1])}={clean(v)}" for path, v in sorted(
        _searched(param_space, config), key=lambda pair: tuple(map(str, pair[0]))))
