"""reference.tune.logger: the files each trial's loggers write (progress.csv, result.json,
params.json / .pkl, TensorBoard events read back from their protobuf records), the loggers a
Tuner adds by itself and the switch that turns them off, a user's LoggerCallback, and the
helpers next to Ray 2.60's own where Ray is installed."""

from __future__ import annotations

import csv
import glob
import json
import os
import pickle
import struct

import pytest
import tune_fns

import reference.tune as tune
from reference.tune.logger import (
    CSVLoggerCallback,
    JsonLoggerCallback,
    LoggerCallback,
    TBXLoggerCallback,
    pretty_print,
)
from reference.tune.logger.defaults import default_callbacks
from reference.tune.logger.logger import flatten_dict

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("cluster")]  # conftest.py


class Seen(LoggerCallback):
    def __init__(self):
        self.calls = []

    def log_trial_start(self, trial):
        self.calls.append(("start", trial.config["a"]))

    def log_trial_result(self, iteration, trial, result):
        self.calls.append(("result", trial.config["a"], result["training_iteration"]))

    def log_trial_end(self, trial, failed=False):
        self.calls.append(("end", trial.config["a"], failed))


def _fit(tmp_path, callbacks=()):
    tuner = tune.Tuner(tune_fns.logged, param_space={"a": tune.grid_search([1, 2]), "c": 7},
                       tune_config=tune.TuneConfig(max_concurrent_trials=1),
                       run_config=tune.RunConfig(name="exp", storage_path=str(tmp_path),
                                                 verbose=0, callbacks=list(callbacks)))
    return tuner.fit()


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    seen = Seen()
    out = tmp_path_factory.mktemp("logged")
    grid = _fit(out, [seen])
    return grid, {r.config["a"]: r.path for r in grid}, seen


def _events(folder: str) -> list:
    """The Event protos of the one tfevents file in `folder` (TFRecord: a length, its CRC,
    the record, its CRC)."""
    from tensorboardX.proto import event_pb2

    (path,) = glob.glob(os.path.join(folder, "events.out.tfevents.*"))
    events, data = [], open(path, "rb").read()
    at = 0
    while at < len(data):
        (length,) = struct.unpack("<Q", data[at:at + 8])
        events.append(event_pb2.Event.FromString(data[at + 12:at + 12 + length]))
        at += 12 + length + 4
    return events


