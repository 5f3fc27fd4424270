"""What fit() checks of a ScalingConfig before anything of the run starts.

Ray 2.60's ScalingConfig takes, at construction, values that can never be placed
(`resources_per_worker={'CPU': nan}`, `{'': 1}`, `placement_strategy='BAD'`,
`use_gpu='yes'`), and so does ours, to match. fit() then refuses them here, before the run
folder, the cluster or any worker is touched, with a ControllerError (what a fit that fails
in its controller raises) whose message names the field, the value and what is allowed,
instead of failing in placement with a message about `bundles[0]`.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

from simcluster import STRATEGIES  # what the cluster places

#: resources counted in whole devices: a request above one must be a whole number
DEVICE_RESOURCES = ("GPU", "TPU")
_EXAMPLE = "{'CPU': 2, 'GPU': 1}"


def check_placeable(scaling_config) -> None:
    """Raise ValueError naming the ScalingConfig field that no cluster could place."""
    for flag in ("use_gpu", "use_tpu"):
        value = getattr(scaling_config, flag, False)
        if not isinstance(value, bool):
            raise ValueError(f"ScalingConfig({flag}={_short(value)}): expected True or False; "
                             f"pass {flag}=True to reserve one per worker, else leave it out.")
    check_strategy(scaling_config.placement_strategy)
    check_resources(scaling_config.resources_per_worker)


def check_strategy(strategy: Any) -> None:
    if strategy in STRATEGIES:
        return
    hint = ""
    if isinstance(strategy, str) and strategy.strip().upper() in STRATEGIES:
        hint = f" (did you mean {strategy.strip().upper()!r}?)"
    raise ValueError(f"ScalingConfig(placement_strategy={_short(strategy)}): expected one of "
                     f"{STRATEGIES}{hint}.")


def check_resources(resources: Any) -> None:
    if resources is None:
        return
    if not isinstance(resources, dict):
        raise ValueError(f"ScalingConfig(resources_per_worker={_short(resources)}): expected a "
                         f"dict of resource name -> amount such as {_EXAMPLE}, or None.")
    where = f"ScalingConfig(resources_per_worker={_short(resources)})"
    for name, amount in resources.items():
        if not isinstance(name, str) or not name:
            raise ValueError(f"{where}: resource names must be non-empty strings, got "
                             f"{_short(name)}; pass e.g. {_EXAMPLE}.")
        problem = _amount_problem(name, amount)
        if problem:
            raise ValueError(f"{where}: {name!r}={_short(amount)} {problem}; pass e.g. "
                             f"{_EXAMPLE}.")


def _amount_problem(name: str, amount: Any) -> str:
    if isinstance(amount, bool):
        return "is a bool; amounts must be numbers >= 0"
    if not isinstance(amount, numbers.Real):
        return "is not a number; amounts must be numbers >= 0"
    if isinstance(amount, float) and not math.isfinite(amount):
        return "is not finite; amounts must be finite numbers >= 0"
    if amount < 0:
        return "is negative; amounts must be >= 0"
    if name in DEVICE_RESOURCES and amount > 1 and amount != int(amount):
        return ("is more than one device but not a whole number; ask for a fraction of one "
                "device or a whole number of devices")
    return ""


def _short(value: Any, limit: int = 120) -> str:
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


__all__ = ["STRATEGIES", "check_placeable", "check_resources", "check_strategy"]
