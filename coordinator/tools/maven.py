"""Jars from Maven Central, resolved once per pom, then taken from a cache.

A pom lists them: `coordinator/tools/devbroker/pom.xml` for the dev broker (Apache Kafka),
`bench/vs_connect/pom.xml` for Kafka Connect, `spark/pom.xml` for Spark's Kafka, Avro and Delta
connectors. The first use on a machine runs `mvn dependency:copy-dependencies` into
`$XDG_CACHE_HOME/worker-coordinator/<name>-<version>-<pom digest>/` (Maven keeps its own copy in
~/.m2). A changed pom is a new directory, so an edit never mixes jars of two versions. The copy goes
to a temporary directory that is renamed into place only when Maven succeeded, and a file lock
keeps two processes (a test session and `make run`, say) from resolving at once.
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

_MAVEN_TIMEOUT = 900.0
_OUTPUT_TAIL_LINES = 15
NS = {"m": "http://maven.apache.org/POM/4.0.0"}


def pinned_version(pom: Path) -> str:
    """The version a pom is about: its kafka.version, else its first `*.version` property (the
    Spark connectors' pom pins spark.version)."""
    properties = ET.parse(pom).getroot().find("m:properties", NS)
    versions = [
        (p.tag.split("}")[-1], p.text)
        for p in ([] if properties is None else properties)
        if p.tag.endswith(".version") and p.text
    ]
    assert versions, f"{pom} pins no version property"
    return dict(versions).get("kafka.version", versions[0][1])


def cache_dir(pom: Path, name: str | None = None) -> Path:
    """Where `pom`'s jars are cached: named `name`, or the pom's artifactId."""
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    digest = hashlib.sha256(pom.read_bytes()).hexdigest()[:12]
    name = name or ET.parse(pom).getroot().findtext("m:artifactId", namespaces=NS)
    return base / "worker-coordinator" / f"{name}-{pinned_version(pom)}-{digest}"


def libs(pom: Path, marker: str, what: str, name: str | None = None) -> Path:
    """The directory holding every jar `pom` lists, resolving them first if not cached. `marker` is
    a jar that must be among them, `what` names them in messages, `name` the cache directory."""
    target = cache_dir(pom, name) / "libs"
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
