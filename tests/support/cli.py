"""`coordinator` run in-process, as the console script would run it."""

from __future__ import annotations

import pytest

from coordinator import cli


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """`coordinator *argv`: its exit code, stdout and stderr (read from the test's capsys)."""
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err
