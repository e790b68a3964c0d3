"""A Spark standalone cluster for the tests, from pyspark's own jars, and the Python its executors run.

The pip package has no start scripts (no sbin/start-master.sh), so the master and each worker are
`bin/spark-class org.apache.spark.deploy.{master.Master,worker.Worker}`, separate JVMs as a cluster
has. The executors run `executor_python()`: a virtual environment with only the third-party libraries
that our code needs on executors, and not the project, so that what they import of ours is what the
driver shipped (spark.session.ship_code).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from importlib.metadata import version
from pathlib import Path

import pyspark

SPARK_HOME = Path(pyspark.__file__).parent
# What Spark's Python workers import on executors besides pyspark (which Spark puts on their path from
# SPARK_HOME/python/lib): the Arrow batches of mapInArrow, and the records decoder's libraries.
EXECUTOR_LIBRARIES = ("pyarrow", "orjson", "fastavro", "msgspec", "pandas", "numpy")


def executor_python() -> Path:
    """A venv's python with EXECUTOR_LIBRARIES at the driver's versions (Spark wants the same Python
    minor version on both sides), made once per set of versions under ~/.cache."""
    pins = [f"{name}=={version(name)}" for name in EXECUTOR_LIBRARIES]
    digest = hashlib.sha256(f"{sys.version_info[:2]} {pins}".encode()).hexdigest()[:12]
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "worker-coordinator"
    venv = base / f"spark-executor-venv-{digest}"
    python = venv / "bin" / "python"
    if python.exists():
        return python
    base.mkdir(parents=True, exist_ok=True)
    with (base / f".spark-executor-venv-{digest}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not python.exists():  # another test session may have made it while this one waited
            staging = venv.with_name(venv.name + ".tmp")
            subprocess.run(["rm", "-rf", str(staging)], check=True)
            # The interpreter the project's venv was made from, not that venv (no project in it).
            base_python = Path(sys.base_prefix) / "bin" / f"python{sys.version_info[0]}.{sys.version_info[1]}"
            subprocess.run([str(base_python), "-m", "venv", str(staging)], check=True)
            subprocess.run(
                [str(staging / "bin" / "python"), "-m", "pip", "install", "--quiet", *pins],
                check=True,
                timeout=900,
            )
            staging.rename(venv)  # a venv's scripts name its path: python -m pip is used, not bin/pip
    return python


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Cluster:
    url: str
    root: Path
    master: subprocess.Popen
    workers: list[subprocess.Popen] = field(default_factory=list)

    def work_dir(self, worker: int) -> Path:
        return self.root / f"worker-{worker}"

    def executors(self, worker: int) -> list[int]:
        """The pids of the executor JVMs that `worker` runs (each runs in a directory under its work dir)."""
        work = str(self.work_dir(worker).resolve())
        pids = []
        for proc in Path("/proc").iterdir():
            if not proc.name.isdigit():
                continue
            with contextlib.suppress(OSError):
                if b"CoarseGrainedExecutorBackend" in (proc / "cmdline").read_bytes() and os.readlink(
                    proc / "cwd"
                ).startswith(work):
                    pids.append(int(proc.name))
        return pids


def _env(root: Path) -> dict[str, str]:
    """The daemons' environment: none of this test session's Python settings (PYTHONPATH names the
    working tree, which executors must not see), small daemon heaps, scratch under `root`."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYSPARK_PYTHON")}
    env.update(
        SPARK_HOME=str(SPARK_HOME),
        SPARK_LOCAL_IP="127.0.0.1",
        SPARK_DAEMON_MEMORY="256m",
        SPARK_LOCAL_DIRS=str(root / "local"),
        SPARK_LOG_DIR=str(root / "logs"),
    )
    return env


def _wait_for(log: Path, text: str, process: subprocess.Popen, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if text in log.read_text(errors="replace"):
            return
        if process.poll() is not None:
            raise AssertionError(f"{log.name}: exited {process.returncode}: {log.read_text()[-2000:]}")
        time.sleep(0.3)
    raise AssertionError(f"{log.name}: no {text!r} within {timeout:.0f} s: {log.read_text()[-2000:]}")


def _daemon(root: Path, name: str, *args: str) -> tuple[subprocess.Popen, Path]:
    log = root / f"{name}.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [str(SPARK_HOME / "bin" / "spark-class"), *args],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=_env(root),
            start_new_session=True,  # spark-class execs java: the group is the JVM alone
        )
    return process, log


@contextlib.contextmanager
def standalone_cluster(root: Path, workers: int = 2) -> Iterator[Cluster]:
    """A master and `workers` workers (one core, 1 GB for executors each) on 127.0.0.1."""
    root.mkdir(parents=True, exist_ok=True)
    port = free_port()
    master, log = _daemon(
        root, "master", "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
        "--webui-port", str(free_port()),
    )  # fmt: skip
    cluster = Cluster(f"spark://127.0.0.1:{port}", root, master)
    try:
        _wait_for(log, "I have been elected leader", master)
        # The workers start at once, once the master is up: a worker that finds no master retries
        # only after 5-15 s (Spark's registration backoff), which would cost more than it saves.
        logs = []
        for i in range(workers):
            cluster.work_dir(i).mkdir()
            worker, worker_log = _daemon(
                root, f"worker-{i}", "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1",
                "--cores", "1", "--memory", "1g", "--work-dir", str(cluster.work_dir(i)),
                "--webui-port", str(free_port()), cluster.url,
            )  # fmt: skip
            cluster.workers.append(worker)
            logs.append(worker_log)
        for worker, worker_log in zip(cluster.workers, logs):
            _wait_for(worker_log, "Successfully registered with master", worker)
        yield cluster
    finally:
        for process in [*cluster.workers, master]:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
        for process in [*cluster.workers, master]:
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(10)
