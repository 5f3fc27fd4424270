"""Run as a script: import Lightning integrations with some packages hidden and print, as
JSON, what each bound to. `python lightning_packages.py MODULES HIDDEN...`, MODULES
comma-separated, e.g. `reference.train.lightning,ray.train.lightning pytorch_lightning` for an
install with `lightning` only."""

from __future__ import annotations

import importlib
import json
import sys


def hide(names: list[str]) -> None:
    for name in names:
        sys.modules[name] = None  # `import name` now raises ModuleNotFoundError


def describe(module_name: str, hidden: list[str]) -> dict:
    try:
        integration = importlib.import_module(module_name)
    except ImportError as exc:
        return {"import_error": [type(exc).__name__, str(exc)]}
    strategy = integration.RayDDPStrategy()
    seen = {
        "strategy_base": next(c for c in integration.RayDDPStrategy.__mro__
                              if c.__name__ == "DDPStrategy").__module__.split(".")[0],
        "environment_base": integration.RayLightningEnvironment.__mro__[1].__module__,
        "callback_base": integration.RayTrainReportCallback.__mro__[1].__module__,
        "trainers": {},
    }
    for package in ("lightning.pytorch", "pytorch_lightning"):
        if package.split(".")[0] in hidden:
            continue
        pl = importlib.import_module(package)
        try:
            pl.Trainer(strategy=strategy, accelerator="cpu", devices=1, logger=False,
                       enable_progress_bar=False, enable_checkpointing=False)
            seen["trainers"][package] = "accepted"
        except ValueError as exc:
            seen["trainers"][package] = f"ValueError: {str(exc).split(':')[0]}"
    return seen


if __name__ == "__main__":
    hide(sys.argv[2:])
    print(json.dumps([describe(m, sys.argv[2:]) for m in sys.argv[1].split(",")]))
