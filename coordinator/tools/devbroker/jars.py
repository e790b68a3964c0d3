"""Apache Kafka's jars: resolved from Maven Central once, then taken from a cache.

A pom lists them: `pom.xml` beside this file for the dev broker, and others for other Kafka programs
(bench/vs_connect/pom.xml: Kafka Connect; spark/pom.xml: Spark's Kafka, Avro and Delta connectors). The first use on a machine runs `mvn
dependency:copy-dependencies` into `$XDG_CACHE_HOME/worker-coordinator/<artifactId>-<version>-<pom
digest>/` (about 45 MB for the broker; Maven keeps its own copy in ~/.m2). A changed pom is a new
directory, so an edit never mixes jars of two versions. The copy goes to a temporary directory that
is renamed into place only when Maven succeeded, and a file lock keeps two processes (a test
session and `make run`, say) from resolving at once.
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


_NS = {"m": "http://maven.apache.org/POM/4.0.0"}


def kafka_version(pom: Path = POM) -> str:
    """The Apache Kafka version a pom pins."""
    version = ET.parse(pom).getroot().findtext("m:properties/m:kafka.version", namespaces=_NS)
    assert version, f"{pom} has no kafka.version property"
    return version


def pinned_version(pom: Path) -> str:
    """The version a pom is about: its kafka.version, else its first `*.version` property (the
    Spark connectors' pom pins spark.version)."""
    properties = ET.parse(pom).getroot().find("m:properties", _NS)
    versions = [(p.tag.split("}")[-1], p.text) for p in ([] if properties is None else properties)
                if p.tag.endswith(".version") and p.text]
    assert versions, f"{pom} pins no version property"
    return dict(versions).get("kafka.version", versions[0][1])


def cache_dir(pom: Path = POM) -> Path:
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    digest = hashlib.sha256(pom.read_bytes()).hexdigest()[:12]
    name = "kafka" if pom == POM else ET.parse(pom).getroot().findtext("m:artifactId", namespaces=_NS)
    return base / "worker-coordinator" / f"{name}-{pinned_version(pom)}-{digest}"


def libs(pom: Path = POM, marker: str = "kafka_2.13-*.jar", what: str = "Apache Kafka") -> Path:
    """The directory holding every jar `pom` lists (the broker's by default), resolving them first if
    not cached. `marker` is a jar that must be among them, `what` names them in messages."""
    target = cache_dir(pom) / "libs"
    if target.is_dir():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with (target.parent / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not target.is_dir():  # another process may have finished while this one waited
            _resolve(target, pom, marker, f"{what} {pinned_version(pom)}")
    return target


def _resolve(target: Path, pom: Path, marker: str, what: str) -> None:
    mvn = shutil.which("mvn")
    if mvn is None:
        raise CliError(
            f"Maven (mvn) is not on PATH; it is needed once to download {what} from Maven Central "
            "(see the README's prerequisites)"
        )
    staging = Path(tempfile.mkdtemp(prefix="libs-", dir=target.parent))
    print(f"downloading {what} jars from Maven Central (once) ...", flush=True)
    try:
        done = subprocess.run(
            [mvn, "--batch-mode", "--quiet", "-f", str(pom), "dependency:copy-dependencies",
             f"-DoutputDirectory={staging}"],
            stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=_MAVEN_TIMEOUT,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        shutil.rmtree(staging, ignore_errors=True)
        raise CliError(f"Maven did not finish resolving {what}'s jars within {_MAVEN_TIMEOUT:g}s") from None
    if done.returncode != 0 or not any(staging.glob(marker)):
        shutil.rmtree(staging, ignore_errors=True)
        tail = "\n".join(f"  {line}" for line in (done.stdout + done.stderr).splitlines()[-_OUTPUT_TAIL_LINES:])
        raise CliError(f"Maven could not resolve {what} from {pom}:\n{tail}")
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
