"""The netns provider's state folder is this user's own (`simcluster-netns-<uid>`, 0700, in
/run or the temp dir) and a planted one is refused: its files name what a cleanup deletes
as root (`simcluster.providers.netns.state_dir`). No namespaces are made here."""

from __future__ import annotations

import os
import stat
import tempfile

import pytest
from simcluster_users import ATTACKER, VICTIM, as_user, needs_root, remove, shared_base

from simcluster.providers.netns import state_dir


@pytest.fixture
def world_tmp(monkeypatch):
    base = shared_base()
    tmp = base / "tmp"
    tmp.mkdir()
    tmp.chmod(0o1777)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    yield tmp
    remove(base)


def plant(folders: list[str]) -> None:
    for folder in folders:
        os.mkdir(folder)
        os.chmod(folder, 0o777)


def test_the_state_folder_is_this_users_and_private(world_tmp):
    folder = state_dir(str(world_tmp))
    assert folder == world_tmp / f"simcluster-netns-{os.getuid()}"
    st = folder.lstat()
    assert st.st_uid == os.getuid() and stat.S_IMODE(st.st_mode) == 0o700


@needs_root
def test_a_planted_state_folder_in_the_temp_dir_is_refused(world_tmp):
    """A user without a writable /run gets the temp dir, where anyone may take a name."""
    names = [str(world_tmp / "simcluster"), str(world_tmp / f"simcluster-netns-{VICTIM}")]
    assert as_user(ATTACKER, plant, names) == ("ok", None)
    outcome = as_user(VICTIM, lambda: str(state_dir()))
    assert outcome[0] == "error", f"uid {VICTIM} kept its netns state in {outcome[1]}"
    assert names[1] in outcome[1] and f"belongs to uid {ATTACKER}" in outcome[1], outcome
    assert "TMPDIR" in outcome[1]  # the fix
