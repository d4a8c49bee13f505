"""A real Slurm cluster of its own for tests: munged, slurmctld and two slurmd daemons on this
host (Debian's Slurm runs several slurmd on one host, each with its own node name and port), all
on loopback, with their state, sockets and logs in a temporary folder, stopped afterwards.

Two nodes of one CPU each: worker allocations land on either, and a two-node job really spans two
slurmd daemons (srun gives each task its own node name, SLURM_NODEID and SLURM_PROCID).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

PARTITION = "debug"
NODES = ("ptmlab-n1", "ptmlab-n2")


def slurm_installed() -> bool:
    return all(shutil.which(b) for b in ("munged", "slurmctld", "slurmd", "sbatch", "squeue", "scancel", "srun"))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class SlurmCluster:
    def __init__(self) -> None:
        # Short: a Unix socket path must fit in 108 bytes.
        self.root = Path(tempfile.mkdtemp(prefix="slurm-", dir="/tmp"))
        self.conf = self.root / "slurm.conf"
        self.env = {**os.environ, "SLURM_CONF": str(self.conf)}

    def start(self) -> SlurmCluster:
        r = self.root
        for d in ("state", "spool", "log", "munge"):
            (r / d).mkdir()
        os.chmod(r / "munge", 0o700)
        key = r / "munge" / "munge.key"
        key.write_bytes(os.urandom(1024))
        os.chmod(key, 0o400)
        sock = r / "munge" / "munge.sock"
        # --force: munged refuses to run as root otherwise (CI runs as root).
        subprocess.run(
            [
                "munged",
                "--force",
                f"--key-file={key}",
                f"--socket={sock}",
                f"--pid-file={r}/munge/munged.pid",
                f"--log-file={r}/log/munged.log",
                f"--seed-file={r}/munge/munged.seed",
            ],
            check=True,
        )
        ctld_port, d1, d2 = _free_port(), _free_port(), _free_port()
        host = socket.gethostname()
        nodes = "\n".join(
            f"NodeName={n} NodeHostname={host} NodeAddr=127.0.0.1 Port={p} CPUs=1 RealMemory=2000 State=UNKNOWN"
            for n, p in zip(NODES, (d1, d2))
        )
        self.conf.write_text(f"""\
ClusterName=ptmlabtest
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={ctld_port}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={sock}
CredType=cred/munge
StateSaveLocation={r}/state
SlurmdSpoolDir={r}/spool/%n
SlurmctldPidFile={r}/slurmctld.pid
SlurmdPidFile={r}/slurmd-%n.pid
SlurmctldLogFile={r}/log/slurmctld.log
SlurmdLogFile={r}/log/slurmd-%n.log
# No cgroups in a container: processes are tracked by parentage.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
ReturnToService=2
KillWait=5
MinJobAge=300
SchedulerParameters=sched_interval=1
{nodes}
PartitionName={PARTITION} Nodes=ALL Default=YES MaxTime=INFINITE State=UP
""")
        subprocess.run(["slurmctld", "-f", str(self.conf), "-i"], check=True, env=self.env)
        for n in NODES:
            subprocess.run(["slurmd", "-f", str(self.conf), "-N", n], check=True, env=self.env)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            out = subprocess.run(["sinfo", "-h", "-o", "%T %D"], capture_output=True, text=True, env=self.env).stdout
            if out.split() == ["idle", str(len(NODES))]:
                return self
            time.sleep(0.5)
        raise RuntimeError(f"Slurm test cluster not idle after 60 s: {out!r}; logs in {r}/log")

    def run(self, *argv: str) -> subprocess.CompletedProcess:
        return subprocess.run(list(argv), capture_output=True, text=True, env=self.env, timeout=60)

    def stop(self) -> None:
        subprocess.run(["scancel", "--full", "--user=root"], env=self.env, capture_output=True)
        for pidfile in sorted(self.root.glob("slurmd-*.pid")) + [
            self.root / "slurmctld.pid",
            self.root / "munge" / "munged.pid",
        ]:
            try:
                os.kill(int(pidfile.read_text().strip()), signal.SIGTERM)
            except (OSError, ValueError):
                pass
        time.sleep(1)
        shutil.rmtree(self.root, ignore_errors=True)
