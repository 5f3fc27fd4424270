"""The trial side: what runs in a trial's own process, and what `tune.report`,
`tune.get_checkpoint` and `tune.get_context` talk to there.

The Tuner starts each trial as a simcluster worker running `trial_main(start)`. The trial
function runs in that process's main thread. `report()` persists the checkpoint (if any)
into the trial folder, first under a temporary name and then renamed, so a checkpoint is
on storage whole or not at all; it then sends the result to the Tuner and waits for its
answer, so a scheduler decides on every result before the function goes on (a STOP or
PAUSE ends the process). A Train run started inside the function connects to the same
cluster, so its workers share the cluster's resources with the trials.
"""

from __future__ import annotations

import dataclasses
import datetime
import logging
import os
import shutil
import socket
import threading
import time
import traceback
import warnings
from typing import Any, Optional

from reference.train import Checkpoint

logger = logging.getLogger(__name__)

#: the variable reference.train reads to know it runs inside a Tune trial (see trial_main)
TUNE_TRIAL_ENV = "TRAINSPEC_TUNE_TRIAL_ID"

_lock = threading.Lock()
_current: Optional[TrialSession] = None


@dataclasses.dataclass
class TrialStart:
    """What one start of a trial's process needs (picklable)."""

    fn: Any
    config: dict
    trial_id: str
    trial_name: str
    trial_dir: str
    experiment_name: str
    experiment_path: str
    bundles: list
    restore_path: Optional[str]      # checkpoint to resume from
    checkpoint_index: int            # the next checkpoint folder's number
    iteration: int                   # training_iteration reached by the restored state
    time_total_s: float


class TuneContext:
    """`tune.get_context()`: the trial this function runs as."""

    def __init__(self, start: TrialStart):
        self._start = start

    def get_trial_id(self) -> str:
        return self._start.trial_id

    def get_trial_name(self) -> str:
        return self._start.trial_name

    def get_trial_dir(self) -> str:
        return self._start.trial_dir

    def get_trial_resources(self):
        """The trial's resources as a PlacementGroupFactory (`.bundles`,
        `.required_resources`)."""
        from reference.tune.trainable import PlacementGroupFactory

        return PlacementGroupFactory(self._start.bundles)

    def get_experiment_name(self) -> str:
        return self._start.experiment_name

    def get_world_rank(self):
        return None

    def get_local_rank(self):
        return None

    def get_node_rank(self):
        return None

    def get_world_size(self):
        return None

    def get_local_world_size(self):
        return None


class TrialSession:
    def __init__(self, start: TrialStart, channel):
        self.start = start
        self.channel = channel
        self.context = TuneContext(start)
        self.iteration = start.iteration
        self.iterations_since_restore = 0
        self.time_total_s = start.time_total_s
        self.restore_time = self.last_time = time.time()
        self.checkpoint_index = start.checkpoint_index
        self.restored = Checkpoint(start.restore_path) if start.restore_path else None
        self.node_ip = _node_address()
        self._report_lock = threading.Lock()

    def report(self, metrics: dict, checkpoint=None) -> None:
        if not isinstance(metrics, dict) or not all(isinstance(k, str) for k in metrics):
            raise ValueError(f"tune.report(metrics={metrics!r}): expected a dict with str keys.")
        if checkpoint is not None and not isinstance(checkpoint, Checkpoint):
            raise TypeError(f"tune.report(checkpoint={checkpoint!r}): expected a "
                            "tune.Checkpoint (e.g. Checkpoint.from_directory(path)) or None.")
        with self._report_lock:  # one result at a time, also from a Train controller thread
            dir_name = self._persist(checkpoint) if checkpoint is not None else None
            now = time.time()
            self.iteration += 1
            self.iterations_since_restore += 1
            this_iter, self.last_time = now - self.last_time, now
            self.time_total_s += this_iter
            result = {
                **metrics,
                "timestamp": int(now),
                "checkpoint_dir_name": dir_name,
                "done": False,
                "training_iteration": self.iteration,
                "trial_id": self.start.trial_id,
                "date": datetime.datetime.fromtimestamp(now).strftime("%Y-%m-%d_%H-%M-%S"),
                "time_this_iter_s": this_iter,
                "time_total_s": self.time_total_s,
                "pid": os.getpid(),
                "hostname": socket.gethostname(),
                "node_ip": self.node_ip,
                "config": self.start.config,
                "time_since_restore": now - self.restore_time,
                "iterations_since_restore": self.iterations_since_restore,
            }
            if dir_name is not None:
                result["should_checkpoint"] = True
            self.channel.send(("result", result, dir_name))
            answer = self.channel.recv()
            if answer != "CONTINUE":  # the Tuner ends this process; wait for it
                time.sleep(3600)

    def _persist(self, checkpoint: Checkpoint) -> str:
        name = f"checkpoint_{self.checkpoint_index:06d}"
        self.checkpoint_index += 1
        final = os.path.join(self.start.trial_dir, name)
        staging = os.path.join(self.start.trial_dir, f".staging-{name}-{os.getpid()}")
        shutil.rmtree(staging, ignore_errors=True)
        checkpoint.to_directory(staging)
        shutil.rmtree(final, ignore_errors=True)  # a half-kept one from an earlier attempt
        os.replace(staging, final)
        return name

    def get_checkpoint(self) -> Optional[Checkpoint]:
        return self.restored


