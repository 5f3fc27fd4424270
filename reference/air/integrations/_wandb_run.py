"""The process that holds one trial's W&B run for `WandbLoggerCallback` (W&B keeps one run
per process). It reads pickled items from stdin: ("start", (logdir, exclude, to_config,
init kwargs)) first, then ("result", dict), ("checkpoint", folder) and ("end", None); it
logs each result at step `training_iteration`, and finishes the run at "end" or when its
stdin closes."""

from __future__ import annotations

import logging
import os
import pickle
import sys
import urllib.error

logger = logging.getLogger(__name__)


def split(result: dict, exclude: set, to_config: set) -> tuple[dict, dict]:
    """(what to log, what to put in the run's config) of one result."""
    from reference.air.integrations.wandb import allowed
    from reference.tune.logger.logger import flatten_dict

    config = dict(result.get("config", {}))
    log = {}
    for key, value in flatten_dict(result).items():
        if any(key == item or key.startswith(item + "/") for item in exclude):
            continue
        if any(key == item or key.startswith(item + "/") for item in to_config):
            config[key] = value
        elif allowed(value):
            log[key] = value
    config.pop("callbacks", None)
    return log, config


def main() -> None:
    import wandb

    from reference.air.integrations.wandb import WANDB_PROCESS_RUN_INFO_HOOK, _call_hook

    stdin = sys.stdin.buffer
    kind, (logdir, exclude, to_config, init) = pickle.load(stdin)
    assert kind == "start", kind
    os.environ["WANDB_START_METHOD"] = "thread"
    run = wandb.init(**init)
    run.config.trial_log_path = logdir
    if WANDB_PROCESS_RUN_INFO_HOOK in os.environ:
        _call_hook(WANDB_PROCESS_RUN_INFO_HOOK, run)
    exclude, to_config = set(exclude), set(to_config)
    while True:
        try:
            kind, content = pickle.load(stdin)
        except EOFError:
            break
        if kind == "end":
            break
        if kind == "checkpoint":
            artifact = wandb.Artifact(name=f"checkpoint_{init.get('name', 'unknown')}",
                                      type="model")
            artifact.add_dir(content)
            run.log_artifact(artifact)
            continue
        log, config = split(content, exclude, to_config)
        try:
            run.config.update(config, allow_val_change=True)
            run.log(log, step=log.get("training_iteration"))
        except urllib.error.HTTPError as exc:
            logger.warning("Failed to log result to w&b: %s", exc)
    run.finish()


if __name__ == "__main__":
    main()
