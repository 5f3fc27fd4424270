"""OptunaSearch with a real Optuna study, against Ray 2.60's where Ray is installed: the same
space, sampler and seed, told the same results, suggest the same configs; the same
conversions of reference.tune domains and the same errors."""

from __future__ import annotations

import inspect
import pickle
import subprocess
import sys
import types

import cloudpickle
import pytest

import reference.tune as tune
from reference.tune.search import ConcurrencyLimiter, SearchGenerator, prepare_search_alg

optuna = pytest.importorskip("optuna")
from reference.tune.search.optuna import OptunaSearch  # noqa: E402

optuna.logging.set_verbosity(optuna.logging.WARNING)


def _ray_optuna():
    pytest.importorskip("ray.tune")
    from ray.tune.search.optuna import OptunaSearch as RayOptunaSearch

    return RayOptunaSearch


def space(t: types.ModuleType) -> dict:
    """The same space from either module's constructors (reference.tune or ray.tune)."""
    return {"x": t.uniform(-1, 1), "q": t.quniform(0, 1, 0.1), "l": t.loguniform(1e-4, 1e-1),
            "i": t.randint(0, 10), "qi": t.qrandint(0, 12, 3), "li": t.lograndint(1, 100),
            "c": t.choice(["a", "b", "c"]),
            "nested": {"y": t.uniform(0, 2), "deep": {"z": t.randint(1, 4)}}, "k": 5}


def loss(config: dict) -> float:
    nested = config.get("nested", {})
    return ((config.get("x", 0) - 0.3) ** 2 + 0.1 * config.get("i", 0) + nested.get("y", 0)
            + (config.get("c") == "b"))


def run(searcher, n: int = 24, batch: int = 3, metric="loss", start: int = 0):
    """Suggest `batch` trials at a time, then tell them: each 7th errors, each 11th ends
    without the metric; the others report an intermediate result and their loss."""
    configs = []
    for first in range(start, n, batch):
        ids = [f"t{i}" for i in range(first, min(n, first + batch))]
        suggested = [searcher.suggest(t) for t in ids]
        for i, (trial_id, config) in enumerate(zip(ids, suggested, strict=True), first):
            if i % 7 == 6:
                searcher.on_trial_complete(trial_id, None, error=True)
            elif i % 11 == 10:
                searcher.on_trial_complete(trial_id, {"other": 1.0})
            elif isinstance(metric, list):
                value = loss(config)
                searcher.on_trial_complete(trial_id, {"a": value, "b": value * (i % 3)})
            else:
                searcher.on_trial_result(trial_id, {metric: 9.0, "training_iteration": 1})
                searcher.on_trial_complete(trial_id, {metric: loss(config)})
        configs += suggested
    return configs, [t.state.name for t in searcher._ot_study.trials]


SAMPLERS = {
    "OptunaSearch(seed=3)": lambda: {"seed": 3},
    "TPESampler(seed=5, n_startup_trials=4)": lambda: {
        "sampler": optuna.samplers.TPESampler(seed=5, n_startup_trials=4)},
    "RandomSampler(seed=7)": lambda: {"sampler": optuna.samplers.RandomSampler(seed=7)},
}


@pytest.mark.parametrize("sampler", SAMPLERS)
def test_converted_param_space_suggests_rays_configs(sampler):
    RayOptunaSearch = _ray_optuna()
    import ray.tune as rt

    ours = OptunaSearch(metric="loss", mode="min", **SAMPLERS[sampler]())
    theirs = RayOptunaSearch(metric="loss", mode="min", **SAMPLERS[sampler]())
    assert ours.set_search_properties(None, None, space(tune))
    assert theirs.set_search_properties(None, None, space(rt))
    got, expected = run(ours), run(theirs)
    assert got == expected, sampler
    # the same space given to the constructor (converted there, with Ray's warning)
    assert run(OptunaSearch(space(tune), metric="loss", mode="min",
                            **SAMPLERS[sampler]())) == expected
    assert got[1].count("FAIL") == 3 and got[1].count("PRUNED") == 2  # errors, no metric
    assert all(set(c) == {"x", "q", "l", "i", "qi", "li", "c", "nested"} for c in got[0])


