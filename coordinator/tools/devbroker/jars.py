"""Apache Kafka's jars for the dev broker: resolved from Maven Central once, then taken from a cache.

`pom.xml` beside this file lists them. The first `dev-broker up` on a machine runs
`mvn dependency:copy-dependencies` into `$XDG_CACHE_HOME/worker-coordinator/kafka-<version>-<pom
digest>/` (about 45 MB; Maven keeps its own copy in ~/.m2). A changed pom is a new directory, so an
edit never mixes jars of two versions. The copy goes to a temporary directory that is renamed into
place only when Maven succeeded, and a file lock keeps two processes (a test session and `make run`,
say) from resolving at once.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

from coordinator.errors import CliError

POM = Path(__file__).with_name("pom.xml")
LOG4J_CONFIG = Path(__file__).with_name("log4j2.properties")
_MAVEN_TIMEOUT = 900.0
_OUTPUT_TAIL_LINES = 15


def kafka_version() -> str:
    """The Apache Kafka version the pom pins."""
    ns = {"m": "http://maven.apache.org/POM/4.0.0"}
    version = ET.parse(POM).getroot().findtext("m:properties/m:kafka.version", namespaces=ns)
    assert version, f"{POM} has no kafka.version property"
    return version


def cache_dir() -> Path:
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    digest = hashlib.sha256(POM.read_bytes()).hexdigest()[:12]
    return base / "worker-coordinator" / f"kafka-{kafka_version()}-{digest}"


def libs() -> Path:
    """The directory holding every jar the broker needs, resolving them first if not cached."""
    target = cache_dir() / "libs"
    if target.is_dir():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with (target.parent / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not target.is_dir():  # another process may have finished while this one waited
            _resolve(target)
    return target


def _resolve(target: Path) -> None:
    mvn = shutil.which("mvn")
    if mvn is None:
        raise CliError(
            "Maven (mvn) is not on PATH; the dev broker needs it once to download Apache Kafka "
            f"{kafka_version()} from Maven Central (see the README's prerequisites)"
        )
    staging = Path(tempfile.mkdtemp(prefix="libs-", dir=target.parent))
    print(f"dev-broker: downloading Apache Kafka {kafka_version()} jars from Maven Central (once) ...", flush=True)
    try:
        done = subprocess.run(
            [mvn, "--batch-mode", "--quiet", "-f", str(POM), "dependency:copy-dependencies",
             f"-DoutputDirectory={staging}"],
            stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=_MAVEN_TIMEOUT,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        shutil.rmtree(staging, ignore_errors=True)
        raise CliError(f"Maven did not finish resolving Apache Kafka's jars within {_MAVEN_TIMEOUT:g}s") from None
    if done.returncode != 0 or not any(staging.glob("kafka_2.13-*.jar")):
        shutil.rmtree(staging, ignore_errors=True)
        tail = "\n".join(f"  {line}" for line in (done.stdout + done.stderr).splitlines()[-_OUTPUT_TAIL_LINES:])
        raise CliError(f"Maven could not resolve Apache Kafka {kafka_version()} from {POM}:\n{tail}")
    staging.rename(target)


def java() -> str:
    """The java executable: $JAVA_HOME's, else the one on PATH."""
    home = os.environ.get("JAVA_HOME")
    candidate = Path(home, "bin", "java") if home else None
    if candidate is not None and os.access(candidate, os.X_OK):
        return str(candidate)
    found = shutil.which("java")
    if found is None:
        raise CliError("java is not on PATH (and $JAVA_HOME has none); Apache Kafka needs Java 17 or newer")
    return found
