"""The keeper of `simcluster run`'s script: the script, and all it starts, end with the run.

    simcluster run  ->  keeper (`python -m simcluster.cli.keeper FD CMD...`)  ->  CMD

Design note. `simcluster run` may be SIGKILLed, and then nothing of it can act: a script
it started itself would live on under init, with its children, and a fit inside would wait
for a cluster that is gone. So the script runs below a small process whose only work is to
end it, which needs no cooperation from the script:

- The keeper watches a pipe whose write end only `simcluster run` holds (non-inheritable,
  so no other process keeps it open). End of file means the run is over, whatever ended
  it: the keeper SIGKILLs the script and everything below it, and exits.
- It is a child subreaper, so all the script starts stays below it (a daemon that forked
  twice into a session of its own is re-parented to the keeper, not to init), and the kill
  (`_proc.kill_descendants`, which also catches a process hopping pids) finds all of it.
- The script gets SIGKILL if the keeper itself dies (PR_SET_PDEATHSIG, armed in the child
  between fork and exec; the keeper is single-threaded, so that `preexec_fn` is safe here,
  where it would not be in `simcluster run`, whose cluster runs threads).
- SIGINT and SIGTERM are passed on to the script (`simcluster run` sends them here).
- When the script exits, what it left behind is killed and the keeper exits as the script
  did (the same code, or killed by the same signal), which `simcluster run` reports.

The pipe also brings the one line that starts the script, its SIMCLUSTER_ADDRESS, written
once the cluster is up: the keeper starts, and imports, while the cluster does.
"""

from __future__ import annotations

import os
import resource
import selectors
import signal
import subprocess
import sys

from .. import _proc


class Keeper:
    """`simcluster run`'s end: start the keeper now, the script with `start(address)`."""

    def __init__(self, command: list[str]):
        read_end, self._lifeline = os.pipe()
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "simcluster.cli.keeper", str(read_end), *command],
                pass_fds=(read_end,), process_group=0)  # a Ctrl-C reaches it only from here
        except BaseException:
            os.close(self._lifeline)
            raise
        finally:
            os.close(read_end)

    def start(self, address: str) -> None:
        os.write(self._lifeline, f"{address}\n".encode())

    def release(self) -> None:
        """Let go of the lifeline: the keeper SIGKILLs the script's tree (if it still runs)
        and exits. Safe in a signal handler."""
        if self._lifeline is not None:
            fd, self._lifeline = self._lifeline, None
            os.close(fd)

    def end(self, timeout_s: float = 10.0) -> int:
        """`release`, then wait for the keeper; its exit status."""
        self.release()
        try:
            return self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()  # the script gets its parent-death signal
            return self.proc.wait()


def main() -> None:
    lifeline, command = int(sys.argv[1]), sys.argv[2:]
    pending: list[int] = []
    script: list[subprocess.Popen] = []

    def forward(sig, _frame):
        if script:
            script[0].send_signal(sig)
        else:
            pending.append(sig)

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, forward)
    _proc.become_subreaper()
    address = _read_line(lifeline)
    if address is None:
        os._exit(0)  # the run ended before its cluster was up
    me = os.getpid()
    env = {**os.environ, "SIMCLUSTER_ADDRESS": address}
    try:
        script.append(subprocess.Popen(command, env=env,
                                       preexec_fn=lambda: _proc.die_with_parent(me)))
    except OSError as exc:
        print(f"simcluster run: cannot start {command}: {exc}", file=sys.stderr)
        os._exit(127)
    for sig in pending:
        script[0].send_signal(sig)
    _watch(script[0], lifeline)


def _read_line(fd: int) -> str | None:
    line = b""
    while not line.endswith(b"\n"):
        chunk = os.read(fd, 1)
        if not chunk:
            return None
        line += chunk
    return line.decode().strip()


def _watch(script: subprocess.Popen, lifeline: int) -> None:
    sel = selectors.DefaultSelector()
    sel.register(os.pidfd_open(script.pid), selectors.EVENT_READ, "exit")
    sel.register(lifeline, selectors.EVENT_READ, "lifeline")
    while True:
        for key, _ in sel.select():
            if key.data == "lifeline" and not os.read(lifeline, 1 << 12):
                script.kill()  # the run is gone: the script goes, then all it started
                _finish(script.wait())
            elif key.data == "exit":
                _finish(script.wait())


def _finish(code: int) -> None:
    """Kill what the script left behind, then exit as it did (never returns)."""
    _proc.kill_descendants([os.getpid()])
    if code >= 0:
        os._exit(code)
    sig = -code
    resource.setrlimit(resource.RLIMIT_CORE, (0, resource.getrlimit(resource.RLIMIT_CORE)[1]))
    if sig not in (signal.SIGKILL, signal.SIGSTOP):
        signal.signal(sig, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, [sig])
    os.kill(os.getpid(), sig)
    os._exit(128 + sig)  # a signal whose default action does not end a process


if __name__ == "__main__":
    main()
