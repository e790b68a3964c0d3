"""Add the bytes of new golden cases (tests/golden_cases.py) to records.json. Never rewrites:
the bytes of an existing case are the format, and changing them is what the golden test catches."""

from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent.parent), str(HERE.parent)]

from golden_cases import CASES  # noqa: E402

from records import encode  # noqa: E402

GOLDEN = HERE / "records.json"


def main() -> int:
    golden = json.loads(GOLDEN.read_text()) if GOLDEN.exists() else {}
    added = []
    for name, (record, version) in CASES.items():
        if name in golden:
            continue
        key, value = encode(record, version)
        golden[name] = {"key": key.hex(), "value": None if value is None else value.hex()}
        added.append(name)
    GOLDEN.write_text(json.dumps(golden, indent=2, sort_keys=True) + "\n")
    print(f"added {len(added)} golden case(s): {', '.join(added) or '-'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
