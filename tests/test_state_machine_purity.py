"""DESIGN §2-3: everything under `coordinator/core` (the state machine, the assignors) is sans-I/O.
It imports no Kafka client, no HTTP, no asyncio, and never reads a clock: time is the `now`
argument of every handler."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CORE = ROOT / "coordinator" / "core"
# Every module under the core package: a new one is checked without being listed.
PURE_MODULES = sorted(
    ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__") for path in CORE.rglob("*.py")
)
FORBIDDEN_IMPORTS = {"confluent_kafka", "aiohttp", "asyncio", "pyspark", "socket", "threading", "time", "datetime"}


def test_importing_the_state_machine_loads_no_io_library() -> None:
    code = (
        f"import sys, importlib; [importlib.import_module(m) for m in {PURE_MODULES!r}]; "
        "print(sorted({m.split('.')[0] for m in sys.modules} & "
        "{'confluent_kafka', 'aiohttp', 'asyncio', 'pyspark', 'aiokafka'}))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT).stdout
    assert out.strip() == "[]"


@pytest.mark.parametrize("module", PURE_MODULES)
def test_module_imports_no_clock_and_no_io(module: str) -> None:
    path = ROOT / (module.replace(".", "/") + ".py")
    if not path.exists():
        path = ROOT / module.replace(".", "/") / "__init__.py"
    tree = ast.parse(path.read_text())
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            imported.add(node.module.split(".")[0])
    assert not imported & FORBIDDEN_IMPORTS, f"{module} imports {sorted(imported & FORBIDDEN_IMPORTS)}"
