"""A test that needs a tool or package `make test` installs (chromium, PostgreSQL's server,
promtool, Java, an extra) calls `require(found, reason)`: without it the test skips with the reason
(a developer's machine may lack root or apt), except under CI's switch, where the same absence is a
failure with the reason. `.ci/run` sets the switch, so CI cannot go green without a part the README
promises; `make test` honours it too (its installs then fail loudly instead of warning)."""

from __future__ import annotations

import os

import pytest

SWITCH = "COORDINATOR_TESTS_REQUIRE_ALL"


def required() -> bool:
    """Whether the switch is on: any value but empty, 0, false or no (as the Makefile reads it)."""
    return os.environ.get(SWITCH, "").strip().lower() not in ("", "0", "false", "no")


def require(found: bool, reason: str) -> None:
    """Nothing if `found`; else a skip saying `reason`, or under the switch a failure saying it."""
    if found:
        return
    if required():
        pytest.fail(f"{reason} ({SWITCH} is set: everything `make test` installs must be here)", pytrace=False)
    try:
        pytest.skip(reason)
    except pytest.skip.Exception as e:
        e._use_item_location = True  # reported at the test that needs the tool (as a skipif mark is), not here
        raise
