"""Our view of a real Connect cluster's group, for the real-JVM tests: `coordinator groups describe`
as JSON, and the generation the group settles at."""

from __future__ import annotations

import subprocess
import sys
import time
from typing import Any

import orjson


def describe(url: str, group: str, *flags: str) -> dict[str, Any]:
    """`coordinator groups describe GROUP --format json` against the coordinator at `url`."""
    out = subprocess.run(
        [sys.executable, "-m", "coordinator", "groups", "describe", group, "--url", url, "--format", "json", *flags],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    return orjson.loads(out.stdout)


def settled_generation(url: str, group: str) -> int | None:
    """The group's generation when it is Stable and still the same 3 s later, else None."""
    before = describe(url, group)
    time.sleep(3.0)
    after = describe(url, group)
    if after["State"].upper() == "STABLE" and after["Generation"] == before["Generation"]:
        return after["Generation"]
    return None
