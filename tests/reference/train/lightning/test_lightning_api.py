"""reference.train.lightning outside a fit: names, the Lightning package it binds to, the
errors of prepare_trainer and of the parts that need a training function."""

from __future__ import annotations

import importlib.util
import inspect
import json
import os
import subprocess
import sys

import lightning.pytorch as pl
import pytest

import reference.train.lightning as rtl
from reference.train.lightning import (
    RayDDPStrategy,
    RayFSDPStrategy,
    RayLightningEnvironment,
    RayTrainReportCallback,
    prepare_trainer,
)

HERE = os.path.dirname(os.path.abspath(__file__))
RAY_NAMES = ["prepare_trainer", "RayDDPStrategy", "RayFSDPStrategy", "RayDeepSpeedStrategy",
             "RayLightningEnvironment", "RayTrainReportCallback"]


def _trainer(**kwargs):
    return pl.Trainer(accelerator="cpu", devices=1, logger=False, enable_progress_bar=False,
                      enable_checkpointing=False, **kwargs)


def test_public_names_are_rays():
    assert rtl.__all__ == RAY_NAMES
    # (pytest rewrites this package's asserts and adds "@..." names)
    public = {n for n in vars(rtl) if n[0] not in "_@"} - {"lightning"}
    assert public == set(RAY_NAMES)


@pytest.mark.parametrize("legacy", ["LightningTrainer", "LightningConfigBuilder"])
def test_legacy_names_fail_to_import(legacy):
    with pytest.raises(ImportError, match=f"cannot import name '{legacy}' from "
                                          "'reference.train.lightning'"):
        exec(f"from reference.train.lightning import {legacy}")
    with pytest.raises(AttributeError, match=f"has no attribute '{legacy}'"):
        getattr(rtl, legacy)


def test_prepare_trainer_rejects_other_strategies():
    trainer = _trainer(strategy="ddp")
    with pytest.raises(RuntimeError) as info:
        prepare_trainer(trainer)
    assert str(info.value) == (
        f"Invalid strategy class: {type(trainer.strategy)}. To use PyTorch Lightning with Ray, "
        "the strategy object should be one of ['RayDDPStrategy', 'RayFSDPStrategy', "
        "'RayDeepSpeedStrategy'] class or its subclass.")


def test_prepare_trainer_needs_the_environment_plugin():
    # Without the plugin Lightning picks its own LightningEnvironment.
    trainer = _trainer(strategy=RayDDPStrategy())
    with pytest.raises(RuntimeError) as info:
        prepare_trainer(trainer)
    environment = type(trainer.strategy.cluster_environment)
    assert str(info.value) == (
        "Invalid cluster environment plugin. The expected class is"
        f"`ray.train.lightning.RayLightningEnvironment` but got {environment}!")


def test_strategies_build_anywhere_and_keep_their_bases_arguments():
    ddp = RayDDPStrategy(find_unused_parameters=True, process_group_backend="gloo")
    assert isinstance(ddp, pl.strategies.DDPStrategy)
    assert ddp._ddp_kwargs == {"find_unused_parameters": True}
    assert isinstance(RayFSDPStrategy(), pl.strategies.FSDPStrategy)


@pytest.mark.skipif(importlib.util.find_spec("deepspeed") is not None,
                    reason="deepspeed is installed")
def test_deepspeed_strategy_needs_deepspeed():
    from lightning.fabric.utilities.exceptions import MisconfigurationException

    with pytest.raises(MisconfigurationException, match="you must have DeepSpeed installed"):
        rtl.RayDeepSpeedStrategy()


def test_context_readers_raise_outside_a_training_function():
    environment = RayLightningEnvironment()  # building it reads nothing
    with pytest.raises(RuntimeError, match="`get_context` cannot be used outside"):
        environment.world_size()
    with pytest.raises(RuntimeError, match="`get_context` cannot be used outside"):
        _trainer(strategy=RayDDPStrategy(), plugins=[RayLightningEnvironment()])
    with pytest.raises(RuntimeError, match="`get_context` cannot be used outside"):
        RayTrainReportCallback()
    assert RayTrainReportCallback.CHECKPOINT_NAME == "checkpoint.ckpt"


# Which package the classes subclass, per install; a Trainer of the other package rejects
# them. Simulated by hiding packages in a fresh interpreter.
BOTH = {"strategy_base": "lightning",
        "environment_base": "lightning.fabric.plugins.environments.lightning",
        "callback_base": "lightning.pytorch.callbacks.callback",
        "trainers": {"lightning.pytorch": "accepted",
                     "pytorch_lightning": "ValueError: You selected an invalid strategy name"}}
INSTALLS = {
    "both": ([], BOTH),
    "lightning only": (["pytorch_lightning"], {**BOTH, "trainers": {
        "lightning.pytorch": "accepted"}}),
    "pytorch_lightning only": (["lightning"], {
        "strategy_base": "pytorch_lightning",
        "environment_base": "lightning_fabric.plugins.environments.lightning",
        "callback_base": "pytorch_lightning.callbacks.callback",
        "trainers": {"pytorch_lightning": "accepted"}}),
    "neither": (["lightning", "pytorch_lightning"], {"import_error": [
        "ModuleNotFoundError", "PyTorch Lightning isn't installed. To install PyTorch "
        "Lightning, please run 'pip install lightning'"]}),
}


def _integrations() -> list[str]:
    modules = ["reference.train.lightning"]
    if importlib.util.find_spec("ray") is not None:
        modules.append("ray.train.lightning")
    return modules


def _missing(install: str) -> list[str]:
    """The packages an install needs that this machine lacks (it cannot be simulated)."""
    if install == "neither":
        return []
    return sorted(name for name in {"lightning", "pytorch_lightning"} - set(INSTALLS[install][0])
                  if importlib.util.find_spec(name) is None)


@pytest.fixture(scope="module")
def bindings():
    """What each integration bound to in every install this machine can simulate: one
    interpreter that imports what all installs share once, then forks one child per
    install, which hides its packages before anything of Lightning is imported."""
    installs = {name: INSTALLS[name][0] for name in INSTALLS if not _missing(name)}
    out = subprocess.run(
        [sys.executable, os.path.join(HERE, "lightning_packages.py"), ",".join(_integrations()),
         "--installs", json.dumps(installs)], capture_output=True, text=True, timeout=240)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1]), out.stderr


@pytest.mark.slow
@pytest.mark.parametrize("install", list(INSTALLS))
def test_binds_to_the_package_ray_binds_to(install, bindings):
    if _missing(install):
        pytest.skip(f"{', '.join(_missing(install))} is not installed")
    expected = INSTALLS[install][1]
    seen, stderr = bindings
    assert seen[install] == [expected] * len(_integrations()), stderr[-2000:]


@pytest.mark.parametrize("name", RAY_NAMES)
def test_public_members_and_call_signature_match_rays(name):
    ray_lightning = pytest.importorskip("ray.train.lightning")
    ours, theirs = getattr(rtl, name), getattr(ray_lightning, name)
    assert {n for n in dir(ours) if not n.startswith("_")} == {
        n for n in dir(theirs) if not n.startswith("_")}
    if name in ("prepare_trainer", "RayTrainReportCallback"):
        # The others take their Lightning base's arguments (Ray's spell them *args, **kwargs).
        assert [(p.name, p.default) for p in inspect.signature(ours).parameters.values()] == [
            (p.name, p.default) for p in inspect.signature(theirs).parameters.values()]
