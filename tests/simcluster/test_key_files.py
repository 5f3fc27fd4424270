"""The cluster secret's key files: another local user can neither read one nor plant one.

The attacks run as unprivileged users (uid 65534 attacks; the victim is root, whose clusters
are the prize, or uid 65533). They run in forked children that switch uid without exec,
because this interpreter's files need not be readable by those users.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest
from simcluster_users import ATTACKER, VICTIM, as_user, needs_root

import simcluster
from simcluster import NodeSpec, procfs
from simcluster._keys import key_path, read_key, write_key

ADDRESS = "127.0.0.1:41234"
PROTECTED = {name: Path(f"/proc/sys/fs/protected_{name}").read_text().strip()
             for name in ("symlinks", "regular")}

@pytest.fixture
def world_tmp(monkeypatch, tmp_path_factory):
    """A root-owned, world-writable, sticky folder (what /tmp is) as this process's temp
    dir; its parent is traversable by the unprivileged users."""
    tmp_path_factory.getbasetemp()  # pytest's own temp root stays where it was
    base = Path(tempfile.mkdtemp(prefix="simcluster-keytest-"))
    base.chmod(0o755)
    tmp = base / "tmp"
    tmp.mkdir()
    tmp.chmod(0o1777)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)  # no fallback: see test_key_folder_taken
    yield tmp
    shutil.rmtree(base, ignore_errors=True)


# -- what the attacker does ---------------------------------------------------------------------
def plant_symlink(link: str, target: str) -> None:
    os.symlink(target, link)


def precreate(paths: list[str], mode: int = 0o644) -> int:
    for path in paths:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT, mode)
        os.fchmod(fd, mode)
        os.close(fd)
    return len(paths)


def read_text(path: str) -> str:
    with open(path) as f:
        return f.read()


def plant_key(folder: str, name: str, secret: bytes) -> None:
    os.mkdir(folder, 0o755)
    os.chmod(folder, 0o755)
    precreate([os.path.join(folder, name)])
    with open(os.path.join(folder, name), "w") as f:
        f.write(secret.hex() + "\n")


# -- the attacks -----------------------------------------------------------------------------------
@needs_root
def test_planted_symlink_folder_cannot_steal_a_root_key(world_tmp):
    """The reported attack: the key folder is a symlink to a root-owned world-writable
    folder in which the attacker pre-created the key file, world-readable."""
    victim_folder = world_tmp / f"simcluster-{os.getuid()}"
    planted = world_tmp / "127.0.0.1_41234.key"
    assert as_user(ATTACKER, plant_symlink, str(victim_folder), str(world_tmp)) == ("ok", None)
    assert as_user(ATTACKER, precreate, [str(planted)]) == ("ok", 1)
    secret = os.urandom(32)
    try:
        write_key(ADDRESS, secret)
    except PermissionError as exc:
        refused = str(exc)
    else:
        refused = None
    stolen = as_user(ATTACKER, read_text, str(planted))
    assert secret.hex() not in str(stolen), (
        f"uid {ATTACKER} read the root cluster's key through {victim_folder} -> {world_tmp} "
        f"(fs.protected_*: {PROTECTED})")
    assert refused is not None and str(victim_folder) in refused and "symlink" in refused


@needs_root
@pytest.mark.slow
def test_a_root_cluster_refuses_a_planted_folder_so_no_one_runs_code_as_root(world_tmp):
    """End to end: a key file pre-created for every port, a root cluster, and the attacker
    trying to use what it reads to start a worker (which would run as root)."""
    victim_folder = world_tmp / f"simcluster-{os.getuid()}"
    low, high = map(int, Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    files = [str(world_tmp / f"127.0.0.1_{port}.key") for port in range(low, high + 1)]
    assert as_user(ATTACKER, plant_symlink, str(victim_folder), str(world_tmp)) == ("ok", None)
    assert as_user(ATTACKER, precreate, files, timeout=120) == ("ok", len(files))
    cluster = None
    try:
        try:
            cluster = simcluster.Cluster(nodes=[NodeSpec(cpus=1)],
                                         history_path=world_tmp.parent / "history.jsonl")
        except PermissionError as exc:
            assert str(victim_folder) in str(exc)
            return
        seen = as_user(ATTACKER, run_as_root_through, cluster.address,
                       str(world_tmp / cluster.address.replace(":", "_")) + ".key")
        assert seen[0] == "error", (
            f"uid {ATTACKER} read the key of the root cluster at {cluster.address} and started "
            f"a worker there that reports uid {seen[1]} (fs.protected_*: {PROTECTED})")
        raise AssertionError(f"the cluster started with its key folder planted: {seen}")
    finally:
        if cluster is not None:
            cluster.close()


def run_as_root_through(address: str, planted: str) -> int:
    secret = bytes.fromhex(read_text(planted).split()[0])
    with simcluster.connect(address, secret=secret) as client:
        return client.start_worker("node-0", os.getuid).wait(10).result


@needs_root
def test_a_non_root_victims_key_is_not_written_through_a_planted_symlink(world_tmp):
    """A non-root victim whose own world-writable folder is the symlink's target."""
    drop = world_tmp.parent / "drop"
    drop.mkdir(mode=0o777)
    drop.chmod(0o777)
    os.chown(drop, VICTIM, VICTIM)
    planted = drop / "127.0.0.1_41234.key"
    assert as_user(ATTACKER, plant_symlink, str(world_tmp / f"simcluster-{VICTIM}"),
                   str(drop)) == ("ok", None)
    assert as_user(ATTACKER, precreate, [str(planted)], 0o666) == ("ok", 1)
    secret = os.urandom(32)
    outcome = as_user(VICTIM, write_key, ADDRESS, secret)
    stolen = as_user(ATTACKER, read_text, str(planted))
    assert secret.hex() not in str(stolen), (
        f"uid {ATTACKER} read uid {VICTIM}'s key (write_key said {outcome}; "
        f"fs.protected_*: {PROTECTED})")
    assert outcome[0] == "error" and "PermissionError" in outcome[1], outcome