def test_each_trial_has_its_csv_json_and_params_files(run):
    grid, paths, _ = run
    with open(os.path.join(paths[1], "progress.csv"), newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 3
    columns = list(rows[0])
    # Ray's flattening order: a nested dict's keys after the plain ones; an empty one gone
    assert columns.index("nested/x") > columns.index("flag") and "nested/none" not in columns
    assert "config" not in columns and rows[2]["loss"] == "1" and rows[0]["hist"] == "[1.0, 2.0, 0.0]"
    lines = [json.loads(x) for x in open(os.path.join(paths[1], "result.json"))]
    assert [x["training_iteration"] for x in lines] == [1, 2, 3]
    assert lines[0]["half"] == 0.5 and lines[0]["config"] == {"a": 1, "c": 7}
    assert json.load(open(os.path.join(paths[2], "params.json"))) == {"a": 2, "c": 7}
    assert pickle.load(open(os.path.join(paths[2], "params.pkl"), "rb")) == {"a": 2, "c": 7}
    assert len(open(os.path.join(paths[2], "result.json")).readlines()) == 1  # it failed


def test_tensorboard_scalars_and_hparams_of_each_trial(run):
    _, paths, _ = run
    events = _events(paths[1])
    scalars = {}
    for e in events:
        for v in e.summary.value:
            if v.HasField("simple_value"):
                scalars.setdefault(v.tag, []).append((e.step, round(v.simple_value, 3)))
    assert scalars["ray/tune/loss"] == [(1, 3.0), (2, 2.0), (3, 1.0)]
    assert scalars["ray/tune/nested/x"] == [(1, 0.0), (2, 1.0), (3, 2.0)]
    assert scalars["ray/tune/half"][0] == (1, 0.5) and scalars["ray/tune/flag"][0] == (1, 1.0)
    assert "ray/tune/name" not in scalars and "ray/tune/training_iteration" not in scalars
    histograms = {v.tag for e in events for v in e.summary.value if v.HasField("histo")}
    assert histograms == {"ray/tune/hist"}
    # hparams (the searched `a`, not the constant `c`) once the trial ended
    plugin = [v for e in events for v in e.summary.value
              if v.metadata.plugin_data.plugin_name == "hparams"]
    assert len(plugin) == 3  # experiment, session start, session end
    assert b"ray/tune/loss" in plugin[0].metadata.plugin_data.content
    start = plugin[1].metadata.plugin_data.content
    assert b"\n\x01a" in start and b"\n\x01c" not in start


def test_a_users_logger_callback_sees_start_results_and_end(run):
    _, _, seen = run
    assert seen.calls == [("start", 1), ("result", 1, 1), ("result", 1, 2), ("result", 1, 3),
                          ("end", 1, False), ("start", 2), ("result", 2, 1), ("end", 2, True)]


def test_auto_loggers_off_leave_no_trial_file_and_a_users_own_replaces_its_kind(
        tmp_path, monkeypatch):
    class MyCSV(CSVLoggerCallback):
        pass

    kinds = [type(c) for c in default_callbacks([MyCSV()])]
    assert kinds == [MyCSV, JsonLoggerCallback, TBXLoggerCallback]
    monkeypatch.setenv("TUNE_DISABLE_AUTO_CALLBACK_LOGGERS", "1")
    assert default_callbacks([]) == []
    grid = _fit(tmp_path)
    assert sorted(r.metrics["training_iteration"] for r in grid) == [1, 3]
    for result in grid:
        left = set(os.listdir(result.path))
        assert not left & {"progress.csv", "result.json", "params.json", "params.pkl"}, left
        assert not any(name.startswith("events.out") for name in left), left


def test_flatten_and_pretty_print():
    assert list(flatten_dict({"x": {"y": 1, "e": {}}, "z": 2})) == ["z", "x/y"]
    text = pretty_print({"a": 1, "config": {"b": 2}, "l": [1, 2, 3, 4], "s": [1, 2],
                         "none": None, "d": {"e": 1.5}}, exclude={"s"})
    assert text == "a: 1\nd:\n  e: 1.5\nl: [1, 2, 3, 4]\n"


CASES = [{"a": 1, "config": {"b": 2}, "l": [1, 2, 3, 4], "s": [1, 2], "none": None,
          "d": {"e": 1.5, "f": {"g": "x"}}},
         {"x": {"y": {}}, "z": [[1, 2], [3]], "w": "text"}]


@pytest.mark.parametrize("case", CASES)
def test_flatten_and_pretty_print_equal_rays(case):
    pytest.importorskip("ray")
    from ray._private.dict import flatten_dict as rays_flatten
    from ray.tune.logger import pretty_print as rays_pretty_print

    assert list(flatten_dict(case).items()) == list(rays_flatten(case).items())
    assert pretty_print(case) == rays_pretty_print(case)
    assert pretty_print(case, exclude={"a", "w"}) == rays_pretty_print(case, exclude={"a", "w"})


def test_odd_values_are_written_as_rays_loggers_write_them():
    np = pytest.importorskip("numpy")
    pytest.importorskip("ray")
    from ray.air._internal.json import SafeFallbackEncoder

    from reference.tune.logger.logger import json_default

    odd = object()
    value = {"f32": np.float32(0.25), "nan32": np.float32("nan"), "i64": np.int64(3),
             "arr": np.arange(3), "flag": np.bool_(True), "obj": odd, "set": {1}}
    assert json.dumps(value, default=json_default) == json.dumps(value, cls=SafeFallbackEncoder)
