"""`rag serve` under a file-size limit we can move from outside: a full disk without mount rights.

SIGUSR2 sets RLIMIT_FSIZE to 1 byte (every write that grows a file fails: EFBIG, which SQLite
reports as disk full / I/O error); SIGUSR1 lifts it again (space freed). SIGXFSZ is ignored so a
write past the limit fails instead of killing the process. Usage: python -m tests.fakes.fsize_serve PORT
"""
from __future__ import annotations

import resource
import signal
import sys


def _limit(nbytes):
    resource.setrlimit(resource.RLIMIT_FSIZE, (nbytes, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))


def main() -> None:
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    signal.signal(signal.SIGUSR2, lambda *_: _limit(1))
    signal.signal(signal.SIGUSR1, lambda *_: _limit(resource.RLIM_INFINITY))
    from rag_app.cli.main import app

    sys.argv = ["rag", "serve", "--port", sys.argv[1]]
    app()


if __name__ == "__main__":
    main()