@needs_root
@pytest.mark.parametrize("victim", [0, VICTIM], ids=["root", "non-root"])
def test_a_planted_key_is_not_believed(world_tmp, victim):
    """A reader must not take a secret the attacker chose: with it, `connect()` would talk
    to (and unpickle from) the attacker's driver at that address."""
    evil = world_tmp / "evil"
    known = os.urandom(32)
    assert as_user(ATTACKER, plant_key, str(evil), "127.0.0.1_41234.key", known) == ("ok", None)
    assert as_user(ATTACKER, plant_symlink, str(world_tmp / f"simcluster-{victim}"),
                   str(evil)) == ("ok", None)
    outcome = as_user(victim, read_key, ADDRESS)
    assert outcome != ("ok", known), (
        f"uid {victim} believed the key uid {ATTACKER} planted (fs.protected_*: {PROTECTED})")
    assert outcome[0] == "error" and "PermissionError" in outcome[1], outcome


# -- our own files ---------------------------------------------------------------------------------
def test_key_folder_and_file_are_private_and_a_stale_file_is_replaced(world_tmp):
    first = write_key(ADDRESS, b"\x01" * 32)
    assert first == key_path(ADDRESS)
    assert stat.S_IMODE(first.parent.lstat().st_mode) == 0o700
    assert stat.S_IMODE(first.lstat().st_mode) == 0o600
    first.chmod(0o644)  # a stale file of our own, readable by others: never reused
    second = write_key(ADDRESS, b"\x02" * 32)
    assert stat.S_IMODE(second.lstat().st_mode) == 0o600
    assert read_key(ADDRESS) == b"\x02" * 32


def test_a_loose_key_folder_or_key_file_is_refused(world_tmp):
    write_key(ADDRESS, b"\x01" * 32)
    path = key_path(ADDRESS)
    path.chmod(0o640)
    with pytest.raises(PermissionError, match="other users may read or change it"):
        read_key(ADDRESS)
    path.chmod(0o600)
    path.parent.chmod(0o755)
    with pytest.raises(PermissionError, match="chmod 700"):
        read_key(ADDRESS)
    with pytest.raises(PermissionError, match="chmod 700"):
        write_key(ADDRESS, b"\x01" * 32)
    path.parent.chmod(0o700)
    assert read_key(ADDRESS) == b"\x01" * 32


def test_a_missing_key_says_no_cluster_runs_there(world_tmp):
    with pytest.raises(ConnectionError, match="no simcluster is running"):
        read_key(ADDRESS)


# -- litter: a dead owner's key is removed by the next cluster ----------------------------------
def dead_owner() -> tuple[int, str]:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    start = procfs.start_time(child.pid)
    child.wait()
    return child.pid, start


DRIVER = textwrap.dedent("""
    import sys, time
    from simcluster import Cluster, NodeSpec
    cluster = Cluster(nodes=[NodeSpec(cpus=1)], history_path=sys.argv[1])
    print(cluster.address, flush=True)
    time.sleep(300)
""")


@pytest.mark.slow
def test_a_sigkilled_drivers_key_is_removed_by_the_next_cluster(world_tmp, make_cluster):
    driver = subprocess.Popen([sys.executable, "-c", DRIVER, str(world_tmp.parent / "h.jsonl")],
                              stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "TMPDIR": str(world_tmp)})
    try:
        address = driver.stdout.readline().strip()
        assert address, "the driver did not start its cluster"
        left = key_path(address)
        assert left.exists()
        driver.kill()
        driver.wait(10)
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.wait()
        driver.stdout.close()
    assert left.exists()  # nothing else removes it
    other = make_cluster(NodeSpec(cpus=1))
    assert not left.exists(), f"{left} of the dead driver is still there"
    assert key_path(other.address).exists()
    other.close()
    assert os.listdir(left.parent) == []


def test_keys_of_dead_owners_are_removed_and_live_ones_kept(world_tmp):
    live = write_key("127.0.0.1:41001", b"\x01" * 32)
    pid, start = dead_owner()
    dead = live.with_name("127.0.0.1_41002.key")
    dead.write_text(f"{'02' * 32}\n{pid} {start}\n")
    dead.chmod(0o600)
    write_key("127.0.0.1:41003", b"\x03" * 32)
    assert sorted(p.name for p in live.parent.iterdir()) == ["127.0.0.1_41001.key",
                                                            "127.0.0.1_41003.key"]
    assert read_key("127.0.0.1:41001") == b"\x01" * 32
