"""A throwaway PostgreSQL cluster from Debian's binaries (initdb + pg_ctl into a temp dir, 127.0.0.1 on
a free port), or the server named by RAG_TEST_POSTGRES_URL. Each test gets a fresh database.

initdb refuses to run as root, so as root the cluster belongs to a non-root user (`postgres`, which
Debian's package creates, else `nobody`) and its commands run through `runuser`."""
from __future__ import annotations

import glob
import os
import pwd
import shlex
import shutil
import signal
import socket
import subprocess
import tempfile
import uuid
from pathlib import Path

from tests.fakes.reaper import Reaper


def find_bin(name: str) -> str | None:
    for d in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True):  # newest major first
        if os.access(f"{d}/{name}", os.X_OK):
            return f"{d}/{name}"
    return shutil.which(name)


def binaries_missing() -> str | None:
    missing = [b for b in ("initdb", "pg_ctl", "postgres") if find_bin(b) is None]
    return f"PostgreSQL binaries not found: {', '.join(missing)} (apt-get install postgresql)" if missing else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PgCluster:
    def __init__(self, admin_url: str | None = None, *, durable: bool = False):
        """`durable`: fsync and full-page writes on, as a production server runs (benchmarks);
        tests run without them (a throwaway cluster need not survive a power cut)."""
        self.durable = durable
        self.external = admin_url is not None
        self.admin_url = admin_url
        self.dir: Path | None = None
        self.port: int | None = None
        self.user = None
        self.databases: list[str] = []
        self._reaper: Reaper | None = None

    # -- lifecycle ------------------------------------------------------------------------------
    def _owner_args(self, args: list[str]) -> list[str]:
        return ["runuser", "-u", self.user, "--", *args] if os.geteuid() == 0 else args

    def _as_owner(self, args: list[str], **kw) -> subprocess.CompletedProcess:
        return subprocess.run(self._owner_args(args), check=True, capture_output=True, text=True, timeout=120, **kw)

    def start(self) -> "PgCluster":
        if self.external:
            return self
        if self.dir is None:
            self.user = pwd.getpwuid(os.geteuid()).pw_name
            if os.geteuid() == 0:
                self.user = "postgres" if _has_user("postgres") else "nobody"
            self.dir = Path(tempfile.mkdtemp(prefix="rag-pg-"))
            os.chmod(self.dir, 0o755)
            if os.geteuid() == 0:
                pw = pwd.getpwnam(self.user)
                os.chown(self.dir, pw.pw_uid, pw.pw_gid)
            self._as_owner([find_bin("initdb"), "-D", str(self.dir / "data"), "-U", "postgres", "--auth=trust",
                            "-E", "UTF8", "--locale=C", *([] if self.durable else ["--no-sync"])])
            self.port = _free_port()
            self.admin_url = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"
        opts = f"-c listen_addresses=127.0.0.1 -p {self.port} -k {self.dir} -c max_connections=200"
        if not self.durable:
            opts += " -c fsync=off -c full_page_writes=off"
        self._as_owner([find_bin("pg_ctl"), "-D", str(self.dir / "data"), "-l", str(self.dir / "log"),
                        "-o", opts, "-w", "-t", "60", "start"])
        if self._reaper is None:  # pg_ctl detaches the server: it would outlive a killed test process
            stop = " ".join(map(shlex.quote, self._owner_args([find_bin("pg_ctl"), "-D", str(self.dir / "data"),
                                                               "-m", "immediate", "-w", "stop"])))
            self._reaper = Reaper(["sh", "-c", f"{stop}; rm -rf {shlex.quote(str(self.dir))}"])
        return self

    def stop(self, mode: str = "fast") -> None:
        if self.external or self.dir is None:
            return
        self._as_owner([find_bin("pg_ctl"), "-D", str(self.dir / "data"), "-m", mode, "-w", "stop"])

    def _pids(self) -> list[int]:
        """The postmaster and every process it started (backends, checkpointer, WAL writer...)."""
        postmaster = int((self.dir / "data" / "postmaster.pid").read_text().split()[0])
        children = subprocess.run(["pgrep", "-P", str(postmaster)], capture_output=True, text=True).stdout.split()
        return [postmaster, *map(int, children)]

    def freeze(self) -> None:
        """SIGSTOP the whole server: its kernel still accepts connections and acknowledges packets, but
        nothing answers (a hung host, a VM paused for migration). `thaw()` resumes it."""
        for pid in self._pids():
            os.kill(pid, signal.SIGSTOP)

    def thaw(self) -> None:
        for pid in self._pids():
            os.kill(pid, signal.SIGCONT)

    def destroy(self) -> None:
        if self.external:  # someone else's server: leave it as we found it
            import psycopg
            with psycopg.connect(self.admin_url, autocommit=True) as c:
                for name in self.databases:
                    c.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            return
        if self.dir is None:
            return
        try:
            self.stop("immediate")
        except subprocess.SubprocessError:
            pass
        shutil.rmtree(self.dir, ignore_errors=True)
        if self._reaper is not None:
            self._reaper.cancel()

    def add_password_user(self, user: str, password: str) -> str:
        """A login role that must give its password over TCP (scram-sha-256); returns a URL template
        `postgresql://user:{password}@host:port/{db}` for it."""
        import psycopg

        with psycopg.connect(self.admin_url, autocommit=True) as c:
            c.execute(f"CREATE ROLE {user} LOGIN PASSWORD '{password}'")
        hba = self.dir / "data" / "pg_hba.conf"
        hba.write_text(f"host all {user} 127.0.0.1/32 scram-sha-256\n" + hba.read_text())
        self._as_owner([find_bin("pg_ctl"), "-D", str(self.dir / "data"), "reload"])
        return f"postgresql://{user}:{{password}}@127.0.0.1:{self.port}/{{db}}"

    # -- databases ------------------------------------------------------------------------------
    def new_database(self, owner: str | None = None) -> str:
        """A fresh, empty database (owned by `owner`, else the admin); returns the admin's URL to it."""
        import psycopg

        name = f"rag_test_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(self.admin_url, autocommit=True) as c:
            c.execute(f'CREATE DATABASE "{name}"' + (f" OWNER {owner}" if owner else ""))
        self.databases.append(name)
        from psycopg.conninfo import conninfo_to_dict, make_conninfo
        info = conninfo_to_dict(self.admin_url)
        if self.admin_url.startswith("postgres"):
            base, _, query = self.admin_url.partition("?")
            head = base.rsplit("/", 1)[0]
            return f"{head}/{name}" + (f"?{query}" if query else "")
        return make_conninfo(**{**info, "dbname": name})


def _has_user(name: str) -> bool:
    try:
        pwd.getpwnam(name)
        return True
    except KeyError:
        return False
