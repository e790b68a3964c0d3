"""Where the tools `make test` installs are found (the Makefile's `chromium`, `postgresql` and
`promtool` targets), each returned to the test that needs it or else skipped (failed under CI's
switch, tests/support/require.py) with the reason this machine lacks it."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from tests.support.require import require

# Where `make promtool` unpacks Debian's promtool (the Makefile's PROMTOOL).
PROMTOOL_CACHE = Path.home() / ".cache" / "worker-coordinator" / "promtool" / "promtool"


def chromium() -> str:
    """Debian's chromium (`make chromium`), for the headless-browser tests."""
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    require(found is not None, _why_not_installed("chromium", "make chromium"))
    return found  # type: ignore[return-value]


def postgresql_bin() -> Path:
    """The directory of the newest PostgreSQL server's programs (initdb, pg_ctl; `make postgresql`)."""
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"), key=lambda p: int(p.parts[-3]))
    require(bool(found), _why_not_installed("postgresql", "make postgresql"))
    return found[-1].parent


def promtool() -> str:
    """promtool: PATH's, else the one `make promtool` unpacks from Debian's prometheus package (no root needed,
    only apt-get download)."""
    found = shutil.which("promtool") or (str(PROMTOOL_CACHE) if PROMTOOL_CACHE.exists() else None)
    require(
        found is not None,
        "promtool is not installed: `make promtool` unpacks it from Debian's prometheus package (apt-get "
        "download), which needs apt; the structural test of the rules still runs",
    )
    return found  # type: ignore[return-value]


def _why_not_installed(package: str, target: str) -> str:
    """`make test` installs Debian's `package` system-wide (`target`) wherever it can, so a test skips only where
    that is impossible; the reason says which case this machine is."""
    if os.geteuid() != 0:
        return (
            f"Debian's {package} is not installed and `{target}` needs root to install it (apt-get install {package})"
        )
    if shutil.which("apt-get") is None:
        return f"Debian's {package} is not installed and cannot be here: no apt-get"
    return (
        f"Debian's {package} is not installed: run `{target}` (part of `make test`), which installs it here; "
        f"if it ran, its apt-get install failed (its line on stderr)"
    )
