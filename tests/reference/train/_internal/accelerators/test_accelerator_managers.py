"""Accelerator managers: visible-device variables, detection, what a worker holds."""

from __future__ import annotations

import pytest

from reference.train._internal import accelerators as acc
from reference.train._internal.accelerators import cuda, rocm, tpu


@pytest.mark.parametrize("value, ids", [
    (None, None), ("", []), ("NoDevFiles", []), ("0", ["0"]), ("3,1", ["3", "1"]),
    (" 0, 2 ", ["0", "2"]),
])
def test_parse_ids(value, ids):
    assert acc.parse_ids(value) == ids


@pytest.mark.parametrize("manager, resource, var", [
    (acc.CPUManager, "CPU", None),
    (acc.CUDAManager, "GPU", "CUDA_VISIBLE_DEVICES"),
    (acc.ROCmManager, "GPU", "HIP_VISIBLE_DEVICES"),
    (acc.TPUManager, "TPU", "TPU_VISIBLE_CHIPS"),
])
def test_resource_name_and_visible_devices_variable(manager, resource, var):
    assert (manager.resource_name, manager.visible_devices_var) == (resource, var)
    if var is None:
        assert manager.visible_ids({}) is None
        assert manager.visible_devices_env([0]) == {}
    else:
        assert manager.visible_ids({var: "2,0"}) == ["2", "0"]
        assert manager.visible_ids({}) is None


@pytest.mark.parametrize("manager", [acc.CUDAManager, acc.ROCmManager])
def test_gpu_visible_env_and_noset(manager):
    assert manager.visible_devices_env([1, 3], environ={}) == {
        manager.visible_devices_var: "1,3"}
    assert manager.visible_devices_env([1], environ={manager.noset_var: "1"}) == {}


def test_rocm_refuses_rocr_visible_devices_alone():
    with pytest.raises(RuntimeError, match="use HIP_VISIBLE_DEVICES instead of "
                                           "ROCR_VISIBLE_DEVICES"):
        acc.ROCmManager.visible_ids({"ROCR_VISIBLE_DEVICES": "0"})
    both = {"ROCR_VISIBLE_DEVICES": "0", "HIP_VISIBLE_DEVICES": "1"}
    assert acc.ROCmManager.visible_ids(both) == ["1"]


def test_cuda_detection_counts_driver_entries(tmp_path, monkeypatch):
    monkeypatch.setattr(cuda, "PROC_GPUS", str(tmp_path / "missing"))
    assert acc.CUDAManager.num_node_devices() == 0
    for bus in ("0000:01:00.0", "0000:02:00.0"):
        (tmp_path / bus).mkdir()
    monkeypatch.setattr(cuda, "PROC_GPUS", str(tmp_path))
    assert acc.CUDAManager.num_node_devices() == 2
    assert acc.CUDAManager.is_available()


def test_rocm_detection_counts_gpu_nodes_of_the_kfd_topology(tmp_path, monkeypatch):
    for node, simds in (("0", 0), ("1", 304), ("2", 304)):
        (tmp_path / node).mkdir()
        (tmp_path / node / "properties").write_text(f"cpu_cores_count 0\nsimd_count {simds}\n")
    monkeypatch.setattr(rocm, "KFD_NODES", str(tmp_path))
    assert acc.ROCmManager.num_node_devices() == 2


def test_tpu_detection_ignores_an_accel_directory(tmp_path, monkeypatch):
    chips = [tmp_path / "accel0", tmp_path / "accel1"]
    for chip in chips:
        chip.write_text("")
    (tmp_path / "accel").mkdir()  # what newer NVIDIA drivers create
    monkeypatch.setattr(tpu.glob, "glob", lambda pattern: [str(p) for p in
                                                           tmp_path.glob("accel*")])
    assert acc.TPUManager.num_node_devices() == 2


def test_detect_falls_back_to_cpu(monkeypatch):
    for manager in (acc.TPUManager, acc.CUDAManager, acc.ROCmManager):
        monkeypatch.setattr(manager, "num_node_devices", classmethod(lambda cls: 0))
    assert acc.detect() is acc.CPUManager
    monkeypatch.setattr(acc.ROCmManager, "num_node_devices", classmethod(lambda cls: 1))
    assert acc.detect() is acc.ROCmManager
    assert acc.CPUManager.num_node_devices() >= 1


def test_get_manager_by_node_accelerator_name():
    assert acc.get_manager(None) is acc.CPUManager
    assert acc.get_manager("CUDA") is acc.CUDAManager
    assert acc.get_manager("ROCm") is acc.ROCmManager
    assert acc.get_manager("TPU") is acc.TPUManager
    with pytest.raises(ValueError, match=r"accelerator='NPU': expected one of"):
        acc.get_manager("NPU")


@pytest.mark.parametrize("accelerator, ids, expected", [
    ("CUDA", (2,), (acc.CUDAManager, ["2"])),
    ("ROCm", (0, 1), (acc.ROCmManager, ["0", "1"])),
    ("TPU", (0, 1, 2, 3), (acc.TPUManager, ["0", "1", "2", "3"])),
    ("CUDA", (), (acc.CPUManager, [])),  # on a GPU node without a GPU
    (None, (), (acc.CPUManager, [])),
])
def test_assignment_round_trip(accelerator, ids, expected):
    env = acc.assignment_env(accelerator, ids)
    assert acc.current_assignment(env) == expected


def test_current_assignment_without_variables_is_cpu():
    assert acc.current_assignment({}) == (acc.CPUManager, [])
