"""reference.init / shutdown / is_initialized and the errors of a distributed fit that
come from bad input on a worker."""

import os

import pytest

import reference
import reference.train as t


@pytest.fixture
def fresh():
    reference.shutdown()
    yield
    reference.shutdown()


def test_init_shutdown_cycle(fresh):
    assert not reference.is_initialized()
    cluster = reference.init(num_cpus=3)
    assert reference.is_initialized()
    assert cluster.total_resources()["CPU"] == 3
    with pytest.raises(RuntimeError, match="already called"):
        reference.init()
    assert reference.init(ignore_reinit_error=True) is cluster
    reference.shutdown()
    assert not reference.is_initialized()
    reference.shutdown()  # idempotent


@pytest.mark.parametrize("kwargs,match", [
    ({"num_cpus": -1}, "num_cpus=-1"),
    ({"num_gpus": 1.5}, "num_gpus=1.5"),
    ({"address": "127.0.0.1:1", "num_cpus": 2}, "must not be provided"),
    ({"bogus": 1}, "bogus"),
])
def test_init_rejects_bad_arguments(fresh, kwargs, match):
    with pytest.raises((ValueError, TypeError), match=match):
        reference.init(**kwargs)
    assert not reference.is_initialized()


def test_connect_to_a_running_cluster(fresh):
    import simcluster

    with simcluster.Cluster(nodes=[simcluster.NodeSpec(cpus=2)]) as cluster:
        client = reference.init(address=cluster.address)
        assert [n.id for n in client.nodes] == [n.id for n in cluster.nodes]
        reference.shutdown()


def _fit(tmp_path, fn, **scaling):
    return t.DataParallelTrainer(
        fn, scaling_config=t.ScalingConfig(num_workers=1, **scaling),
        run_config=t.RunConfig(storage_path=str(tmp_path / "s"), name="bad")).fit()


@pytest.mark.slow
@pytest.mark.parametrize("name", ["../escape", "/abs/path", "a/../../b", ".tmp-x"])
def test_escaping_checkpoint_dir_name_is_a_value_error(tmp_path, name):
    src = tmp_path / "ck"
    src.mkdir()

    def train():
        t.report({}, checkpoint=t.Checkpoint.from_directory(str(src)), checkpoint_dir_name=name)

    with pytest.raises(t.WorkerGroupError) as info:
        _fit(tmp_path, train)
    assert isinstance(info.value.worker_failures[0], ValueError)
    assert "checkpoint_dir_name" in str(info.value.worker_failures[0])
    assert sorted(os.listdir(tmp_path)) == ["ck", "s"]  # nothing written outside the run
    assert sorted(os.listdir(tmp_path / "s")) == ["bad"]


@pytest.mark.slow
def test_unserializable_metric_names_its_key(tmp_path):
    def train():
        t.report({"ok": 1, "fn": lambda: None, "gen": (i for i in range(3))})

    with pytest.raises(t.WorkerGroupError) as info:
        _fit(tmp_path, train)
    err = info.value.worker_failures[0]
    assert isinstance(err, TypeError) and "'gen'" in str(err)


@pytest.mark.slow
def test_a_request_that_can_never_fit_fails_at_once(tmp_path):
    import time

    reference.init(ignore_reinit_error=True)  # the clock runs from the fit, not the start-up
    start = time.monotonic()
    with pytest.raises(t.ControllerError, match="CPU"):
        t.DataParallelTrainer(
            lambda: None, scaling_config=t.ScalingConfig(num_workers=64),
            run_config=t.RunConfig(storage_path=str(tmp_path), name="huge")).fit()
    # at once: far below the 30 s a placement may wait, also on a loaded machine
    assert time.monotonic() - start < 20


@pytest.mark.slow
def test_rejected_backend_config_is_a_controller_error_and_leaks_nothing(tmp_path):
    torch_mod = pytest.importorskip("reference.train.torch")
    bad = torch_mod.TorchTrainer(
        lambda: None, torch_config=torch_mod.TorchConfig(init_method="bogus"),
        scaling_config=t.ScalingConfig(num_workers=2),
        run_config=t.RunConfig(storage_path=str(tmp_path), name="bad",
                               failure_config=t.FailureConfig(max_failures=2)))
    with pytest.raises(t.ControllerError, match="init_method"):
        bad.fit()
    # the placement was released: the next fit gets the same resources at once
    result = t.DataParallelTrainer(
        lambda: 7, scaling_config=t.ScalingConfig(num_workers=2),
        run_config=t.RunConfig(storage_path=str(tmp_path), name="good")).fit()
    assert result.return_value == 7


def _modules_of_a_fresh_worker(cluster, modules):
    def probe(names):
        import sys

        return [m for m in names if m in sys.modules]

    return cluster.start_worker(cluster.nodes[0].id, probe, (list(modules),)).wait(10).result


def test_connecting_preloads_the_runtime_on_a_cluster_started_without_it(fresh):
    # A cluster the user built with no `preload=`: connecting asks its nodes to import the
    # worker runtime once, so no worker of any later fit imports it itself.
    # A framework the script imported is not asked for at connect time (a live node imports
    # into memory of its own), only by a fit whose trainer uses it.
    import simcluster

    pytest.importorskip("reference.train.torch")
    with simcluster.Cluster(nodes=[simcluster.NodeSpec(cpus=2)] * 2) as cluster:
        assert "reference.train" not in _modules_of_a_fresh_worker(cluster, reference.PRELOAD)
        reference.init(address=cluster.address)
        assert _modules_of_a_fresh_worker(cluster, reference.PRELOAD) == list(reference.PRELOAD)
        asked = [e for e in cluster.history.events() if e["event"] == "preload"]
        assert len(asked) == 1 and set(reference.PRELOAD) <= set(asked[0]["modules"])
        assert "torch" not in asked[0]["modules"], asked
        assert asked[0]["nodes"] == [n.id for n in cluster.nodes]
        reference.shutdown()


@pytest.mark.slow
def test_a_trainer_imported_after_init_has_its_framework_preloaded(fresh, tmp_path):
    # reference.init() first, the torch trainer imported after: the fit asks the nodes for
    # the backend's modules before its workers start (before, every worker imported torch).
    # (If this process imported the trainer earlier, init() preloads it at the start.)
    import sys

    imported_before = "reference.train.torch" in sys.modules
    cluster = reference.init(num_cpus=2)
    from reference.train.torch import TorchTrainer
    from reference.train.torch._config import TorchBackend

    wanted = list(TorchBackend.preload_modules)
    if not imported_before:  # a bare fork of the node does not have torch yet
        assert "torch" not in _modules_of_a_fresh_worker(cluster, wanted)

    def preloads():
        return [e for e in cluster.history.events() if e["event"] == "preload"]

    for name in ("late", "late2"):
        TorchTrainer(lambda: None, scaling_config=t.ScalingConfig(num_workers=2),
                     run_config=t.RunConfig(storage_path=str(tmp_path), name=name)).fit()
        # The node itself has them now: a bare fork of it starts with them imported.
        assert _modules_of_a_fresh_worker(cluster, wanted) == wanted
        # One request at the first fit (none if init() preloaded it), none at the second.
        asked = preloads()
        assert len(asked) == (0 if imported_before else 1)
        if asked:
            assert set(asked[0]["modules"]) <= set(wanted) and "torch" in asked[0]["modules"]
