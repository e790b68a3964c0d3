"""The deployment's files as the tests read them (docker/compose.yaml, its Dockerfile, health check and
topic-init commands, the Connect workers' settings, `coordinator serve`'s parser): shared by the files' own
tests (tests/test_docker_files.py, tests/test_ops_files.py) and the compose topology run without Docker
(tests/test_compose_topology.py)."""

from __future__ import annotations

import argparse
import json
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from coordinator import cli

ROOT = Path(__file__).resolve().parents[2]
DOCKER = ROOT / "docker"
COMPOSE = DOCKER / "compose.yaml"
DOCKERFILE = DOCKER / "Dockerfile"
# Environment variables of ours, as opposed to the image's own (PATH, PYTHON*).
OUR_ENV = re.compile(r"^(COORDINATOR_\w+|KAFKA_BOOTSTRAP_SERVERS|KAFKA_CONFIG_FILE|WORKER_OFFSETS_TOPIC)$")
_VARIABLE = re.compile(r"\$\$|\$\{([A-Za-z_]\w*)(?::?-([^}]*))?\}|\$([A-Za-z_]\w*)")
# A sample of sink connectors' consumer group names (`connect-<connector name>`): they stay on the
# brokers' own coordinator, so the gateway's --groups must match none.
SINK_GROUP_NAMES = ["sink", "s3-sink", "jdbc", "kafka-connect-cluster", "cluster", "a", "connect", "x.y_z-1"]


def stages() -> list[list[tuple[str, str]]]:
    result: list[list[tuple[str, str]]] = []
    for instruction in dockerfile():
        if instruction[0] == "FROM":
            result.append([])
        if result:
            result[-1].append(instruction)
    return result


def healthcheck_code() -> str:
    (arguments,) = [a for i, a in dockerfile() if i == "HEALTHCHECK"]
    command = exec_form(arguments.partition("CMD ")[2])
    assert command[0].endswith("python") and command[1] == "-c"
    return command[2]


def run_healthcheck(listen: str) -> int:
    env = {"COORDINATOR_LISTEN": listen, "PATH": "/usr/bin:/bin"}
    return subprocess.run(
        [sys.executable, "-c", healthcheck_code()], env=env, capture_output=True, timeout=30
    ).returncode


def interpolate(value: Any) -> Any:
    """Compose's variable substitution with every variable unset: the file must work without .env."""
    if isinstance(value, dict):
        return {k: interpolate(v) for k, v in value.items()}
    if isinstance(value, list):
        return [interpolate(v) for v in value]
    if not isinstance(value, str):
        return value

    def substitute(match: re.Match[str]) -> str:
        if match.group(0) == "$$":
            return "$"
        if match.group(2) is None:
            pytest.fail(f"{match.group(0)} in compose.yaml has no default: {value!r}")
        return match.group(2)

    return _VARIABLE.sub(substitute, value)


def brokers(compose: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The Apache Kafka image's services that are brokers (the Connect workers run the same image)."""
    return {
        n: s
        for n, s in compose["services"].items()
        if s.get("image", "").startswith("apache/kafka:") and "KAFKA_NODE_ID" in environment(s)
    }


def connect_workers(compose: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The services that run Kafka Connect (connect-distributed.sh) from the Apache Kafka image."""
    return {
        n: s
        for n, s in compose["services"].items()
        if s.get("image", "").startswith("apache/kafka:") and "connect-distributed.sh" in script(s)
    }


def coordinator_services(compose: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The services that run `coordinator serve` (the image's default command)."""
    return {n: s for n, s in our_image(compose).items() if (s.get("command") or ["serve"])[0] == "serve"}


def gateway_service(compose: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The one service that runs `coordinator gateway`."""
    (gateway,) = [(n, s) for n, s in our_image(compose).items() if (s.get("command") or ["serve"])[0] == "gateway"]
    return gateway


def environment(service: dict[str, Any]) -> dict[str, str]:
    env = service.get("environment") or {}
    if isinstance(env, list):
        env = dict(item.partition("=")[::2] for item in env)
    return {k: str(v) for k, v in env.items()}


def topic_init_commands(compose: dict[str, Any]) -> list[list[str]]:
    """The `coordinator ...` command lines of topic-init's script, as argv lists."""
    service = compose["services"]["topic-init"]
    script = "\n".join(service["command"]) if isinstance(service["command"], list) else service["command"]
    commands = []
    for line in script.splitlines():
        words = shlex.split(line)
        while words and words[0] in ("until", "exec", "if", "then", "!"):
            words = words[1:]
        if words and words[0] == "coordinator":
            commands.append(words[1:])
    return commands


def option(argv: list[str], name: str) -> str:
    return argv[argv.index(name) + 1]


def setting(command: list[str], env: dict[str, str], flag: str, variable: str) -> str | None:
    """A `serve` setting as the command line gives it, else as the environment does."""
    return option(command, flag) if flag in command else env.get(variable)


def mounted_files(service: dict[str, Any]) -> dict[str, Path]:
    """Container path -> the file in docker/ bind-mounted there."""
    mounts = {}
    for volume in service.get("volumes", []):
        source, target = volume.split(":")[:2]
        if source.startswith("."):
            mounts[target] = (DOCKER / source).resolve()
    return mounts


def serve_parser() -> argparse.ArgumentParser:
    subcommands = next(a for a in cli.build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    assert "serve" in subcommands.choices, "coordinator has no serve subcommand"
    return subcommands.choices["serve"]


def connect_properties(compose: dict[str, Any], name: str) -> dict[str, str]:
    """What a Connect worker's connect-distributed.sh reads: the mounted properties file, then the
    lines its command appends (with the service's environment substituted)."""
    service = compose["services"][name]
    mounts = mounted_files(service)
    (target,) = [t for t in mounts if t.endswith(".properties")]
    text = mounts[target].read_text()
    assert f"cat {target}" in script(service), "the worker's properties come from the mounted file"
    env = environment(service)
    for echoed in re.findall(r'echo "([^"]*)"', script(service)):
        text += "\n" + re.sub(r"\$\{(\w+)\}", lambda m: env[m.group(1)], echoed)
    pairs = (line.partition("=") for line in text.splitlines() if line.strip() and not line.startswith("#"))
    return {key.strip(): value.strip() for key, _, value in pairs}


def dockerfile() -> list[tuple[str, str]]:
    """The Dockerfile's instructions as (INSTRUCTION, arguments), continuation lines joined."""
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text())
    instructions = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            instructions.append((word.upper(), rest.strip()))
    return instructions


def exec_form(arguments: str) -> list[str]:
    value = json.loads(arguments)
    assert isinstance(value, list) and all(isinstance(v, str) for v in value), arguments
    return value


def script(service: dict[str, Any]) -> str:
    command = service.get("command") or ""
    return "\n".join(command) if isinstance(command, list) else command


def our_image(compose: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Services that run the image built from docker/Dockerfile, other than the one-shot topic-init."""
    result = {}
    for name, service in compose["services"].items():
        build = service.get("build") or {}
        if build.get("dockerfile") == "docker/Dockerfile" and name != "topic-init":
            assert (DOCKER / build["context"]).resolve() == ROOT, "the build context must be the repository root"
            result[name] = service
    return result
