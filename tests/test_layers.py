"""The layers of `coordinator/` (its `__init__` says which) import one way: a module imports only
modules of its own layer or of the layers below it, and no module-level import cycle exists.
The command line imports a subcommand's module only when that subcommand runs.

`replay` is two layers (its `__init__` says so): its pure history (replaying records, their events,
the invariants, the picture), built on the state machine alone, lies below the service, whose group
page draws the timeline with it; its Kafka and dump-file reading (`replay.source`) and its commands
(`replay.cli`) lie above the service and the SDK, as tools built on the coordinator."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# What each layer may import besides itself; a module is in the longest key it is, or is inside.
# `replay` (the history of the topic: reading it, replaying it, its commands) stands on the state
# machine, the wire types and the Kafka tooling, below the service, which draws a group's timeline
# with it on the group page; `spark` stands on all of them (DESIGN §2).
ALLOWED = {
    "records": set(),
    "coordinator.errors": set(),
    "coordinator.core": {"records"},
    # The topic's tooling knows the record format (the level record `topic describe` reads).
    "coordinator.tools": {"records", "coordinator.errors"},
    "coordinator.api": {"records", "coordinator.core", "coordinator.tools"},
    "replay": {"records", "coordinator.core", "coordinator.api", "coordinator.tools", "coordinator.errors"},
    "coordinator.service": {
        "records",
        "coordinator.core",
        "coordinator.api",
        "coordinator.tools",
        "coordinator.errors",
        "replay",
    },
    # The gateway is a service of its own beside the coordinator's (DESIGN §2): it does not import it.
    "coordinator.gateway": {
        "records",
        "coordinator.core",
        "coordinator.api",
        "coordinator.tools",
        "coordinator.errors",
    },
    "coordinator.sdk": {"records", "coordinator.core", "coordinator.api", "coordinator.tools", "coordinator.errors"},
    "coordinator.cli": {"coordinator.errors", "coordinator.tools"},
    "coordinator.__main__": {"coordinator.cli"},
    "coordinator": set(),
    "spark": {
        "records",
        "coordinator.core",
        "coordinator.api",
        "coordinator.tools",
        "coordinator.service",
        "coordinator.sdk",
        "coordinator.gateway",
        "coordinator.errors",
        "replay",
    },
}


def layer(module: str) -> str | None:
    """The longest ALLOWED key that `module` is, or is inside."""
    best = None
    for name in ALLOWED:
        if (module == name or module.startswith(name + ".")) and (best is None or len(name) > len(best)):
            best = name
    return best


def modules() -> dict[str, Path]:
    out = {}
    for package in ("coordinator", "records", "replay", "spark"):
        for path in (ROOT / package).rglob("*.py"):
            out[".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")] = path
    return out


def imports(module: str, path: Path, top_level_only: bool) -> set[str]:
    tree = ast.parse(path.read_text())
    nodes = tree.body if top_level_only else list(ast.walk(tree))
    found = set()
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in nodes:
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([base] if base else []))
            found.add(base)
            found |= {f"{base}.{alias.name}" for alias in node.names}  # `from pkg import module`
    known = modules()
    return {name for name in found if name in known}


@pytest.mark.parametrize("module", sorted(modules()))
def test_module_imports_only_its_layer_and_those_below(module: str) -> None:
    own = layer(module)
    assert own is not None, f"{module} belongs to no layer: add it to ALLOWED"
    bad = sorted(
        name
        for name in imports(module, modules()[module], top_level_only=False)
        if layer(name) != own and layer(name) not in ALLOWED[own] and name != "coordinator"
    )
    assert not bad, f"{module} ({own}) imports {bad}"


def test_no_import_cycles_at_module_level() -> None:
    known = modules()
    graph = {m: imports(m, p, top_level_only=True) - {m} for m, p in known.items()}
    # A package's own __init__ is imported first by its submodules: that edge is not a cycle.
    for m in graph:
        graph[m] = {n for n in graph[m] if not m.startswith(n + ".")}
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(m: str) -> None:
        state[m] = 1
        stack.append(m)
        for n in sorted(graph[m]):
            if state.get(n) == 1:
                raise AssertionError("import cycle: " + " -> ".join(stack[stack.index(n) :] + [n]))
            if n not in state:
                visit(n)
        stack.pop()
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m)


def _imported_after(code: str) -> set[str]:
    out = subprocess.run(
        [sys.executable, "-c", code + "\nimport sys; print(' '.join(sorted(sys.modules)))"],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    ).stdout
    return set(out.split())


def test_the_command_line_imports_no_subcommand_until_one_runs() -> None:
    loaded = _imported_after("import coordinator.cli")
    assert not {m for m in loaded if m.split(".")[0] in ("replay", "spark", "pyspark", "aiohttp", "confluent_kafka")}
    assert not {m for m in loaded if m.startswith(("coordinator.service", "coordinator.sdk", "coordinator.core"))}


def test_the_main_job_imports_no_extra() -> None:
    """`make run` installs no extra (pyproject.toml: spark, plot, test): what `coordinator demo` imports,
    in its own process and in the `coordinator serve` it starts, loads none of their modules."""
    loaded = _imported_after(
        "import contextlib, io; from coordinator import cli\n"
        "with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit): cli.main(['demo', '--help'])\n"
        "import coordinator.sdk.demo, coordinator.sdk.demo_connect, coordinator.service.serve"
    )
    extras = ("pyspark", "pyarrow", "pandas", "matplotlib", "numpy", "pytest", "hypothesis", "schemathesis", "yaml")
    assert "coordinator.service.serve" in loaded
    assert not {m for m in loaded if m.split(".")[0] in extras}


def test_the_history_replay_keeps_loads_neither_kafka_nor_the_service() -> None:
    """What the group page imports of `replay` (history, events, plot) loads no Kafka client, no
    HTTP server and no matplotlib; the page reads the topic itself."""
    loaded = _imported_after("import replay.history, replay.events, replay.plot, replay.invariants")
    assert not {
        m
        for m in loaded
        if m.split(".")[0] in ("confluent_kafka", "aiohttp", "matplotlib")
        or m.startswith(("coordinator.service", "coordinator.sdk", "replay.source", "replay.cli", "replay.commands"))
    }


def test_help_lists_every_subcommand_without_importing_them() -> None:
    code = (
        "import contextlib, io; from coordinator import cli\n"
        "buf = io.StringIO()\n"
        "with contextlib.redirect_stdout(buf), contextlib.suppress(SystemExit): cli.main(['--help'])\n"
        "print(buf.getvalue())"
    )
    out = subprocess.run(
        [sys.executable, "-c", code + "\nimport sys; print('MODULES', ' '.join(sorted(sys.modules)))"],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    ).stdout
    text, _, loaded = out.partition("MODULES")
    for command in ("serve", "groups", "worker", "demo", "topic", "dev-broker", "replay", "audit"):
        assert command in text
    assert not {m for m in loaded.split() if m.split(".")[0] in ("replay", "spark", "aiohttp", "confluent_kafka")}


def test_a_subcommand_imports_only_its_own_layers() -> None:
    """`coordinator topic --help` needs Kafka tooling, not the state machine, the SDK or Spark."""
    code = (
        "import contextlib, io; from coordinator import cli\n"
        "with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit): "
        "cli.main(['topic', 'create', '--help'])"
    )
    loaded = _imported_after(code)
    assert "coordinator.tools.topic" in loaded
    assert not {
        m
        for m in loaded
        if m.split(".")[0] in ("replay", "spark", "aiohttp")
        or m.startswith(("coordinator.core", "coordinator.sdk", "coordinator.service"))
    }


@pytest.mark.parametrize("command", sorted(__import__("coordinator.cli").cli.COMMANDS))
def test_every_subcommand_builds_its_parser_alone(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Loading one subcommand (`dump`, whose module also registers `replay`) leaves none missing
    or registered twice."""
    from coordinator import cli

    with pytest.raises(SystemExit) as exit_:
        cli.build_parser([command]).parse_args([command, "--help"])
    assert exit_.value.code == 0
    assert f"coordinator {command}" in capsys.readouterr().out
