"""Every subcommand's usage errors are one line on stderr with exit code 2 and no traceback, and
where the subcommand logs JSON (`--log-format json`, COORDINATOR_LOG_FORMAT=json) that line is one
JSON object with level, message and event (issue 29, item 9).

The subcommands are walked from the parser itself (`cli.build_parser()`, down to the leaves such as
`topic create`), so a new one is tested from the day it is registered: each gets an unknown flag
and a flag a value it refuses (outside its choices, or not of its type). `CONFLICTS` adds the combinations each
subcommand refuses in its own code (its `CliError(..., exit_code=2)`s); every one of them is refused
before anything is started or asked of Kafka or a coordinator (the addresses below answer nothing).
Each case runs `coordinator` as a process, as a user or a container runs it.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import orjson
import pytest

from coordinator import cli

ROOT = Path(__file__).resolve().parents[1]
NOWHERE = "127.0.0.1:1"  # a port nobody listens on: a check that did not fire fails fast, it never serves

# serve refuses all of these before it waits for Kafka; --connect-timeout 1 bounds a check that would not.
SERVE = ["serve", "--bootstrap-server", NOWHERE, "--connect-timeout", "1"]
GATEWAY = [
    "gateway",
    "--groups",
    "ours-.*",
    "--listen",
    "127.0.0.1:0",
    "--bootstrap-server",
    NOWHERE,
    "--coordinator",
    NOWHERE,
]
HTTP = ["--url", f"http://{NOWHERE}", "--timeout", "1"]  # the admin commands' coordinator

# A case: (arguments, what the one line says, extra environment). {tmp} is a folder of the files below.
Case = tuple[list[str], str, dict[str, str]]

CONFLICTS: dict[str, list[Case]] = {
    "serve": [
        (
            [*SERVE, "--allow-anonymous", "--ownership", "group", "--peer", "http://127.0.0.1:1"],
            "--peer (COORDINATOR_PEERS) is for static ownership only",
            {},
        ),
        (
            [*SERVE, "--allow-anonymous", "--ownership", "group"],
            "is for static ownership only",
            {"COORDINATOR_PEERS": "http://127.0.0.1:1"},
        ),
        (
            [*SERVE, "--allow-anonymous", "--standby-partitions", "1"],
            "--standby-partitions (COORDINATOR_STANDBY_PARTITIONS) is for group ownership only",
            {},
        ),
        (
            [*SERVE, "--allow-anonymous", "--ownership", "group"],
            "--standby-partitions -1: expected 0 or more",
            {"COORDINATOR_STANDBY_PARTITIONS": "-1"},
        ),
        (
            [*SERVE, "--allow-anonymous", "--kafka-advertised", "127.0.0.1:9"],
            "--kafka-advertised needs --kafka-listener",
            {},
        ),
        (
            [*SERVE, "--allow-anonymous", "--kafka-listener", "127.0.0.1:9", "--kafka-gateway-principals", "gw"],
            "--kafka-gateway-principals needs --kafka-listener and --tokens",
            {},
        ),
        (
            [*SERVE, "--allow-anonymous", "--kafka-listener", "nowhere"],
            "--kafka-listener 'nowhere': expected HOST:PORT",
            {},
        ),
        ([*SERVE, "--allow-anonymous", "--listen", "8400"], "--listen '8400': expected HOST:PORT", {}),
        ([*SERVE, "--allow-anonymous", "--partitions", "0-x"], "--partitions '0-x': expected 'all' or a list", {}),
        ([*SERVE, "--allow-anonymous", "--tls-cert", "{tmp}/tokens"], "TLS needs both", {}),
        ([*SERVE, "--tokens", "{tmp}/bad-tokens"], "expected 'TOKEN PRINCIPAL'", {}),
        ([*SERVE], "--allow-anonymous", {}),  # no tokens, no anonymous: nobody could be served
        # librdkafka refuses it at every attempt: refused at once, not retried for --connect-timeout.
        (
            [*SERVE, "--allow-anonymous", "--connect-timeout", "60", "--kafka-config", "no.such.property=1"],
            'No such configuration property: "no.such.property"',
            {},
        ),
        (["serve"], "no Kafka bootstrap servers", {}),
        (
            [*SERVE, "--allow-anonymous", "--connect-timeout", "soon"],
            "argument --connect-timeout: expected a number",
            {},
        ),
        (
            [*SERVE, "--allow-anonymous"],
            "got COORDINATOR_SESSION_TIMEOUT_MS='abc'",
            {"COORDINATOR_SESSION_TIMEOUT_MS": "abc"},
        ),
        (
            [*SERVE, "--allow-anonymous"],
            "invalid choice: 'grop' (from COORDINATOR_OWNERSHIP",
            {"COORDINATOR_OWNERSHIP": "grop"},
        ),
    ],
    "gateway": [
        ([*GATEWAY, "--coordinator-user", "gw"], "--coordinator-user and --coordinator-password-file go together", {}),
        (
            [*GATEWAY, "--coordinator-user", "gw", "--coordinator-password-file", "{tmp}/missing"],
            "--coordinator-password-file: cannot read",
            {},
        ),
        ([*GATEWAY, "--coordinator-user", "gw", "--coordinator-password-file", "{tmp}/empty"], "is empty", {}),
        ([*GATEWAY, "--tls-cert", "{tmp}/tokens"], "TLS needs both", {}),
        ([*GATEWAY, "--broker-tls-ca", "{tmp}/missing"], "--broker-tls-ca: cannot load", {}),
        ([*GATEWAY, "--groups", "("], "--groups: missing )", {}),
        ([*GATEWAY, "--listen", "127.0.0.1:0,127.0.0.1:1"], "--listen takes one HOST:PORT", {}),
        (["gateway", "--listen", "127.0.0.1:0"], "--groups is required", {}),
        ([*GATEWAY, "--coordinator", "nowhere"], "--coordinator:", {}),
        ([*GATEWAY], "argument --log-level: invalid choice: 'info'", {"COORDINATOR_LOG_LEVEL": "info"}),
    ],
    "groups list": [
        (["groups", "list", *HTTP, "--ca-file", "{tmp}/missing"], "cannot load --ca-file", {}),
        (["groups", "list", "--url", f"http://{NOWHERE}", "--timeout", "soon"], "argument --timeout", {}),
    ],
    "groups describe": [
        (["groups", "describe", "g", "--group", "h", *HTTP], "the group is given twice", {}),
        (["groups", "describe", *HTTP], "which group? pass --group GROUP", {}),
        (["groups", "describe", "g", "--members", "--tasks", *HTTP], "one view at a time", {}),
        (["groups", "describe", "g", "--verbose", *HTTP], "--verbose goes with --members", {}),
        (["groups", "describe", "g", "--watch", "0", *HTTP], "argument --watch: expected seconds in", {}),
    ],
    "connectors set": [
        # The example: with --group, the first word is a connector too, and G is none.
        (["connectors", "set", "G", "--group", "H", *HTTP], "with --group, every argument is a connector", {}),
        (["connectors", "set", "--group", "g", "A=1", "A=2", *HTTP], "a connector is named twice", {}),
        (["connectors", "set", "g", "A", *HTTP], "expected NAME=TASKS, got 'A'", {}),
    ],
    "config set": [
        (["config", "set", "x", "--group", "y", *HTTP], "the group is given twice", {}),
        (["config", "set", "--session-timeout-ms", "7000", *HTTP], "which group?", {}),
        (["config", "set", "g", "--session-timeout-ms", "7s", *HTTP], "argument --session-timeout-ms", {}),
    ],
    "worker": [
        (["worker", "--group", "g", "--count", "-1", "--url", f"http://{NOWHERE}"], "--count must not be negative", {}),
        (["worker", "--group", "g", "--scenario", "{tmp}/missing", "--url", f"http://{NOWHERE}"], "cannot read", {}),
        (
            ["worker", "--group", "g", "--scenario", "{tmp}/bad-scenario", "--url", f"http://{NOWHERE}"],
            "bad-scenario:1: a line starts with the time in seconds",
            {},
        ),
        (["worker", "--count", "1", "--url", f"http://{NOWHERE}"], "the following arguments are required: --group", {}),
    ],
    # demo starts a broker's topic, a coordinator and workers once its flags parse: only parse errors here.
    "demo": [
        (["demo", "--workers", "five"], "argument --workers", {}),
        (["demo", "--kafka-config", "acks"], "expected KEY=VALUE", {}),
    ],
    "topic create": [
        (["topic", "create", "--bootstrap-server", NOWHERE, "--partitions", "0"], "must be at least 1", {}),
        (
            ["topic", "create", "--bootstrap-server", NOWHERE, "--command-config", "{tmp}/missing"],
            "cannot read Kafka config file",
            {},
        ),
        (["topic", "create"], "no Kafka bootstrap servers", {}),
    ],
    "topic describe": [
        (["topic", "describe", "--bootstrap-server", NOWHERE, "--format", "yaml"], "invalid choice: 'yaml'", {}),
        (["topic", "describe", "--bootstrap-server", NOWHERE, "--kafka-config", "acks"], "expected KEY=VALUE", {}),
        (
            ["topic", "describe", "--bootstrap-server", NOWHERE, "--kafka-config", "ssl.protocol=TLSv1.3"],
            "--kafka-config: ssl.protocol: a Java client setting librdkafka has no counterpart for",
            {},
        ),
        (
            ["topic", "describe", "--bootstrap-server", NOWHERE, "--kafka-config", "no.such.property=1"],
            "invalid Kafka client configuration",
            {},
        ),
    ],
    "topic validate": [
        (["topic", "validate", "--bootstrap-server", NOWHERE, "--partitions", "many"], "expected a whole number", {}),
    ],
    # Only `status`, which starts nothing, and refused before it runs anyway.
    "dev-broker": [
        (["dev-broker", "status", "--nodes", "2"], "argument --nodes: expected 1 or 3", {}),
        (["dev-broker", "status"], "argument --port: expected a port number, got 'abc'", {"BROKER_PORT": "abc"}),
    ],
    "replay timeline": [
        (["replay", "timeline", "--group", "g", "--plot", "{tmp}/picture.txt"], "the picture is a .png", {}),
        (["replay", "timeline", "--group", "g"], "nothing to read: pass --file DUMP", {}),
        (
            ["replay", "timeline", "--group", "g", "--file", "{tmp}/missing", "--from-offset", "5", "--to-offset", "1"],
            "--from-offset is after --to-offset",
            {},
        ),
    ],
    "replay state": [
        (
            ["replay", "state", "--group", "g", "--file", "{tmp}/missing", "--from-offset", "5", "--to-offset", "1"],
            "--from-offset is after --to-offset",
            {},
        ),
        (["replay", "state", "--group", "g", "--from-offset", "-1"], "argument --from-offset", {}),
    ],
    "replay diff": [
        (
            ["replay", "diff", "--group", "g", "--file", "{tmp}/missing", "--from", "5", "--to", "1"],
            "--from is after --to",
            {},
        ),
    ],
    "replay who-owned": [
        (
            ["replay", "who-owned", "A-0", "--file", "{tmp}/missing", "--from-offset", "5", "--to-offset", "1"],
            "--from-offset is after --to-offset",
            {},
        ),
    ],
    "replay verify": [
        (["replay", "verify"], "nothing to read", {}),
    ],
    "dump": [
        (["dump", "--decode", "--output", "{tmp}/out"], "--decode prints to standard output", {}),
        (["dump", "--format", "json"], "--format json goes with --decode", {}),
        (
            ["dump", "--format", "jsonl", "--dump-format", "binary"],
            "--format jsonl and --dump-format binary disagree",
            {},
        ),
    ],
    # Spark's module is imported, its JVM never started: each is refused before the session.
    "audit": [
        (
            ["audit", "--bootstrap-server", NOWHERE, "--warehouse", "{tmp}/warehouse", "--trigger", "often"],
            "--trigger 'often'",
            {},
        ),
        (
            ["audit", "--bootstrap-server", NOWHERE, "--warehouse", "{tmp}/warehouse", "--optimize-every", "soon"],
            "--optimize-every",
            {},
        ),
        (["audit", "--bootstrap-server", NOWHERE], "no warehouse", {}),
        (
            [
                "audit",
                "--bootstrap-server",
                NOWHERE,
                "--warehouse",
                "{tmp}/warehouse",
                "--kafka-config",
                "sasl.mechanism=GSSAPI",
                "--kafka-config",
                "sasl.username=u",
                "--kafka-config",
                "sasl.password=p",
            ],
            "only PLAIN and SCRAM credentials",
            {},
        ),
        (
            [
                "audit",
                "--bootstrap-server",
                NOWHERE,
                "--warehouse",
                "{tmp}/warehouse",
                "--kafka-config",
                "ssl.certificate.location={tmp}/tokens",
                "--kafka-config",
                "ssl.key.location={tmp}/empty",
            ],
            "set ssl.certificate.location and ssl.key.location to the same file",
            {},
        ),
    ],
    "sql": [
        (["sql", "SELECT 1"], "no warehouse: pass --warehouse DIR", {}),
    ],
    "spark-conf": [
        (
            ["spark-conf", "--warehouse", "{tmp}/warehouse", "--format", "args", "--as", "properties"],
            "--format args and --as properties disagree",
            {},
        ),
        (["spark-conf"], "no warehouse", {}),
    ],
    "completion": [
        (["completion", "fish"], "argument shell: invalid choice: 'fish'", {}),
    ],
}


def _leaves(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    """Every runnable subcommand ("topic create", "serve") and its parser, from the parser itself."""
    subcommands = next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)
    if subcommands is None:
        yield " ".join(path), parser
        return
    for name, child in subcommands.choices.items():
        yield from _leaves(child, (*path, name))


LEAVES = dict(_leaves(cli.build_parser()))


def _value(action: argparse.Action) -> str:
    """A value `action` accepts: its last choice (dev-broker's `status`, which starts nothing), or
    the first of a few words its type takes."""
    if action.choices:
        return str(list(action.choices)[-1])
    for word in ("1", "A-0"):
        try:
            (action.type or str)(word)
            return word
        except (ValueError, TypeError, argparse.ArgumentTypeError):
            continue
    raise AssertionError(f"no value found for {action.dest}")


def _required(parser: argparse.ArgumentParser) -> list[str]:
    """The arguments `parser` requires, so that the flag under test is what it refuses."""
    argv: list[str] = []
    for action in parser._actions:
        # argparse marks a positional nargs="*" required, though it takes nothing.
        if action.required and action.nargs not in ("*", "?") and not isinstance(action, argparse._SubParsersAction):
            argv += [action.option_strings[0], _value(action)] if action.option_strings else [_value(action)]
    return argv


def _bad_value(parser: argparse.ArgumentParser) -> tuple[list[str], str] | None:
    """A flag given a value it refuses, and what the error says: one with choices, else one whose
    type refuses a word (a number, KEY=VALUE); None where every flag takes any word."""
    flags = [a for a in parser._actions if a.option_strings and a.nargs in (None, "?", 1)]
    for action in flags:
        if action.choices:
            flag = action.option_strings[-1]
            return [flag, "no-such-choice"], f"argument {flag}: invalid choice: 'no-such-choice'"
    for action in flags:
        if callable(action.type) and action.type not in (str, Path):
            try:
                action.type("no-such-value")
            except (ValueError, TypeError, argparse.ArgumentTypeError):
                flag = action.option_strings[-1]
                return [flag, "no-such-value"], f"argument {flag}: "
    return None


def _environment(extra: dict[str, str]) -> dict[str, str]:
    """The test's environment without the variables that stand for flags (a COORDINATOR_URL or
    KAFKA_BOOTSTRAP_SERVERS of the session would change which error comes first)."""
    kept = {k: v for k, v in os.environ.items() if not k.startswith(("COORDINATOR_", "KAFKA_", "BROKER_"))}
    return {**kept, **extra}


def _run(argv: list[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "coordinator", *argv],
        capture_output=True,
        text=True,
        env=_environment(env or {}),
        cwd=ROOT,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )


def _has_log_format(parser: argparse.ArgumentParser) -> bool:
    return "--log-format" in parser._option_string_actions


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("cli-errors")
    (tmp / "tokens").write_text("s3cret alice\n")
    (tmp / "bad-tokens").write_text("only-one-word\n")
    (tmp / "empty").write_text("")
    (tmp / "bad-scenario").write_text("soon join 2\n")
    return tmp


def test_every_conflict_names_a_subcommand_that_exists() -> None:
    assert set(CONFLICTS) <= set(LEAVES), sorted(set(CONFLICTS) - set(LEAVES))
    # Each subcommand gets a bad value or combination besides the unknown flag: listed here, or a choice.
    untested = [name for name, parser in LEAVES.items() if name not in CONFLICTS and _bad_value(parser) is None]
    assert not untested, f"add the flag combinations these refuse to CONFLICTS: {untested}"


@pytest.mark.parametrize("name", sorted(LEAVES))
def test_usage_errors_are_one_line_exit_code_2(name: str, files: Path) -> None:
    parser = LEAVES[name]
    path = name.split()
    required = _required(parser)
    cases: list[Case] = [([*path, *required, "--no-such-flag"], "unrecognized arguments: --no-such-flag", {})]
    bad = _bad_value(parser)
    if bad is not None:
        cases.append(([*path, *required, *bad[0]], bad[1], {}))
    cases += [([word.format(tmp=files) for word in argv], says, env) for argv, says, env in CONFLICTS.get(name, [])]
    runs: list[tuple[list[str], str, dict[str, str], str]] = []
    for number, (argv, says, env) in enumerate(cases):
        if not _has_log_format(parser):
            runs.append((argv, says, env, "text"))
            continue
        # Where the logs can be JSON, every error in both; JSON chosen by the variable a container sets
        # too, for the unknown flag (refused by argparse) and a first conflict (by the subcommand's run).
        runs += [
            ([*argv, "--log-format", "text"], says, env, "text"),
            ([*argv, "--log-format", "json"], says, env, "json"),
        ]
        if number in (0, 2) and "COORDINATOR_LOG_FORMAT" not in env:
            runs.append((argv, says, {**env, "COORDINATOR_LOG_FORMAT": "json"}, "json"))
    with ThreadPoolExecutor(max_workers=2) as pool:  # two cores: each run is mostly Python's start-up
        results = list(pool.map(lambda run: _run(run[0], run[2]), runs))
    for (argv, says, env, fmt), result in zip(runs, results, strict=True):
        shown = f"coordinator {' '.join(argv)} (env {env}): exit {result.returncode}, stderr {result.stderr!r}"
        lines = result.stderr.splitlines()
        assert result.returncode == 2, shown
        assert len(lines) == 1 and "Traceback" not in result.stderr, shown
        if fmt == "text":
            # The subcommand and the error on one line; argparse's usage text is gone.
            assert lines[0].startswith(f"coordinator {path[0]}") and ": error: " in lines[0], shown
            assert says in lines[0] and not lines[0].startswith("usage:"), shown
        else:
            line = orjson.loads(lines[0])
            assert line["level"] == "ERROR" and line["event"] == "usage-error" and says in line["message"], shown
            assert line["command"].split()[0] == path[0] and line["exit_code"] == 2, shown


def test_top_level_usage_errors_are_one_line() -> None:
    for argv, says in (
        ([], "the following arguments are required: COMMAND"),
        (["bogus"], "argument COMMAND: invalid choice: 'bogus'"),
        (["--no-such-flag", "completion", "bash"], "unrecognized arguments: --no-such-flag"),
    ):
        result = _run(argv)
        assert result.returncode == 2 and result.stderr.count("\n") == 1, (argv, result.stderr)
        assert result.stderr.startswith("coordinator") and says in result.stderr, (argv, result.stderr)


def test_serve_start_up_failures_are_json_lines(files: Path) -> None:
    """Not only bad flags: Kafka that never answers (exit 1, after the warnings logged while waiting)
    and a tokens file that is wrong, under --log-format json, and under `auto` off a terminal, where the
    logs are JSON too."""
    unreachable = _run([*SERVE, "--allow-anonymous", "--log-format", "json"])
    lines = [orjson.loads(line) for line in unreachable.stderr.splitlines()]  # every line, the waiting too
    assert unreachable.returncode == 1 and lines, unreachable.stderr
    assert lines[-1]["event"] == "command-failed" and lines[-1]["level"] == "ERROR", lines[-1]
    assert "cannot reach Kafka" in lines[-1]["message"] and lines[-1]["exit_code"] == 1
    tokens = _run([*SERVE, "--tokens", str(files / "bad-tokens")])  # auto, and stderr is a pipe
    assert tokens.returncode == 2 and tokens.stderr.count("\n") == 1, tokens.stderr
    assert "TOKEN PRINCIPAL" in orjson.loads(tokens.stderr)["message"]


def test_a_crash_under_json_is_one_json_line_with_its_traceback(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from coordinator.service import serve

    def crash(args: argparse.Namespace) -> int:
        raise RuntimeError("a bug")

    monkeypatch.setattr(serve, "run", crash)  # registered anew by each cli.main
    assert cli.main(["serve", "--log-format", "json"]) == 1
    line = orjson.loads(capsys.readouterr().err)
    assert line["event"] == "command-crashed" and line["message"] == "RuntimeError: a bug"
    assert "Traceback" in line["exception"] and "a bug" in line["exception"]
    with pytest.raises(RuntimeError):  # in text the traceback is Python's own
        cli.main(["serve", "--log-format", "text"])
