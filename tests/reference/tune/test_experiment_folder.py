"""An experiment folder another user owns is refused before Tune writes anything in it."""

import os

import pytest

import reference.tune as tune
from reference._folder_safety import UnsafeRunFolder


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give a folder to another user")
def test_an_experiment_folder_of_another_user_is_refused(tmp_path):
    (tmp_path / "exp").mkdir()
    os.chown(tmp_path / "exp", 65534, 65534)
    (tmp_path / "exp" / "tuner.pkl").symlink_to(tmp_path / "mine.txt")
    (tmp_path / "mine.txt").write_bytes(b"keep me")
    tuner = tune.Tuner(lambda config: None, run_config=tune.RunConfig(
        storage_path=str(tmp_path), name="exp"))
    with pytest.raises(UnsafeRunFolder, match=r"the experiment folder .* belongs to .*65534"):
        tuner.fit()
    assert (tmp_path / "mine.txt").read_bytes() == b"keep me"
    assert sorted(os.listdir(tmp_path / "exp")) == ["tuner.pkl"]
