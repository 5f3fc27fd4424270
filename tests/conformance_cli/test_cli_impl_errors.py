"""A bad `--impl` is one clear error and a non-zero exit, from `python -m conformance run`
and from `pytest conformance/`, before anything is collected; a missing Ray says how to
install it. The commands run for real, in child processes."""

import pytest
from conformance_cli_run import hidden_ray, run

from conformance import adapters

UNKNOWN = ("--impl 'nosuch': no such implementation; expected 'reference', 'ray' or "
           "'module:factory'")
RAY_FIX = 'pip install "trainspec[ray]"'


def _one_clear_error(result, text):
    assert result.returncode != 0, result.stdout
    output = result.stdout + result.stderr
    assert text in output, output
    assert "Traceback" not in output, output
    assert output.count(text) == 1, output
    assert "passed" not in output and "failed" not in output and "FAIL" not in output, output


def test_load_refuses_an_unknown_name_by_the_option_and_the_allowed_values():
    with pytest.raises(adapters.ImplementationError, match=UNKNOWN.replace("(", r"\(")):
        adapters.resolve("nosuch")
    with pytest.raises(ModuleNotFoundError,
                       match=r"--impl 'no_such_module:make'.*cannot import module"):
        adapters.load("no_such_module:make")
    with pytest.raises(ValueError, match=r"--impl 'os:nope'.*no callable 'nope'"):
        adapters.load("os:nope")


def test_run_refuses_an_unknown_impl_before_starting_pytest():
    result = run("run", "--impl", "nosuch")
    _one_clear_error(result, UNKNOWN)
    assert result.returncode == 2
    assert "trainspec conformance report" not in result.stdout


@pytest.mark.slow
def test_pytest_refuses_an_unknown_impl_at_configure_time():
    result = run("-m", "pytest", "conformance/", "--impl", "nosuch", "-q",
                 "-p", "no:cacheprovider")
    _one_clear_error(result, UNKNOWN)
    assert result.returncode == 4  # pytest's usage error
    assert "collected" not in result.stdout and "ERROR" not in result.stdout, result.stdout


def test_run_with_ray_missing_says_how_to_install_it(tmp_path):
    result = run("run", "--impl", "ray", env=hidden_ray(tmp_path))
    _one_clear_error(result, RAY_FIX)
    assert "--impl 'ray': ray.train cannot be imported" in result.stderr
    assert "ray[train]==2.60.0" in result.stderr


@pytest.mark.slow
def test_pytest_with_ray_missing_says_how_to_install_it(tmp_path):
    result = run("-m", "pytest", "conformance/", "--impl", "ray", "-q", "-p",
                 "no:cacheprovider", env=hidden_ray(tmp_path))
    _one_clear_error(result, RAY_FIX)
    assert result.returncode == 4
