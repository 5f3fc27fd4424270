"""`ResultGrid`: the Results of an experiment's trials, and how to pick the best."""

from __future__ import annotations

import math
from typing import Optional

import pyarrow.fs

from reference._lazy import LazyModule
from reference.tune.result import Result, trial_result
from reference.tune.stopper import flatten

pd = LazyModule("pandas")

SCOPES = ("all", "last", "avg", "last-5-avg", "last-10-avg")


class ResultGrid:
    """`len(grid)`, `grid[i]` and iteration give one `Result` per trial, in the order the
    trials were created; `errors`, `num_errors` and `num_terminated` count outcomes."""

    def __init__(self, trials: list, experiment_path: str, metric: Optional[str] = None,
                 mode: Optional[str] = None):
        self._trials = list(trials)
        self._results = [trial_result(t) for t in self._trials]
        self._experiment_path = experiment_path
        self._metric, self._mode = metric, mode

    @property
    def experiment_path(self) -> str:
        return self._experiment_path

    @property
    def filesystem(self) -> pyarrow.fs.FileSystem:
        return pyarrow.fs.LocalFileSystem()

    def __len__(self) -> int:
        return len(self._results)

    def __getitem__(self, i: int) -> Result:
        return self._results[i]

    def __iter__(self):
        return iter(self._results)

    @property
    def errors(self) -> list[BaseException]:
        return [r.error for r in self._results if r.error is not None]

    @property
    def num_errors(self) -> int:
        return len(self.errors)

    @property
    def num_terminated(self) -> int:
        return sum(1 for t in self._trials if t.status == "TERMINATED")

    def get_best_result(self, metric: Optional[str] = None, mode: Optional[str] = None,
                        scope: str = "last", filter_nan_and_inf: bool = True) -> Result:
        """The best trial's Result by `metric` (default: the TuneConfig's) and `mode`. The
        scope says which value of each trial counts: its last (`last`), its best over all
        results (`all`), the mean of all (`avg`) or of the last 5 or 10 (`last-5-avg`,
        `last-10-avg`). NaN and infinite values are skipped unless `filter_nan_and_inf=False`.
        A single trial is returned as it is."""
        if len(self._trials) == 1:
            return self._results[0]
        if not metric and not self._metric:
            raise ValueError("No metric is provided. Either pass in a `metric` arg to "
                             "`get_best_result` or specify a metric in the `TuneConfig` of "
                             "your `Tuner`.")
        if not mode and not self._mode:
            raise ValueError("No mode is provided. Either pass in a `mode` arg to "
                             "`get_best_result` or specify a mode in the `TuneConfig` of "
                             "your `Tuner`.")
        metric, mode = metric or self._metric, mode or self._mode
        if mode not in ("min", "max"):
            raise ValueError(f"get_best_result(mode={mode!r}): expected 'min' or 'max'.")
        if scope not in SCOPES:
            raise ValueError(f"ExperimentAnalysis: attempting to get best trial for metric "
                             f"{metric} for scope {scope} not in {list(SCOPES)}.")
        best, best_score = None, None
        for result, trial in zip(self._results, self._trials, strict=True):
            values = [v for r in trial.results
                      if _is_number(v := flatten(r).get(metric))]
            if not values:
                continue
            score = _score(values, scope, mode)
            if filter_nan_and_inf and (math.isnan(score) or math.isinf(score)):
                continue
            if best_score is None or (score > best_score if mode == "max"
                                      else score < best_score):
                best, best_score = result, score
        if best is None:
            msg = ("No best trial found for the given metric: "
                   f"{metric}. This means that no trial has reported this metric")
            msg += (", or all values reported for this metric are NaN. To not ignore NaN "
                    "values, you can set the `filter_nan_and_inf` arg to False."
                    if filter_nan_and_inf else ".")
            raise RuntimeError(msg)
        return best

    def get_dataframe(self, filter_metric: Optional[str] = None,
                      filter_mode: Optional[str] = None) -> pd.DataFrame:
        """One row per trial: its last result, flattened (`config/...` columns included), and
        `logdir`. With `filter_metric`, each trial's row is its result with the best value
        of that metric (`filter_mode` 'min' or 'max')."""
        if filter_metric and filter_mode not in ("min", "max"):
            raise ValueError("If you set `filter_metric`, you have to pass a `filter_mode` "
                             "('min' or 'max').")
        rows = []
        for trial in self._trials:
            results = trial.results
            if filter_metric:
                scored = [r for r in results if _is_number(flatten(r).get(filter_metric))]
                if not scored:
                    continue
                pick = max if filter_mode == "max" else min
                row = pick(scored, key=lambda r: flatten(r)[filter_metric])
            else:
                row = trial.last_result
            if not row:
                continue
            rows.append({**flatten(row), "logdir": trial.path})
        return pd.DataFrame(rows)

    def __repr__(self) -> str:
        return "ResultGrid<[\n" + ",\n".join(f"  {r!r}" for r in self._results) + "\n]>"


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _score(values: list, scope: str, mode: str) -> float:
    if scope == "last":
        return values[-1]
    if scope == "all":
        return max(values) if mode == "max" else min(values)
    if scope == "avg":
        return sum(values) / len(values)
    window = values[-(5 if scope == "last-5-avg" else 10):]
    return sum(window) / len(window)
