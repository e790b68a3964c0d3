"""This installation's release: the package version (`pyproject.toml`), which `--version`, the
`coordinator_build` metric and `/health` show, and `coordinator topic upgrade-format` reads from each
instance. Releases are tagged `v<version>` and listed in CHANGELOG.md."""

from __future__ import annotations

import importlib.metadata
from functools import cache

DISTRIBUTION = "worker-coordinator"


@cache
def release() -> str:
    """The installed distribution's version; "unknown" for a source tree that was never installed."""
    try:
        return importlib.metadata.version(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"
