"""A rolling upgrade and its rollback (issue 29 item 1): the previous release, installed from its tag
into a virtual environment of its own, and this one serve the same topic in turn, each taking over
from the other by kill -9. At the default record format level nothing acknowledged is lost either
way; once `coordinator topic upgrade-format` has raised the level (refused while the previous
release serves), the previous release refuses the partitions cleanly instead of misreading them."""

from __future__ import annotations

import gzip
import hashlib
import io
import os
import shutil
import subprocess
import sys
import sysconfig
import tarfile
from pathlib import Path

import pytest

from records import MAX_FORMAT_LEVEL, TaskId

from coordinator.tools.partitions import partition_for
from coordinator.tools.process import ServeProcess
from tests.serve_workers import Ledger, Worker, converge, items, wait_for
from tests.support.require import require

pytestmark = pytest.mark.integration

# The release before this one (a release moves it on; CHANGELOG.md lists them), and its source as
# released: committed, because CI's clone of main carries no tags (and an older release's dependencies may be
# gone), made from the release's commit by
#   git archive --prefix=worker-coordinator-X.Y.Z/ vX.Y.Z pyproject.toml README.md CHANGELOG.md \
#       coordinator records replay spark | gzip -n -9 > tests/releases/worker-coordinator-X.Y.Z.tar.gz
# and recorded beside it in worker-coordinator-X.Y.Z.manifest: the commit, then `git ls-tree -r COMMIT --
# <those paths>` (each file's mode and git blob hash), which the first test checks the archive against.
PREVIOUS = "v0.2.0"
ROOT = Path(__file__).resolve().parent.parent
RELEASES = ROOT / "tests" / "releases"
ARCHIVE = RELEASES / f"worker-coordinator-{PREVIOUS.removeprefix('v')}.tar.gz"
MANIFEST = ARCHIVE.with_name(f"worker-coordinator-{PREVIOUS.removeprefix('v')}.manifest")
ARCHIVED_PATHS = ["pyproject.toml", "README.md", "CHANGELOG.md", "coordinator", "records", "replay", "spark"]
G = "rolling"
PARTITIONS = 4


def _archived_files(archive: bytes) -> dict[str, bytes]:
    """Each regular file of a tar archive (gzipped or not) by its path below the top folder."""
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        return {
            m.name.split("/", 1)[1]: tar.extractfile(m).read()  # type: ignore[union-attr]
            for m in tar.getmembers()
            if m.isfile()
        }


def _blob_hash(data: bytes) -> str:
    """The hash git gives a file's content (`git hash-object`): SHA-1 of "blob <size>\\0" and the bytes."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def _manifest() -> tuple[str, str]:
    """The manifest's commit, and its `git ls-tree -r` lines (comments dropped)."""
    lines = [line for line in MANIFEST.read_text().splitlines() if line and not line.startswith("#")]
    kind, commit = lines[0].split()
    assert kind == "commit" and len(commit) == 40, lines[0]
    return commit, "\n".join(lines[1:]) + "\n"


def _tree(ls_tree: str) -> dict[str, tuple[str, str]]:
    """`git ls-tree -r` lines: path -> (mode, blob hash), blobs only."""
    files = {}
    for line in ls_tree.splitlines():
        meta, path = line.split("\t", 1)
        mode, kind, blob = meta.split()
        assert kind == "blob", line
        files[path] = (mode, blob)
    return files


def test_the_previous_release_archive_is_its_recorded_commit() -> None:
    """The committed archive holds exactly the files the manifest records for the release's commit, each
    byte for byte (its git blob hash) and with its mode, and names that commit (git archive writes it into
    the archive's header). Needs no git: a fresh clone without tags checks it all the same."""
    commit, ls_tree = _manifest()
    recorded = _tree(ls_tree)
    assert recorded, MANIFEST
    raw = gzip.decompress(ARCHIVE.read_bytes())
    with tarfile.open(fileobj=io.BytesIO(raw)) as tar:
        assert tar.pax_headers.get("comment") == commit, tar.pax_headers
        modes = {
            m.name.split("/", 1)[1]: "100755" if m.mode & 0o111 else "100644" for m in tar.getmembers() if m.isfile()
        }
    archived = {path: (modes[path], _blob_hash(data)) for path, data in _archived_files(raw).items()}
    assert sorted(archived) == sorted(recorded)
    assert {p: v for p, v in archived.items() if recorded[p] != v} == {}


