"""Rewrites tests/durations.json, the seconds each test module took, from the output of a whole run
with `--durations=0` (`make test PYTEST_ARGS=--durations=0 | tee LOG`, then
`python -m tests.durations LOG`). tests/conftest.py starts the longest units of work first."""

from __future__ import annotations

import json
import re
import sys
from collections import defaultdict
from pathlib import Path

# "12.34s call     tests/test_x.py::test_y[param]" (setup and teardown lines too)
LINE = re.compile(r"^\s*([0-9.]+)s (?:setup|call|teardown)\s+tests/(test_\w+)\.py::")


def module_seconds(log: str) -> dict[str, float]:
    seconds: dict[str, float] = defaultdict(float)
    for line in log.splitlines():
        if match := LINE.match(line):
            seconds[match[2]] += float(match[1])
    return {module: round(s, 1) for module, s in sorted(seconds.items())}


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m tests.durations LOG", file=sys.stderr)
        return 2
    seconds = module_seconds(Path(argv[0]).read_text(errors="replace"))
    if not seconds:
        print(f"{argv[0]}: no --durations=0 lines in it", file=sys.stderr)
        return 1
    Path(__file__).with_name("durations.json").write_text(json.dumps(seconds, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
