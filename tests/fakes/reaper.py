"""Clean-up that outlives the test process: a detached watcher runs a command once its owner is gone.

A test's own clean-up runs only if its process lives. An xdist worker killed by the kernel's OOM killer
left its three `rag serve` children (~900 MB each) and its throwaway PostgreSQL clusters running for the
rest of the CI run, on a machine already short of memory. Each resource started here gets a watcher;
normal clean-up cancels it, so it never acts on a pid the system has since given to someone else."""
from __future__ import annotations

import os
import subprocess

POLL_S = 2
# $0: the owner's pid; "$@": the command. `kill -0` fails once the owner is gone (or is a zombie reaped).
_WATCH = f'while kill -0 "$0" 2>/dev/null; do sleep {POLL_S}; done; exec "$@"'


class Reaper:
    def __init__(self, command: list[str], owner_pid: int | None = None):
        """Run `command` once `owner_pid` (default: this process) has exited, unless cancelled first."""
        self.proc = subprocess.Popen(["sh", "-c", _WATCH, str(owner_pid or os.getpid()), *command],
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL, start_new_session=True)

    def cancel(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)