def test_the_manifest_is_the_release_commits_tree() -> None:
    """The manifest is what git holds for the release's commit: `git ls-tree -r` of the archived paths, line
    for line. The commit is in every clone of main with its history; outside a git checkout this skips outside
    CI and fails under CI's switch (tests/support/require.py), in a shallow clone without it it skips."""
    commit, ls_tree = _manifest()
    git = shutil.which("git")
    require(git is not None and (ROOT / ".git").exists(), "not a git checkout: no commit to compare the manifest with")
    present = subprocess.run(
        [git, "-C", str(ROOT), "cat-file", "-e", f"{commit}^{{commit}}"], capture_output=True, check=False
    )
    if present.returncode != 0:
        # Not a tool make test installs: the clone's depth is its maker's choice. The promise (the
        # archive is the release's content) is checked by the test above against the manifest anyway.
        pytest.skip(f"this clone lacks the release's commit {commit} (a shallow clone)")
    tree = subprocess.run(
        [git, "-C", str(ROOT), "ls-tree", "-r", commit, "--", *ARCHIVED_PATHS],
        capture_output=True,
        text=True,
        check=True,
    )
    assert tree.stdout == ls_tree


@pytest.fixture(scope="module")
def previous_python(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The Python of a virtual environment holding the previous release, installed from its archive.
    Its dependencies come from this project's environment (a .pth file), the previous release's own
    code from the archive alone."""
    base = tmp_path_factory.mktemp("previous-release")
    source, venv = base / "src", base / "venv"
    source.mkdir()
    with tarfile.open(ARCHIVE) as tar:
        tar.extractall(source, filter="data")
    (source,) = source.iterdir()  # worker-coordinator-X.Y.Z/
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    Path(purelib, "_project_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--no-deps", str(source)], check=True, timeout=300)
    # The previous release's own code only: not this checkout's through PYTHONPATH or the working directory (-P).
    clean = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    version = subprocess.run(
        [str(python), "-P", "-m", "coordinator", "--version"], capture_output=True, text=True, env=clean
    )
    assert version.stdout.strip() == f"coordinator {PREVIOUS.removeprefix('v')}", version
    where = subprocess.run(
        [str(python), "-P", "-c", "import coordinator, records; print(coordinator.__file__, records.__file__)"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=clean,
    )
    assert str(ROOT) not in where.stdout and str(venv) in where.stdout, where  # the tag's code, not ours
    return str(python)


def _serve(  # noqa: ANN001
    kafka_broker, topic: str, tmp_path: Path, port: int | None, python: str | None = None, wait: bool = True
) -> ServeProcess:
    server = ServeProcess(
        kafka_broker.bootstrap_servers,
        topic,
        tmp_path,
        "--allow-anonymous",
        "--partitions",
        "all",
        "--session-timeout-ms",
        "60000",
        "--server-assignment-interval-ms",
        "0",
        port=port,
    )
    if python is not None:
        # -P: not the working directory first on sys.path, which would import this checkout's code;
        # nor PYTHONPATH, which may name this checkout too.
        server.args[0:1] = [python, "-P"]
        server.env.pop("PYTHONPATH", None)
    return server.start(wait)


def _described(server: ServeProcess) -> dict:
    status, body = server.request("GET", f"/v1/groups/{G}", timeout=30)
    assert status == 200 and body["ErrorCode"] == 0, body
    # What the group is, not who answered or what a newer release adds to the answer.
    return {
        "GroupEpoch": body["GroupEpoch"],
        "AssignmentEpoch": body["AssignmentEpoch"],
        "Connectors": body["Connectors"],
        "Members": sorted(
            (m["MemberId"], m["MemberEpoch"], m["State"], items(m["Assignment"]), items(m["Target"]))
            for m in body["Members"]
        ),
    }


def served_statuses(server: ServeProcess) -> list[str]:
    try:
        return list(server.request("GET", "/health", timeout=5)[1]["Partitions"].values())
    except OSError:
        return []  # not listening yet


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "coordinator", *args], capture_output=True, text=True, timeout=120)


def test_releases_take_over_from_each_other_and_a_raised_level_is_refused_by_the_previous(
    kafka_broker,  # noqa: ANN001
    unique_topic: str,
    previous_python: str,
    tmp_path: Path,
) -> None:
    topic = unique_topic
    created = _cli(
        "topic",
        "create",
        "--bootstrap-servers",
        kafka_broker.bootstrap_servers,
        "--topic",
        topic,
        "--partitions",
        str(PARTITIONS),
        "--replication-factor",
        "1",
    )
    assert created.returncode == 0, created.stderr
    ledger = Ledger()
    workers = [Worker(G, f"w{i}", ledger, timeout=60) for i in range(3)]
    everything = frozenset(["A", *(TaskId("A", t) for t in range(4))])
    server = _serve(kafka_broker, topic, tmp_path, None, previous_python)
    servers = [server]
    try:
        status, body = server.request("PUT", f"/v1/groups/{G}/connectors", {"Connectors": [{"Name": "A", "Tasks": 4}]})
        assert status == 200 and body["ErrorCode"] == 0, body
        converge(server, workers, everything)

        # previous -> current -> previous, each by kill -9 of the one serving: the group is what was
        # acknowledged, and the workers carry on at their epochs.
        for python in (None, previous_python):
            acknowledged = _described(server)
            server.kill()
            server = _serve(kafka_broker, topic, tmp_path, server.port, python)
            servers.append(server)
            assert _described(server) == acknowledged
            workers.append(Worker(G, f"w{len(workers)}", ledger, timeout=60))  # a rebalance on this release
            converge(server, workers, everything)
            assert not ledger.violations, ledger.violations

        # The previous release serves: raising the level is refused, and nothing is written.
        refused = _cli("topic", "upgrade-format", "--url", server.url)
        assert refused.returncode == 1
        assert "refused: not every instance reads record format level" in refused.stderr
        assert "Traceback" not in refused.stderr

        # Every instance on this release: the level is raised, and the group's records use it.
        acknowledged = _described(server)
        server.kill()
        server = _serve(kafka_broker, topic, tmp_path, server.port)
        servers.append(server)
        assert _described(server) == acknowledged
        raised = _cli("topic", "upgrade-format", "--url", server.url)
        assert raised.returncode == 0, raised.stderr
        assert f"record format level {MAX_FORMAT_LEVEL} on every partition" in raised.stdout
        _, health = server.request("GET", "/health")
        assert health["FormatLevels"] == {str(p): MAX_FORMAT_LEVEL for p in range(PARTITIONS)}
        described = _cli("topic", "describe", "--bootstrap-servers", kafka_broker.bootstrap_servers, "--topic", topic)
        assert f"record format level: {MAX_FORMAT_LEVEL} (" in described.stdout, described.stdout
        workers.append(Worker(G, f"w{len(workers)}", ledger, timeout=60))
        converge(server, workers, everything)
        replayed = _cli("replay", "verify", "--bootstrap-servers", kafka_broker.bootstrap_servers, "--topic", topic)
        assert replayed.returncode == 0 and "no violations" in replayed.stdout, replayed
        assert not ledger.violations, ledger.violations

        # A rollback to the previous release is refused, partition by partition, never misread.
        server.kill()
        server = _serve(kafka_broker, topic, tmp_path, server.port, previous_python, wait=False)
        servers.append(server)
        wait_for(
            lambda: set(served_statuses(server)) == {"refused"},
            30,
            "the previous release to refuse every partition",
        )
        status, health = server.request("GET", "/health")
        assert status == 503 and health["Status"] == "degraded"
        status, body = server.request("GET", f"/v1/groups/{G}")
        assert body["ErrorCode"] == 15, body  # COORDINATOR_NOT_AVAILABLE, with the reason
        assert f"record format level {MAX_FORMAT_LEVEL}" in body["ErrorMessage"]
        partition = partition_for(G, PARTITIONS)
        assert f"{topic}[{partition}] is at record format level {MAX_FORMAT_LEVEL}" in server.log()
        assert "Traceback" not in server.log()
    finally:
        for s in servers:
            s.stop()
