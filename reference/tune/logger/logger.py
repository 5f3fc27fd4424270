"""`LoggerCallback`, the base of the per-trial loggers; `pretty_print`; and the flattening
and JSON fallbacks the loggers share.

A LoggerCallback is a `tune.Callback` whose trial hooks call five simpler ones:
`log_trial_start` (on_trial_start), `log_trial_restore` (on_trial_restore),
`log_trial_save` (on_trial_save), `log_trial_result` (on_trial_result) and `log_trial_end`
(on_trial_complete with failed=False, on_trial_error with failed=True). Each runs on the
Tuner's driver loop, as in Ray.
"""

from __future__ import annotations

import json
import logging
import numbers
from typing import Optional

import yaml

from reference.tune.callback import Callback

logger = logging.getLogger(__name__)

class LoggerCallback(Callback):
    """Override the `log_trial_*` hooks you need; each default does nothing. A logger
    closes what it opened for a trial in `log_trial_end`."""

    #: the files (glob patterns, in the trial's folder) the logger writes
    _SAVED_FILE_TEMPLATES: list[str] = []

    def log_trial_start(self, trial) -> None:
        pass

    def log_trial_restore(self, trial) -> None:
        pass

    def log_trial_save(self, trial) -> None:
        pass

    def log_trial_result(self, iteration: int, trial, result: dict) -> None:
        pass

    def log_trial_end(self, trial, failed: bool = False) -> None:
        pass

    def on_trial_start(self, iteration: int, trials: list, trial, **info) -> None:
        self.log_trial_start(trial)

    def on_trial_restore(self, iteration: int, trials: list, trial, **info) -> None:
        self.log_trial_restore(trial)

    def on_trial_save(self, iteration: int, trials: list, trial, **info) -> None:
        self.log_trial_save(trial)

    def on_trial_result(self, iteration: int, trials: list, trial, result: dict,
                        **info) -> None:
        self.log_trial_result(iteration, trial, result)

    def on_trial_complete(self, iteration: int, trials: list, trial, **info) -> None:
        self.log_trial_end(trial, failed=False)

    def on_trial_error(self, iteration: int, trials: list, trial, **info) -> None:
        self.log_trial_end(trial, failed=True)


def json_default(value):
    """What `json.dumps` cannot write, as Ray's loggers write it: a numpy array as a list, a
    numpy bool as a bool, a NaN numpy float as the string "null", other numbers as int or
    float, anything else as its str (so one odd value never loses a result)."""
    import numpy as np

    try:
        if isinstance(value, np.ndarray):
            return value.tolist()
        if isinstance(value, np.bool_):
            return bool(value)
        if np.isnan(value):
            return "null"
        if isinstance(value, numbers.Integral):
            return int(value)
        if isinstance(value, numbers.Number):
            return float(value)
    except Exception:  # noqa: BLE001 - np.isnan of a non-number, among others
        pass
    return str(value)


def flatten_dict(d: dict) -> dict:
    """`{"a": {"b": 1}}` -> `{"a/b": 1}` in Ray's loggers' order: pass by pass, each nested
    dict's keys go to the end (so `{"x": {"y": 1}, "z": 2}` gives `z`, then `x/y`), and an
    empty nested dict leaves no key."""
    out = dict(d)
    while any(isinstance(v, dict) for v in out.values()):
        nested = {k: v for k, v in out.items() if isinstance(v, dict)}
        out = {k: v for k, v in out.items() if k not in nested}
        for key, value in nested.items():
            out.update({f"{key}/{sub}": v for sub, v in value.items()})
    return out


class _Dumper(yaml.SafeDumper):
    """Sequences of more than 3 items in flow style ([a, b, c, d]), as Ray prints them."""

    def represent_sequence(self, tag, sequence, flow_style=None):
        if len(sequence) > 3:
            flow_style = True
        return super().represent_sequence(tag, sequence, flow_style=flow_style)


def pretty_print(result: dict, exclude: Optional[set] = None) -> str:
    """`result` as YAML, without `config`, `hist_stats`, None values and the keys in
    `exclude`; values JSON cannot hold are written as their repr."""
    kept = {k: v for k, v in result.items()
            if k not in ("config", "hist_stats") and v is not None
            and (exclude is None or k not in exclude)}
    plain = json.loads(json.dumps(kept, default=json_default))
    return yaml.dump(plain, Dumper=_Dumper, default_flow_style=False)
