"""CI's switch (`COORDINATOR_TESTS_REQUIRE_ALL`, tests/support/require.py): a test that needs a tool
`make test` installs skips without it, and fails under the switch, which `.ci/run` sets; the Makefile's
installs fail loudly under it; `.ci/run` fails when pytest collected nothing. Each is run for real: pytest
on a generated test file, `.ci/run` itself, `make` on the install targets with a PATH that lacks apt-get."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.require import SWITCH

ROOT = Path(__file__).resolve().parent.parent
REASON = "the frobnicator is not installed (`make frobnicator` installs it)"


def _env(switch: str | None, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != SWITCH}
    if switch is not None:
        env[SWITCH] = switch
    return {**env, **extra}


def _pytest(tmp_path: Path, switch: str | None) -> subprocess.CompletedProcess[str]:
    """pytest on a test that needs a missing tool and one whose tool is there, outside this project's
    configuration (its own rootdir, no plugins), with tests.support importable."""
    (tmp_path / "test_needs_tools.py").write_text(
        "from tests.support.require import require\n\n\n"
        "def test_needs_a_missing_tool():\n"
        f"    require(False, {REASON!r})\n\n\n"
        "def test_needs_a_present_tool():\n"
        "    require(True, 'never said')\n"
    )
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rsf", "--rootdir", str(tmp_path), str(tmp_path)],
        cwd=tmp_path,
        env=_env(switch, PYTHONPATH=str(ROOT), PYTEST_DISABLE_PLUGIN_AUTOLOAD="1"),
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize("switch", [None, "", "0", "no"])
def test_without_the_switch_a_missing_tool_skips_with_its_reason(tmp_path: Path, switch: str | None) -> None:
    done = _pytest(tmp_path, switch)
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.search(r"\b1 passed, 1 skipped\b", done.stdout), done.stdout
    # At the test that needs the tool (its def, line 4), not inside the helper.
    assert f"SKIPPED [1] test_needs_tools.py:4: {REASON}" in done.stdout, done.stdout
    assert "never said" not in done.stdout


@pytest.mark.parametrize("switch", ["1", "yes"])
def test_under_the_switch_a_missing_tool_fails_with_its_reason(tmp_path: Path, switch: str) -> None:
    done = _pytest(tmp_path, switch)
    assert done.returncode == 1, done.stdout + done.stderr
    assert re.search(r"\b1 failed, 1 passed\b", done.stdout) and "skipped" not in done.stdout, done.stdout
    assert "FAILED test_needs_tools.py::test_needs_a_missing_tool" in done.stdout, done.stdout
    assert f"\n{REASON} ({SWITCH} is set: everything `make test` installs must be here)\n" in done.stdout


def _fake_make(tmp_path: Path, test_exit: int) -> tuple[dict[str, str], Path]:
    """A `make` first on PATH that logs its switch and arguments, and exits `test_exit` for `make test`: what
    `.ci/run` does with pytest's exit code, without the half-hour suite."""
    bin_dir, log = tmp_path / "bin", tmp_path / "make.log"
    bin_dir.mkdir()
    (bin_dir / "make").write_text(
        f'#!/bin/sh\necho "${{{SWITCH}:-unset}} $*" >> "{log}"\n[ "$1" = test ] && exit {test_exit}\nexit 0\n'
    )
    (bin_dir / "make").chmod(0o755)
    return _env(None, PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}", PYTEST_ARGS="-k nothing"), log


@pytest.mark.parametrize("test_exit", [0, 1, 5])
def test_ci_run_sets_the_switch_and_fails_unless_pytest_passed(tmp_path: Path, test_exit: int) -> None:
    env, log = _fake_make(tmp_path, test_exit)
    done = subprocess.run([str(ROOT / ".ci" / "run")], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == test_exit, done.stdout + done.stderr
    assert log.read_text().splitlines() == ["1 lint", "1 test PYTEST_ARGS=-k nothing"]
    said = "pytest collected no tests (exit 5): nothing was checked"
    assert (said in done.stderr) == (test_exit == 5), done.stderr


def _make(tmp_path: Path, target: str, switch: str | None) -> subprocess.CompletedProcess[str]:
    """`make TARGET` with a PATH of a few basic tools and neither apt-get nor the tool (so nothing is ever
    installed here): the install cannot succeed."""
    bin_dir = tmp_path / "basic-bin"
    bin_dir.mkdir(exist_ok=True)
    for tool in ("mktemp", "chmod", "rm", "id"):
        found = subprocess.run(["sh", "-c", f"command -v {tool}"], capture_output=True, text=True).stdout.strip()
        if not (bin_dir / tool).exists():
            (bin_dir / tool).symlink_to(found)
    make = subprocess.run(["sh", "-c", "command -v make"], capture_output=True, text=True).stdout.strip()
    return subprocess.run(
        [make, "-s", "-C", str(ROOT), target, f"PROMTOOL={tmp_path / 'absent' / 'promtool'}"],
        env=_env(switch, PATH=str(bin_dir), HOME=str(tmp_path)),
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize(
    ("target", "said"),
    [
        ("promtool", "make promtool: Debian's prometheus package could not be fetched"),
        ("chromium", "make chromium: Debian's chromium could not be installed"),
    ],
)
def test_an_install_that_fails_warns_and_fails_loudly_under_the_switch(tmp_path: Path, target: str, said: str) -> None:
    warned = _make(tmp_path, target, None)
    assert warned.returncode == 0 and said in warned.stderr, warned.stderr
    failed = _make(tmp_path, target, "1")
    assert failed.returncode != 0 and said in failed.stderr, failed.stderr


def test_each_install_target_honours_the_switch() -> None:
    """PostgreSQL's target cannot be made to fail here without removing the server, so the recipes are read:
    each install target's failure branch runs the switch's check (the two above show that check works)."""
    makefile = (ROOT / "Makefile").read_text()
    for target in ("promtool", "chromium", "postgresql"):
        recipe = re.search(rf"^{target}:\n((?:\t.*\n)+)", makefile, re.MULTILINE)
        assert recipe, target
        assert "could not be" in recipe.group(1) and "$(REQUIRE_ALL)" in recipe.group(1), target


def test_an_xfail_that_passes_fails_the_run(tmp_path: Path) -> None:
    """pyproject.toml's pytest settings make every xfail strict: a mark cannot hide a promise that holds (nor
    stay on a fixed bug)."""
    (tmp_path / "test_marked.py").write_text(
        "import pytest\n\n\n@pytest.mark.xfail(reason='thought broken')\ndef test_holds():\n    assert True\n"
    )
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "pytest_timeout", "-c", str(ROOT / "pyproject.toml"),
         "--rootdir", str(tmp_path), str(tmp_path)],
        cwd=tmp_path,
        env=_env(None, PYTEST_DISABLE_PLUGIN_AUTOLOAD="1"),
        capture_output=True,
        text=True,
        timeout=120,
    )  # fmt: skip
    assert done.returncode == 1 and "XPASS(strict)" in done.stdout and "1 failed" in done.stdout, done.stdout
