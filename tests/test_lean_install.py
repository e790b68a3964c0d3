"""A newcomer's first run installs what the main job needs and nothing more (issue 33, item 2).

A fresh virtual environment is made with the Makefile's own `install` target (what `make run` runs,
pointed at a venv of the test's: `make install VENV=...`); in it Spark, matplotlib and pytest are not
installed, and the main job's commands still start. The extras come on first use: a PNG plot installs
the `plot` extra saying so in one line, and where pip may not reach an index the Spark commands refuse
in one line instead. These tests use pip against the index (or pip's cache) as `make run` does."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# What the extras bring (pyproject.toml), as the modules one would import.
EXTRAS_MODULES = ("pyspark", "pyarrow", "pandas", "matplotlib", "pytest", "hypothesis", "schemathesis", "yaml")

pytestmark = pytest.mark.timeout(900)


@pytest.fixture(scope="module")
def lean_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    venv = tmp_path_factory.mktemp("lean") / "venv"
    done = subprocess.run(
        ["make", "--no-print-directory", "install", f"VENV={venv}", f"PYTHON={sys.executable}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=_env(),
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return venv


def _env(**extra: str) -> dict[str, str]:
    """The test's environment without this checkout's PYTHONPATH: the venv's own install is what runs."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    return {**env, **extra}


def _run(venv: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(venv / "bin" / args[0]), *args[1:]],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=_env(**env),
        timeout=600,
        check=False,
    )


def _importable(venv: Path, modules: tuple[str, ...]) -> list[str]:
    code = "import importlib.util, sys; print(*[m for m in sys.argv[1:] if importlib.util.find_spec(m)])"
    done = _run(venv, "python", "-c", code, *modules)
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


def test_make_install_leaves_out_every_extra_and_the_main_job_starts(lean_venv: Path) -> None:
    assert _importable(lean_venv, EXTRAS_MODULES) == []
    for command in (("demo", "--help"), ("serve", "--help"), ("dev-broker", "--help"), ("topic", "create", "--help")):
        done = _run(lean_venv, "coordinator", *command)
        assert done.returncode == 0, (command, done.stderr)
        assert "usage: coordinator" in done.stdout
    # What the main job imports, in the process that runs it and the coordinator it starts.
    imports = "import coordinator.sdk.demo, coordinator.sdk.demo_connect, coordinator.service.serve; print('ok')"
    done = _run(lean_venv, "python", "-c", imports)
    assert (done.returncode, done.stdout.strip()) == (0, "ok"), done.stderr


def test_a_spark_command_without_an_index_refuses_in_one_line(lean_venv: Path, tmp_path: Path) -> None:
    done = _run(
        lean_venv,
        "coordinator",
        "sql",
        "--warehouse",
        str(tmp_path),
        "SELECT 1",
        PIP_NO_INDEX="1",
        PIP_FIND_LINKS="",
        PIP_NO_CACHE_DIR="1",
    )
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    # The line saying what it tries, then the one saying it could not and what to install by hand.
    assert len(lines) == 2, done.stderr
    assert "installing pyspark==" in lines[0]
    assert "installing the 'spark' extra failed" in lines[1] and "worker-coordinator[spark]" in lines[1]
    assert _importable(lean_venv, ("pyspark",)) == []


def test_a_spark_command_refuses_in_one_line_where_installing_is_switched_off(lean_venv: Path, tmp_path: Path) -> None:
    done = _run(
        lean_venv, "coordinator", "sql", "--warehouse", str(tmp_path), "SELECT 1", COORDINATOR_INSTALL_EXTRAS="0"
    )
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "COORDINATOR_INSTALL_EXTRAS=0" in lines[0] and "[spark]" in lines[0], done.stderr


def test_a_png_plot_installs_the_plot_extra_on_first_use(lean_venv: Path, tmp_path: Path) -> None:
    missing_dump = tmp_path / "no-such.dump"
    args = ("coordinator", "replay", "timeline", "--group", "g", "--file", str(missing_dump))
    done = _run(lean_venv, *args, "--plot", str(tmp_path / "p.png"))
    assert "Traceback" not in done.stderr
    first, *rest = done.stderr.strip().splitlines()
    assert "needs the 'plot' extra" in first and "installing matplotlib>=" in first, done.stderr
    # Installed, the command goes on: to the dump, which is not there (its own one-line error).
    assert rest and str(missing_dump) in rest[-1] and done.returncode != 0, done.stderr
    assert _importable(lean_venv, ("matplotlib",)) == ["matplotlib"]
    again = _run(lean_venv, *args, "--plot", str(tmp_path / "p.png"))
    assert "extra" not in again.stderr and len(again.stderr.strip().splitlines()) == 1, again.stderr
