"""Another user took the key folder's name first (`<tmp>/simcluster-<uid>`, guessable): the
error says who holds it and how to get around it, and where `$XDG_RUNTIME_DIR` names a
private folder of the user's, the keys live there instead (`simcluster._keys`)."""

from __future__ import annotations

import os
import tempfile

import pytest
from simcluster_users import ATTACKER, VICTIM, as_user, needs_root, remove, shared_base

from simcluster._keys import key_path, read_key, write_key

ADDRESS = "127.0.0.1:41235"
SECRET = b"\x05" * 32


@pytest.fixture
def world_tmp(monkeypatch):
    """A root-owned, world-writable, sticky temp dir (what /tmp is), in a folder others can
    traverse; no XDG_RUNTIME_DIR unless a test sets one."""
    base = shared_base()
    tmp = base / "tmp"
    tmp.mkdir()
    tmp.chmod(0o1777)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    yield tmp
    remove(base)


def take_name(folder: str, mode: int) -> None:
    os.mkdir(folder)
    os.chmod(folder, mode)


def runtime_dir(world_tmp, uid: int, mode: int = 0o700) -> str:
    folder = world_tmp.parent / f"run-user-{uid}"
    folder.mkdir()
    folder.chmod(mode)
    os.chown(folder, uid, uid)
    return str(folder)


def store_and_load(runtime: str | None):
    """As the victim: write a key, read it back; (where it went, what key_path says)."""
    if runtime is not None:
        os.environ["XDG_RUNTIME_DIR"] = runtime
    path = write_key(ADDRESS, SECRET)
    assert read_key(ADDRESS) == SECRET
    return str(path), str(key_path(ADDRESS))


@needs_root
def test_a_taken_name_is_explained_not_a_bare_errno(world_tmp):
    taken = world_tmp / f"simcluster-{VICTIM}"
    assert as_user(ATTACKER, take_name, str(taken), 0o700) == ("ok", None)
    outcome = as_user(VICTIM, store_and_load, None)
    assert outcome[0] == "error" and outcome[1].startswith("PermissionError"), outcome
    message = outcome[1]
    for part in (str(taken), f"of uid {ATTACKER}", "mode 700", "another user",
                 "TMPDIR", "XDG_RUNTIME_DIR"):
        assert part in message, f"{part!r} missing from {message!r}"


@needs_root
@pytest.mark.parametrize("victim", [VICTIM, 0], ids=["non-root", "root"])
def test_keys_move_to_a_safe_runtime_folder_when_the_name_is_taken(world_tmp, victim):
    taken = world_tmp / f"simcluster-{victim}"
    assert as_user(ATTACKER, take_name, str(taken), 0o755) == ("ok", None)
    runtime = runtime_dir(world_tmp, victim)
    outcome = as_user(victim, store_and_load, runtime)
    expected = os.path.join(runtime, "simcluster", "127.0.0.1_41235.key")
    assert outcome == ("ok", (expected, expected)), outcome
    assert os.listdir(taken) == []  # nothing went into the attacker's folder


@needs_root
def test_an_unsafe_runtime_folder_is_not_used(world_tmp):
    taken = world_tmp / f"simcluster-{VICTIM}"
    assert as_user(ATTACKER, take_name, str(taken), 0o755) == ("ok", None)
    runtime = runtime_dir(world_tmp, VICTIM, mode=0o755)
    outcome = as_user(VICTIM, store_and_load, runtime)
    assert outcome[0] == "error", outcome
    assert f"XDG_RUNTIME_DIR={runtime} is no folder of yours with mode 0700" in outcome[1]
    assert not os.path.exists(os.path.join(runtime, "simcluster"))