def _node_address() -> str:
    try:
        from simcluster import worker

        return worker.current().node_address
    except RuntimeError:
        return "127.0.0.1"


def current() -> Optional[TrialSession]:
    with _lock:
        return _current


def _set(session: Optional[TrialSession]) -> None:
    global _current
    with _lock:
        _current = session


def trial_main(start: TrialStart) -> None:
    """A trial's process: run the function with the trial's config, tell the Tuner how it
    ended, and wait for the Tuner to have read that before exiting."""
    from simcluster import worker

    channel = worker.channel()
    channel.recv()  # GO: the Tuner is listening
    os.makedirs(start.trial_dir, exist_ok=True)
    os.chdir(start.trial_dir)
    _set(TrialSession(start, channel))
    # what makes reference.train's report/get_context/... name their Tune equivalents here
    os.environ[TUNE_TRIAL_ENV] = start.trial_id
    try:
        start.fn(start.config)
    except BaseException as exc:  # noqa: BLE001 - the Tuner records any error of a trial
        from reference.exceptions import RayTaskError

        error = RayTaskError(exc, None, traceback.format_exc())
        try:
            channel.send(("error", error, traceback.format_exc()))
        except Exception:  # noqa: BLE001 - an unpicklable exception: send its text
            channel.send(("error", None, traceback.format_exc()))
    else:
        channel.send(("done",))
    channel.recv()


# -- the functions a trial calls -----------------------------------------------------------
def _session_or_warn(fn_name: str, default=None):
    session = current()
    if session is None:
        key = f"_warned_{fn_name}"
        if not globals().get(key):
            globals()[key] = True
            warnings.warn(f"`{fn_name}` is meant to only be called inside a function that is "
                          f"executed by a Tuner or Trainer. Returning `{default}`.",
                          stacklevel=3)
    return session


def report(metrics: dict, *, checkpoint=None) -> None:
    """Report this iteration's metrics (and optionally a checkpoint) to the Tuner; each
    call is one `training_iteration`."""
    session = _session_or_warn("report")
    if session is not None:
        session.report(metrics, checkpoint)


def get_checkpoint() -> Optional[Checkpoint]:
    """The checkpoint this trial resumes from (after a failure, a pause or a PBT exploit),
    or None on a fresh start."""
    session = _session_or_warn("get_checkpoint")
    return session.get_checkpoint() if session is not None else None


def get_context() -> TuneContext:
    """The trial's context (id, name, folder, resources, experiment name)."""
    session = current()
    if session is None:
        raise RuntimeError("`tune.get_context()` can only be called inside a function run by "
                           "a Tuner.")
    return session.context