@pytest.mark.parametrize("sampler", SAMPLERS)
def test_an_optuna_space_and_a_define_by_run_function_suggest_rays_configs(sampler):
    RayOptunaSearch = _ray_optuna()
    dists = optuna.distributions
    given = {"x": dists.FloatDistribution(-1, 1),
             "nested": {"y": dists.FloatDistribution(1e-3, 2, log=True)},
             "c": dists.CategoricalDistribution(["a", "b"])}

    def define_by_run(trial):
        x = trial.suggest_float("x", -1, 1)
        if x > 0:
            trial.suggest_int("i", 0, 5)
        else:
            trial.suggest_categorical(name="c", choices=["a", "b"])
        return {"const": 1}

    for space_ in (given, define_by_run):
        ours = OptunaSearch(space_, metric="loss", mode="min", **SAMPLERS[sampler]())
        theirs = RayOptunaSearch(space_, metric="loss", mode="min", **SAMPLERS[sampler]())
        got, expected = run(ours), run(theirs)
        assert got == expected, (sampler, space_)
    assert all(c["const"] == 1 and ("i" in c) == (c["x"] > 0) for c in got[0])


def test_multi_objective_suggests_rays_configs():
    RayOptunaSearch = _ray_optuna()
    dists = optuna.distributions
    given = {"x": dists.FloatDistribution(-1, 1), "i": dists.IntDistribution(0, 9)}
    results = []
    for cls in (OptunaSearch, RayOptunaSearch):
        searcher = cls(given, metric=["a", "b"], mode=["min", "max"], seed=11)
        results.append(run(searcher, metric=["a", "b"]))
        assert searcher._ot_study.directions == [optuna.study.StudyDirection.MINIMIZE,
                                                 optuna.study.StudyDirection.MAXIMIZE]
    assert results[0] == results[1]


def test_points_to_evaluate_and_evaluated_rewards_as_rays():
    RayOptunaSearch = _ray_optuna()
    dists = optuna.distributions
    given = {"x": dists.FloatDistribution(-1, 1), "c": dists.CategoricalDistribution(["a", "b"])}
    points = [{"x": 0.5, "c": "b"}, {"x": -0.25, "c": "a"}]
    for extra in ({}, {"evaluated_rewards": [1.5, 0.2]}):
        got, expected = (
            run(cls(given, metric="loss", mode="min", seed=2, points_to_evaluate=points,
                    **extra), n=12)
            for cls in (OptunaSearch, RayOptunaSearch))
        assert got == expected
    assert got[0][0] != points[0] and got[1][:2] == ["COMPLETE", "COMPLETE"]  # told, not run
    first, _ = run(OptunaSearch(given, metric="loss", mode="min", points_to_evaluate=points),
                   n=3)
    assert first[:2] == points  # enqueued points come first
    with pytest.raises(ValueError, match="Dim of evaluated_rewards \\[1\\]"):
        OptunaSearch(given, metric="loss", mode="min", points_to_evaluate=points,
                     evaluated_rewards=[1])


def test_conversions_and_errors_are_rays():
    RayOptunaSearch = _ray_optuna()
    import ray.tune as rt

    assert OptunaSearch.convert_search_space(space(tune)) == \
        RayOptunaSearch.convert_search_space(space(rt))
    assert list(OptunaSearch.convert_search_space(space(tune))) == \
        list(RayOptunaSearch.convert_search_space(space(rt)))  # the order draws follow
    assert OptunaSearch.convert_search_space({"k": 1}) == {}

    def bad(t):
        return [{"g": t.grid_search([1, 2]), "x": t.uniform(0, 1)}, {"x": t.randn()},
                {"x": t.qrandn(0, 1, 0.5)}, {"x": t.sample_from(lambda spec: 1)},
                {"x": t.qlograndint(1, 100, 2)}, {"a/b": t.uniform(0, 1)}]

    for ours_space, ray_space in zip(bad(tune), bad(rt), strict=True):
        with pytest.raises(Exception) as ours:
            OptunaSearch.convert_search_space(ours_space)
        with pytest.raises(Exception) as theirs:
            RayOptunaSearch.convert_search_space(ray_space)
        assert (type(ours.value), str(ours.value)) == (type(theirs.value), str(theirs.value))


