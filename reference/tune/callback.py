"""`tune.Callback`: hooks the Tuner calls on the driver as trials start, report and end."""

from __future__ import annotations


class Callback:
    """Override the hooks you need; each default does nothing. `iteration` counts the
    controller's loop steps; `trials` is every trial so far."""

    def setup(self, **info) -> None:
        pass

    def on_trial_start(self, iteration: int, trials: list, trial, **info) -> None:
        pass

    def on_trial_result(self, iteration: int, trials: list, trial, result: dict,
                        **info) -> None:
        pass

    def on_trial_complete(self, iteration: int, trials: list, trial, **info) -> None:
        pass

    def on_trial_error(self, iteration: int, trials: list, trial, **info) -> None:
        pass

    def on_trial_recover(self, iteration: int, trials: list, trial, **info) -> None:
        pass

    def on_checkpoint(self, iteration: int, trials: list, trial, checkpoint, **info) -> None:
        pass

    def on_trial_save(self, iteration: int, trials: list, trial, **info) -> None:
        """After `on_checkpoint`, once the trial's checkpoint is kept."""

    def on_trial_restore(self, iteration: int, trials: list, trial, **info) -> None:
        """Ray 2.60 defines it and never calls it; so does the reference."""

    def on_experiment_end(self, trials: list, **info) -> None:
        pass
