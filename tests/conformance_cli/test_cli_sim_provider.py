"""`--sim-provider` picks where the reference adapter's simcluster nodes run; a provider that
cannot run here, or the option with another implementation, is one clear usage error from
`python -m conformance run`, `pytest conformance/` and `python -m conformance matrix`,
before any check runs. The commands run for real, in child processes."""

import pytest
from conformance_cli_run import run

from conformance.adapters.reference_adapter import SIM_PROVIDER_ENV, ReferenceAdapter

NO_ENGINE = {"DOCKER_HOST": "unix:///nonexistent/docker.sock"}
CANNOT = "--sim-provider 'docker' cannot run here: no Docker engine answered at " \
         "unix:///nonexistent/docker.sock"


def _one_clear_error(result, text):
    output = result.stdout + result.stderr
    assert text in output and output.count(text) == 1, output
    assert "Traceback" not in output and "passed" not in output, output


def test_run_refuses_a_provider_that_cannot_run_here():
    result = run("run", "--impl", "reference", "--sim-provider", "docker", env=NO_ENGINE)
    _one_clear_error(result, CANNOT)
    assert result.returncode == 2


def test_run_refuses_the_option_for_another_implementation():
    result = run("run", "--impl", "ray", "--sim-provider", "netns")
    _one_clear_error(result, "--sim-provider 'netns': only --impl reference runs on simcluster "
                             "(this run: --impl ray)")
    assert result.returncode == 2


def test_run_refuses_an_unknown_provider_naming_the_choices():
    result = run("run", "--sim-provider", "vm")
    assert result.returncode == 2
    assert "--sim-provider: invalid choice: 'vm' (choose from process, netns, docker)" in \
        result.stderr.replace("'process', 'netns', 'docker'", "process, netns, docker")


@pytest.mark.slow
def test_pytest_refuses_a_provider_that_cannot_run_here_at_configure_time():
    result = run("-m", "pytest", "conformance/", "--impl", "reference", "--sim-provider",
                 "docker", "-q", "-p", "no:cacheprovider", env=NO_ENGINE)
    _one_clear_error(result, CANNOT)
    assert result.returncode == 4  # pytest's usage error
    assert "collected" not in result.stdout


def test_matrix_refuses_a_provider_that_cannot_run_here():
    result = run("matrix", "--slice", "ci", "--sim-provider", "docker", env=NO_ENGINE)
    assert result.returncode == 2
    assert CANNOT in result.stderr and "pass" not in result.stdout


def test_the_adapter_takes_the_provider_from_the_option_or_the_environment(monkeypatch):
    monkeypatch.delenv(SIM_PROVIDER_ENV, raising=False)
    assert ReferenceAdapter().provider == "process"
    monkeypatch.setenv(SIM_PROVIDER_ENV, "docker")
    adapter = ReferenceAdapter()
    assert adapter.provider == "docker" and adapter.describe().endswith("sim-provider=docker")
    assert ReferenceAdapter(provider="netns").provider == "netns"


@pytest.mark.slow
def test_accelerator_checks_say_in_the_report_that_their_gpus_were_simulated(tmp_path):
    import json

    # one check: one process (the default splits the checks over a process per CPU, each
    # collecting every check file)
    result = run("run", "--impl", "reference", "--out", str(tmp_path), "--progress", "off",
                 "--workers", "1", "--", "-k", "check_each_gpu_worker_sees_its_own_gpus")
    assert result.returncode == 0, result.stdout + result.stderr
    rep = json.loads((tmp_path / "reference.json").read_text())
    assert rep["clauses"]["accelerator.gpu-ids"]["status"] == "pass"
    assert rep["clauses"]["accelerator.gpu-ids"]["hardware"] == "simulated"
    assert "hardware: simulated" in (tmp_path / "reference.md").read_text()
