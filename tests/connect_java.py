"""Compile and run small Java drivers against Kafka Connect's own jars (connect-runtime and its
dependencies, as `bench/vs_connect/pom.xml` pins them), so that tests can compare our bytes with
what Connect writes and reads.

`run([source, ...], "pkg.Main", args, stdin)` compiles the sources once into
`$XDG_CACHE_HOME/worker-coordinator/java-classes/<digest>/` (the digest covers the sources' names and
contents, the jar directory and the javac version, so an edit or a new pom recompiles and nothing
else does) and returns the program's stdout. A driver may declare any package, including Connect's
own (`org.apache.kafka.connect.runtime.distributed`, to reach package-private members).

Java and Maven are prerequisites, as for the dev broker: a missing `javac`/`java`/`mvn` fails with a
message saying so. Set `COORDINATOR_TESTS_WITHOUT_JAVA=1` to skip the tests that need them instead
(`require()`), except under CI's switch `COORDINATOR_TESTS_REQUIRE_ALL`, where they fail.

From the command line, to regenerate a golden file:
    .venv/bin/python tests/connect_java.py tests/java/ConnectProtocolGolden.java generate > out.json
(the main class is the first source's, in its package; the program's stdin is empty).
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script
    sys.path.insert(0, str(ROOT))

from coordinator.errors import CliError  # noqa: E402
from coordinator.tools import maven  # noqa: E402

POM = ROOT / "bench" / "vs_connect" / "pom.xml"
OPT_OUT = "COORDINATOR_TESTS_WITHOUT_JAVA"
_COMPILE_TIMEOUT = 300.0
_RUN_TIMEOUT = 120.0


class JavaUnavailable(CliError):
    """No JDK (or no Maven to fetch Connect's jars): the tests that compare with Connect cannot run."""


def opted_out() -> bool:
    return os.environ.get(OPT_OUT, "").strip().lower() not in ("", "0", "false", "no")


def require() -> None:
    """For a test that needs Java: nothing if it can run, a skip if the environment opted out of
    Java (a failure under CI's switch, which ignores the opt-out: tests/support/require.py), else a failure
    that says what is missing."""
    import pytest

    from tests.support.require import require as required

    try:
        _jdk_tool("javac")
        libs()
        return
    except CliError as e:
        missing = str(e)
    if opted_out():
        required(False, f"{OPT_OUT} is set: {missing}")
    pytest.fail(
        f"{missing}\n(Java 17+ and Maven are prerequisites of the tests; set {OPT_OUT}=1 to skip the "
        "tests that compare with Kafka Connect's own code)",
        pytrace=False,
    )


def libs() -> Path:
    """The directory of connect-runtime's jars and their dependencies (resolved once by Maven)."""
    return maven.libs(POM, "connect-runtime-*.jar", "Kafka Connect")


def classpath(*extra: Path) -> str:
    return os.pathsep.join([*(str(p) for p in extra), str(libs() / "*")])


def compiled(sources: Sequence[Path]) -> Path:
    """The directory of `sources` compiled against Connect's jars, compiling them if this exact set
    of sources has not been compiled before."""
    sources = [Path(s).resolve() for s in sources]
    javac = _jdk_tool("javac")
    jars = libs()
    digest = hashlib.sha256()
    for part in (str(jars), _version(javac), *(f"{s.name}\0{s.read_text()}" for s in sources)):
        digest.update(part.encode() + b"\0\0")
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "worker-coordinator" / "java-classes"
    target = base / digest.hexdigest()[:16]
    if target.is_dir():
        return target
    base.mkdir(parents=True, exist_ok=True)
    with (base / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if target.is_dir():  # another process compiled them while this one waited
            return target
        staging = Path(tempfile.mkdtemp(prefix="classes-", dir=base))
        try:
            done = subprocess.run(
                [javac, "-nowarn", "-encoding", "UTF-8", "-d", str(staging), "-cp", classpath(),
                 *(str(s) for s in sources)],
                stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=_COMPILE_TIMEOUT,
            )  # fmt: skip
            if done.returncode != 0:
                raise CliError(f"javac failed on {', '.join(s.name for s in sources)}:\n{done.stdout}{done.stderr}")
            staging.rename(target)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return target


def run(
    sources: Sequence[Path],
    main_class: str,
    args: Sequence[str] = (),
    stdin: str | None = None,
    timeout: float = _RUN_TIMEOUT,
) -> str:
    """Compile `sources` (cached) and run `main_class` with `args`, `stdin` as its input; its stdout.
    A non-zero exit raises CliError with the program's stderr."""
    classes = compiled(sources)
    done = subprocess.run(
        [_jdk_tool("java"), "-XX:TieredStopAtLevel=1", "-cp", classpath(classes), main_class,
         *args],
        input=stdin.encode() if stdin is not None else None, stdin=None if stdin is not None else subprocess.DEVNULL,
        capture_output=True, timeout=timeout,
    )  # fmt: skip
    if done.returncode != 0:
        raise CliError(
            f"{main_class} {' '.join(args)} exited with {done.returncode}:\n{done.stderr.decode(errors='replace')}"
        )
    return done.stdout.decode()


def main_class_of(source: Path) -> str:
    """The fully qualified name of the class a source file declares (its package, its file name)."""
    package = re.search(r"^\s*package\s+([\w.]+)\s*;", Path(source).read_text(), re.MULTILINE)
    return f"{package.group(1)}.{Path(source).stem}" if package else Path(source).stem


def _jdk_tool(name: str) -> str:
    """`name` from the JDK that `coordinator.tools.maven.java()` finds ($JAVA_HOME's, else PATH's)."""
    try:
        java = Path(maven.java())
    except CliError as e:
        raise JavaUnavailable(str(e)) from None
    for candidate in (java.parent / name, Path(os.path.realpath(java)).parent / name):
        if os.access(candidate, os.X_OK):
            return str(candidate)
    found = shutil.which(name)
    if found is None:
        raise JavaUnavailable(
            f"{name} is not beside {java} nor on PATH: the tests need a JDK (17 or newer), not only a JRE"
        )
    return found


_versions: dict[str, str] = {}


def _version(tool: str) -> str:
    if tool not in _versions:
        done = subprocess.run([tool, "-version"], capture_output=True, text=True, timeout=60)
        _versions[tool] = (done.stdout + done.stderr).strip()
    return _versions[tool]


def _main(argv: list[str]) -> int:
    sources = [Path(a) for a in argv if a.endswith(".java")]
    args = [a for a in argv if not a.endswith(".java")]
    if not sources:
        print(
            "usage: connect_java.py SOURCE.java [SOURCE.java...] [ARG...]  (runs the first source's class)",
            file=sys.stderr,
        )
        return 2
    sys.stdout.write(run(sources, main_class_of(sources[0]), args))
    return 0


if __name__ == "__main__":
    raise SystemExit(_main(sys.argv[1:]))
