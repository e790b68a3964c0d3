"""The project's optional extras (pyproject.toml), installed on first use.

`make run` installs only what the main job needs; the commands that need an extra (`coordinator
audit`, `sql` and `spark-conf`: `spark`; `replay timeline --plot FILE.png`: `plot`) call `ensure`
before they do anything else. When the extra's modules do not import, it says so in one line on stderr
and installs the extra with pip into the running interpreter's environment, as `pip install
'worker-coordinator[spark]'` would, then goes on.

The extra's requirements are read from the installed distribution's own metadata (`Requires-Dist:
pyspark==4.2.0; extra == "spark"`), not from the name `worker-coordinator[spark]`: for an editable
install (a checkout, `pip install -e .`) that name would make pip look for the project on the
index, and `-e 'CHECKOUT[spark]'` would rebuild the project itself. The requirements install the same
versions either way.

Where pip cannot do it (no pip in the environment, no index reachable, PIP_NO_INDEX) or may not
(COORDINATOR_INSTALL_EXTRAS=0, e.g. a server image), the command stops with one line saying what to
install, never a traceback."""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import os
import re
import subprocess
import sys

from coordinator.errors import CliError

DISTRIBUTION = "worker-coordinator"
# Set to 0 to refuse instead of installing (the line then says what to install by hand).
SWITCH = "COORDINATOR_INSTALL_EXTRAS"
_EXTRA_MARKER = re.compile(r"""^\s*extra\s*==\s*["']([^"']+)["']\s*$""")


def missing(modules: tuple[str, ...]) -> list[str]:
    """The `modules` that cannot be imported (looked up, not imported: pyspark takes a second)."""
    out = []
    for name in modules:
        try:
            if importlib.util.find_spec(name) is None:
                out.append(name)
        except (ImportError, ValueError):
            out.append(name)
    return out


def requirements(extra: str) -> list[str]:
    """The extra's requirements as the installed project declares them (markers dropped)."""
    try:
        declared = importlib.metadata.requires(DISTRIBUTION) or []
    except importlib.metadata.PackageNotFoundError:
        return []
    out = []
    for line in declared:
        requirement, _, marker = line.partition(";")
        match = _EXTRA_MARKER.match(marker)
        if match is not None and match[1] == extra:
            out.append(requirement.strip())
    return out


def ensure(extra: str, modules: tuple[str, ...], purpose: str) -> None:
    """Return once `modules` import, installing `extra` first if need be; CliError in one line if it cannot."""
    absent = missing(modules)
    if not absent:
        return
    by_hand = f"pip install '{DISTRIBUTION}[{extra}]' (or '.[{extra}]' in a checkout)"
    wanted = requirements(extra)
    if not wanted:
        raise CliError(f"{purpose} needs {', '.join(absent)}, which is not installed: {by_hand}")
    if os.environ.get(SWITCH, "1").strip().lower() in ("0", "no", "false", "off"):
        raise CliError(f"{purpose} needs {', '.join(absent)}, which is not installed ({SWITCH}=0): {by_hand}")
    if subprocess.run([sys.executable, "-m", "pip", "--version"], capture_output=True, check=False).returncode != 0:
        raise CliError(f"{purpose} needs {', '.join(absent)}, and this environment has no pip: {by_hand}")
    print(
        f"coordinator: {purpose} needs the '{extra}' extra, not installed yet: installing {' '.join(wanted)} "
        f"into {sys.prefix} with pip (once)",
        file=sys.stderr,
        flush=True,
    )
    done = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *wanted],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        lines = [line.strip() for line in done.stderr.splitlines() if line.strip()]
        why = next((line for line in reversed(lines) if line.startswith("ERROR")), lines[-1] if lines else "")
        raise CliError(f"installing the '{extra}' extra failed (pip exit {done.returncode}: {why}): {by_hand}")
    importlib.invalidate_caches()  # the new site-packages entries, for this very process's imports
    still = missing(modules)
    if still:
        raise CliError(f"installed the '{extra}' extra, yet {', '.join(still)} does not import: {by_hand}")
