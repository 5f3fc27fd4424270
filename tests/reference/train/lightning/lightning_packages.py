"""Run as a script: import Lightning integrations with some packages hidden and print, as
JSON, what each bound to.

    python lightning_packages.py MODULES HIDDEN...     one install
    python lightning_packages.py MODULES --installs JSON   several: {"name": [hidden...]}

MODULES is comma-separated, e.g. `reference.train.lightning,ray.train.lightning
pytorch_lightning` for an install with `lightning` only. With --installs, the process first
imports what Lightning pulls in but does not decide the binding (torch, scipy, transformers,
matplotlib, ...: most of an import of Lightning's seconds), then forks one child per
install, which hides its packages and imports the integrations as a fresh interpreter would;
it prints {"name": [what each module bound to]}.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import sys

#: imported once before the forks: none of them imports lightning, pytorch_lightning,
#: lightning_fabric or torchmetrics (checked), so each child still chooses its binding
SHARED = ("torch", "torch.distributed", "torch._dynamo", "numpy", "scipy.signal", "sympy",
          "transformers", "matplotlib.pyplot", "PIL.Image", "rich", "reference.train.torch",
          "ray.train.torch")
BINDING = ("lightning", "pytorch_lightning", "lightning_fabric", "torchmetrics")


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


def one_install(modules: list[str], hidden: list[str]) -> list[dict]:
    hide(hidden)
    return [describe(m, hidden) for m in modules]


def several_installs(modules: list[str], installs: dict[str, list[str]]) -> dict:
    for name in SHARED:
        if importlib.util.find_spec(name.split(".")[0]) is not None:
            importlib.import_module(name)
    loaded = sorted(m for m in sys.modules if m.split(".")[0] in BINDING)
    if loaded:
        raise SystemExit(f"the shared imports loaded {loaded}: a child could not choose")
    seen = {}
    for name, hidden in installs.items():
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: one install, as a fresh interpreter would see it
            os.close(read)
            code = 0
            try:
                out = json.dumps(one_install(modules, hidden)).encode()
            except BaseException as exc:  # noqa: BLE001 - carried to the parent as data
                out, code = json.dumps({"error": repr(exc)}).encode(), 1
            with os.fdopen(write, "wb") as f:
                f.write(out)
            os._exit(code)
        os.close(write)
        with os.fdopen(read, "rb") as f:
            data = f.read()
        _, status = os.waitpid(pid, 0)
        seen[name] = json.loads(data) if data else {"error": f"child status {status}"}
    return seen


if __name__ == "__main__":
    wanted = sys.argv[1].split(",")
    if sys.argv[2:3] == ["--installs"]:
        print(json.dumps(several_installs(wanted, json.loads(sys.argv[3]))))
    else:
        print(json.dumps(one_install(wanted, sys.argv[2:])))
