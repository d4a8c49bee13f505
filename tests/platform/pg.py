"""A real PostgreSQL server on loopback for the test session (Debian's binaries).

`initdb`/`pg_ctl` refuse to run as root, so as root they run as the `postgres` user in a folder of
the test's own under /tmp. Used by tests/platform/conftest.py (`postgres_server`,
`postgres_url`) and importable by tests/e2e.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path


def find_pg_bin() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(Path(p).parts[-3]))
    return Path(found[-1]).parent if found else None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class PostgresServer:
    bin_dir: Path
    base: Path
    port: int
    as_postgres: bool

    @property
    def data_dir(self) -> Path:
        return self.base / "data"

    @property
    def socket_dir(self) -> Path:
        return self.base / "sock"

    def url(self, database: str = "postgres", driver: str = "postgresql+psycopg") -> str:
        return f"{driver}://postgres@127.0.0.1:{self.port}/{database}"

    def _run(self, *argv: str, check: bool = True) -> subprocess.CompletedProcess:
        cmd = [str(self.bin_dir / argv[0]), *argv[1:]]
        if self.as_postgres:
            cmd = ["runuser", "-u", "postgres", "--", *cmd]
        return subprocess.run(cmd, check=check, capture_output=True, text=True, timeout=120)

    def start(self) -> None:
        self.base.mkdir(parents=True, exist_ok=True)
        self.socket_dir.mkdir(exist_ok=True)
        if self.as_postgres:
            shutil.chown(self.base, "postgres", "postgres")
            shutil.chown(self.socket_dir, "postgres", "postgres")
        self._run(
            "initdb", "-D", str(self.data_dir), "-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8", "--locale=C"
        )
        self.start_server()

    def start_server(self) -> None:
        """Start the server on the existing data folder (after `initdb`, or after `stop_server`)."""
        # fsync off: a test server trades durability for speed (the data is thrown away).
        opts = f"-p {self.port} -k {self.socket_dir} -h 127.0.0.1 -F -c max_connections=200"
        try:
            self._run(
                "pg_ctl",
                "-D",
                str(self.data_dir),
                "-o",
                opts,
                "-l",
                str(self.base / "server.log"),
                "-w",
                "-t",
                "60",
                "start",
            )
        except subprocess.CalledProcessError as exc:
            log = (self.base / "server.log").read_text() if (self.base / "server.log").exists() else ""
            raise RuntimeError(f"PostgreSQL did not start: {exc.stderr}\n{log[-2000:]}") from None

    def stop_server(self) -> None:
        """Stop the server, keeping its data ("fast": open transactions are rolled back and every
        client is disconnected, as a restart of a real server does)."""
        self._run("pg_ctl", "-D", str(self.data_dir), "-m", "fast", "-w", "-t", "60", "stop")

    def restart(self) -> None:
        """`pg_ctl restart -m fast`: every client connection is cut."""
        # -l again: without it the new server would hold this call's output pipe open.
        self._run(
            "pg_ctl",
            "-D",
            str(self.data_dir),
            "-l",
            str(self.base / "server.log"),
            "-m",
            "fast",
            "-w",
            "-t",
            "60",
            "restart",
        )

    def stop(self) -> None:
        self._run("pg_ctl", "-D", str(self.data_dir), "-m", "immediate", "-w", "stop", check=False)
        shutil.rmtree(self.base, ignore_errors=True)

    def create_database(self, name: str | None = None) -> str:
        """A new, empty database; returns its SQLAlchemy URL."""
        import psycopg

        name = name or f"t_{uuid.uuid4().hex[:10]}"
        with psycopg.connect(f"host=127.0.0.1 port={self.port} user=postgres dbname=postgres", autocommit=True) as c:
            c.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)


def start_postgres() -> PostgresServer:
    bin_dir = find_pg_bin()
    if bin_dir is None:
        raise FileNotFoundError(
            "PostgreSQL server binaries not found under /usr/lib/postgresql/*/bin "
            "(install: apt-get install postgresql, or run `make system-deps`)"
        )
    base = Path(tempfile.mkdtemp(prefix="ptmlab-pg-", dir="/tmp"))
    server = PostgresServer(bin_dir=bin_dir, base=base, port=free_port(), as_postgres=os.geteuid() == 0)
    server.start()
    return server
