"""A history is never written through a link someone else planted: the state folder and
every folder above it must be ones no other user can change, and the file is made with
O_EXCL|O_NOFOLLOW (`simcluster._state`, `simcluster._private_dir`).

The attacker (uid 65534) knows the name the next history will get (time, pid, start
time, namespace), so it plants dangling links at the names of the next few seconds, each
leading to a file the victim (root) would create for it."""

from __future__ import annotations

import os
import stat
import time

import pytest
from simcluster_users import ATTACKER, as_user, needs_root, remove, shared_base

from simcluster import History, procfs
from simcluster._owner import pid_namespace
from simcluster._private_dir import UnsafeFolderError


def next_names(seconds: int = 4) -> list[str]:
    """The names this process's next history may get (with and without the namespace)."""
    me, start, now = os.getpid(), procfs.start_time(os.getpid()), time.time()
    names = []
    for s in range(seconds):
        stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(now + s))
        names += [f"{stamp}-{me}-{start}.jsonl", f"{stamp}-{me}-{start}-ns{pid_namespace()}.jsonl"]
    return names


def plant(folders: list[str], links: dict[str, str], modes: int = 0o777) -> int:
    """As the attacker: make `folders` (open to all), then `links` {link: target}."""
    for folder in folders:
        os.mkdir(folder)
        os.chmod(folder, modes)
    for link, target in links.items():
        os.symlink(target, link)
    return len(links)


@pytest.fixture
def base(monkeypatch):
    for name in ("SIMCLUSTER_STATE_DIR", "XDG_STATE_HOME"):
        monkeypatch.delenv(name, raising=False)
    made = shared_base()
    yield made
    remove(made)


def shared_folder(base, mode: int):
    w = base / "w"
    w.mkdir()
    w.chmod(mode)
    return w


@needs_root
@pytest.mark.parametrize("case", ["world-writable", "sticky-theirs", "link-on-the-way"])
def test_a_root_driver_creates_no_history_through_planted_links(base, monkeypatch, case):
    victim = base / "victim.txt"
    if case == "world-writable":  # root's, 0777, not sticky: anyone renames and plants
        w = shared_folder(base, 0o777)
        history, expected = w / "history", (str(w), "plant links")
        monkeypatch.setenv("SIMCLUSTER_STATE_DIR", str(w))
        folders = [str(history)]
    elif case == "sticky-theirs":  # /tmp-like; the history folder is the attacker's
        w = shared_folder(base, 0o1777)
        history, expected = w / "history", (str(w / "history"), f"uid {ATTACKER}")
        monkeypatch.setenv("SIMCLUSTER_STATE_DIR", str(w))
        folders = [str(history)]
    else:  # HOME in a sticky folder; its name is a link the attacker planted
        w = shared_folder(base, 0o1777)
        theirs = w / "theirs"
        history = theirs / ".local" / "state" / "simcluster" / "history"
        folders = [str(theirs), *(str(p) for p in reversed(history.parents) if theirs in p.parents),
                   str(history)]
        expected = (str(w / "home"), f"symlink of uid {ATTACKER}")
        monkeypatch.setenv("HOME", str(w / "home"))
    links = {str(history / name): str(victim) for name in next_names()}
    if case == "link-on-the-way":
        links[str(w / "home")] = str(theirs)
    assert as_user(ATTACKER, plant, folders, links) == ("ok", len(links))
    try:
        made = History()
    except PermissionError as exc:
        refused = str(exc)
    else:
        made.close()
        refused = None
    assert not victim.exists(), (
        f"[{case}] the history was written through a link uid {ATTACKER} planted: {victim}")
    assert refused is not None and all(part in refused for part in expected), (case, refused)
    assert "history_path=" in refused  # the fix


def test_a_dangling_link_at_the_next_history_name_is_not_followed(tmp_path, monkeypatch):
    """In a folder of ours (defence in depth: O_EXCL|O_NOFOLLOW)."""
    state = tmp_path / "state"
    monkeypatch.setenv("SIMCLUSTER_STATE_DIR", str(state))
    (state / "history").mkdir(parents=True, mode=0o700)
    victim = tmp_path / "victim.txt"
    for name in next_names():
        (state / "history" / name).symlink_to(victim)
    history = History()
    try:
        history.record("cluster_stop")
    finally:
        history.close()
    assert not victim.exists()
    assert stat.S_ISREG(history.path.lstat().st_mode)
    assert History.read(history.path)[-1]["event"] == "cluster_stop"


def test_a_history_path_that_is_a_link_is_refused(tmp_path):
    victim, link = tmp_path / "victim.txt", tmp_path / "history.jsonl"
    link.symlink_to(victim)
    with pytest.raises(PermissionError, match=r"history_path=.*history\.jsonl.* is a symlink"):
        History(link)
    assert not victim.exists()


def test_a_loose_history_folder_of_ours_names_the_fix(tmp_path, monkeypatch):
    monkeypatch.setenv("SIMCLUSTER_STATE_DIR", str(tmp_path / "state"))
    (tmp_path / "state" / "history").mkdir(parents=True)
    (tmp_path / "state" / "history").chmod(0o777)
    with pytest.raises(UnsafeFolderError, match=r"history has mode 777, so other users may "
                                                r"write it.*chmod go-w"):
        History()
