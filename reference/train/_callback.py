"""Callbacks the controller invokes during a run (on the driver, not on the workers)."""

from typing import Any


class RayTrainCallback:
    """Base of every controller callback; RunConfig(callbacks=...) accepts only these."""


class UserCallback(RayTrainCallback):
    """Subclass and override the hooks you need; each default does nothing.

    The hooks run in the controller, so they must be quick: the run waits for them.
    """

    def after_report(self, run_context: Any, metrics: list[dict[str, Any]],
                     checkpoint: Any | None) -> None:
        """Called after every worker has reported, once per report round.

        Args:
            run_context: The run's context (name, configs).
            metrics: ``metrics[i]`` is the dict world rank ``i`` reported.
            checkpoint: The persisted Checkpoint of the round, or None when no rank
                reported one.
        """

    def after_exception(self, run_context: Any, worker_exceptions: dict[int, Exception]) -> None:
        """Called after one or more workers raised.

        Args:
            run_context: The run's context (name, configs).
            worker_exceptions: World rank -> the exception that rank raised.
        """