def test_unready_searchers_raise_rays_errors():
    RayOptunaSearch = _ray_optuna()
    dists = optuna.distributions
    for kwargs in ({}, {"space": {"x": dists.FloatDistribution(0, 1)}, "metric": "m"}):
        with pytest.raises(RuntimeError) as ours:
            OptunaSearch(**kwargs).suggest("t")
        with pytest.raises(RuntimeError) as theirs:
            RayOptunaSearch(**kwargs).suggest("t")
        assert str(ours.value) == str(theirs.value)
    with pytest.raises(ValueError, match="``metric`` must be defined"):
        OptunaSearch({"x": dists.FloatDistribution(0, 1)}, mode=["min", "max"])
    anonymous = OptunaSearch({"x": dists.FloatDistribution(0, 1)}, mode="max")
    assert anonymous.metric == "_metric"


def test_through_the_controllers_interface():
    """TuneConfig's metric and mode reach a bare OptunaSearch; one with its own space keeps
    it and refuses a param_space with domains (Ray's ValueError)."""
    gen = prepare_search_alg(OptunaSearch(seed=1), metric="loss", mode="min",
                             param_space={"x": tune.uniform(0, 1), "k": 3},
                             max_concurrent_trials=2)
    assert isinstance(gen, SearchGenerator) and isinstance(gen.searcher, ConcurrencyLimiter)
    gen.add_configurations({"x": tune.uniform(0, 1), "k": 3}, num_samples=4)
    configs = [gen.next_config(t) for t in ("a", "b", "c")]
    assert configs[2] is None and all(c["k"] == 3 and 0 <= c["x"] <= 1 for c in configs[:2])
    assert gen.searcher.searcher.metric == "loss"
    gen.on_trial_complete("a", {"loss": 0.5})
    assert gen.next_config("c") is not None

    own = OptunaSearch({"x": optuna.distributions.FloatDistribution(0, 1)}, metric="m",
                       mode="max")
    assert not own.set_search_properties("loss", "min", {"y": tune.uniform(0, 1)})
    with pytest.raises(ValueError, match="already instantiated with a search space"):
        prepare_search_alg(own, metric=None, mode=None, param_space={"y": tune.uniform(0, 1)})


def test_state_continues_where_it_stopped(tmp_path):
    def fresh():
        searcher = OptunaSearch(metric="loss", mode="min", seed=4)
        searcher.set_search_properties(None, None, space(tune))
        return searcher

    whole = run(fresh(), n=18)[0]
    first = fresh()
    head = run(first, n=9)[0]
    state = pickle.loads(cloudpickle.dumps(first.get_state()))
    first.save(str(tmp_path / "optuna.pkl"))

    restored = OptunaSearch()
    restored.set_state(state)
    from_file = OptunaSearch()
    from_file.restore(str(tmp_path / "optuna.pkl"))
    assert head + run(restored, n=18, start=9)[0] == whole
    assert head + run(from_file, n=18, start=9)[0] == whole


def test_intermediate_results_reach_the_optuna_trial():
    searcher = OptunaSearch({"x": optuna.distributions.FloatDistribution(0, 1)}, metric="m",
                            mode="min")
    searcher.suggest("t")
    for step, value in enumerate([3.0, 2.0, 1.5], start=1):
        searcher.on_trial_result("t", {"m": value, "training_iteration": step})
    searcher.on_trial_complete("t", {"m": 1.5})
    (trial,) = searcher._ot_study.trials
    assert trial.intermediate_values == {1: 3.0, 2: 2.0, 3: 1.5} and trial.value == 1.5


def test_without_optuna_it_imports_and_construction_says_how_to_install():
    code = ("import sys\nsys.modules['optuna'] = None\n"
            "from reference.tune.search.optuna import OptunaSearch\n"
            "try:\n    OptunaSearch()\nexcept AssertionError as e:\n    print(repr(e))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, check=True)
    assert done.stdout.strip() == \
        "AssertionError('Optuna must be installed! Run `pip install optuna`.')"


def test_signature_is_rays():
    RayOptunaSearch = _ray_optuna()

    def params(cls):
        return [(p.name, p.default) for p in inspect.signature(cls).parameters.values()]

    assert params(OptunaSearch) == params(RayOptunaSearch)
