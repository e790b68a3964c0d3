"""docker/: static checks of the image and the compose deployment, which no Docker engine here runs.

What they hold to: the Dockerfile copies only the sources and installs every package the code
imports; its health check works against a real HTTP endpoint; the compose file is three KRaft
brokers with one quorum, a compacted topic with replication 3, two coordinators in group
ownership with distinct advertised URLs and Kafka listeners, a gateway whose every port is
published and whose --coordinator names those listeners, and two Kafka Connect workers whose
bootstrap.servers is the gateway, whose connectors' clients go to the brokers and whose group.id
is the gateway's --groups (which no sink connector's `connect-<name>` group matches); every
command line and environment variable the files give `coordinator` is one the command accepts;
the example token and ACL files parse, and give ANONYMOUS (the Kafka listener's principal) only
Read on the Connect group. The Kubernetes gateway component: valid objects, every gateway port in
the Deployment and the Service, its settings what `coordinator gateway` reads, and the
coordinators' Kafka listener port. No broker.
"""

from __future__ import annotations

import argparse
import http.server
import re
import shlex
import shutil
import subprocess
import sys
import threading
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import setuptools
import yaml

from coordinator import cli

# Imported, not importorskip: a missing module of ours is a failure, never a skip.
from coordinator.service import auth
from coordinator.tools import extras, topic
from tests.support.compose import (
    COMPOSE,
    DOCKER,
    OUR_ENV,
    ROOT,
    SINK_GROUP_NAMES,
    brokers,
    connect_properties,
    connect_workers,
    coordinator_services,
    dockerfile,
    environment,
    exec_form,
    gateway_service,
    healthcheck_code,
    interpolate,
    mounted_files,
    option,
    run_healthcheck,
    script,
    serve_parser,
    setting,
    stages,
    topic_init_commands,
)

# What the image may take from the build context (the repository root).
ALLOWED_SOURCES = {"pyproject.toml", "README.md", "coordinator", "records", "replay", "spark"}


# --- the Dockerfile ------------------------------------------------------------------------------


def listed_packages() -> set[str]:
    """The packages a wheel of pyproject.toml holds: its explicit list, or what its find rule finds."""
    setuptools_config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    packages = setuptools_config.get("packages")
    if isinstance(packages, list):
        return set(packages)
    find = packages["find"]
    return set(
        setuptools.find_packages(str(ROOT), include=find.get("include", ("*",)), exclude=find.get("exclude", ()))
    )


def test_the_image_is_python_311_slim_in_two_stages() -> None:
    args = dict(a.partition("=")[::2] for i, a in dockerfile() if i == "ARG" and "=" in a)
    assert args.get("PYTHON_IMAGE") == "python:3.11-slim"
    build, final = stages()
    assert build[0][1] == "${PYTHON_IMAGE} AS build"
    # The final stage must run the interpreter the copied virtual environment was built with.
    assert final[0][1] == "${PYTHON_IMAGE}"


def test_only_the_sources_are_copied_and_no_extras_installed() -> None:
    build, final = stages()
    copied = set()
    for instruction, arguments in build:
        if instruction == "COPY":
            *sources, _ = arguments.split()
            copied.update(s.rstrip("/") for s in sources if not s.startswith("--"))
        if instruction == "RUN":
            assert "[spark" not in arguments and "[test" not in arguments and "[plot" not in arguments, arguments
    assert copied <= ALLOWED_SOURCES, f"the image copies {sorted(copied - ALLOWED_SOURCES)}"
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    needed = {p.split(".")[0] for p in listed_packages()} | {"pyproject.toml", project["project"]["readme"]}
    assert needed <= copied, f"pip install . needs {sorted(needed - copied)} in the image"
    assert [a for i, a in final if i == "COPY"] == ["--from=build /opt/coordinator /opt/coordinator"]


def test_the_image_needs_no_matplotlib() -> None:
    """The image installs pyproject.toml's dependencies alone; matplotlib (PNG plots) is the extra
    `plot`. Every module the image's smoke test imports must import without it, as it does there."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert not any(d.lower().startswith("matplotlib") for d in project["dependencies"])
    assert any(d.lower().startswith("matplotlib") for d in project["optional-dependencies"]["plot"])
    smoke = next(a for i, a in stages()[0] if i == "RUN" and "walk_packages" in a)
    statement = shlex.split(smoke.rpartition("python -c ")[2])[0]
    blocked = "import sys; sys.modules['matplotlib'] = None; " + statement
    result = subprocess.run([sys.executable, "-c", blocked], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]


def test_every_package_is_in_the_wheel() -> None:
    """The image installs the project as a wheel (not editable, as .venv does), and a wheel holds
    only the packages pyproject.toml lists: a subpackage missing there is missing in the image."""
    listed = listed_packages()
    present = {
        ".".join(init.parent.relative_to(ROOT).parts)
        for root in {p.split(".")[0] for p in listed}
        for init in (ROOT / root).rglob("__init__.py")
    }
    missing = sorted(present - listed)
    assert not missing, (
        f"packages {missing} are not in [tool.setuptools] packages of pyproject.toml: a non-editable "
        f"install (the Docker image) leaves them out and fails to import them"
    )


def test_the_runtime_stage_runs_coordinator_serve_as_a_user() -> None:
    final = stages()[-1]
    users = [a for i, a in final if i == "USER"]
    assert users and users[-1].split(":")[0] not in ("root", "0")
    assert [exec_form(a) for i, a in final if i == "ENTRYPOINT"] == [["coordinator"]]
    assert [exec_form(a) for i, a in final if i == "CMD"] == [["serve"]]
    assert any(a.split() == ["8400"] for i, a in final if i == "EXPOSE")
    env = " ".join(a for i, a in final if i == "ENV").split()
    assert "COORDINATOR_LISTEN=0.0.0.0:8400" in env
    # A server image never installs an extra at run time (coordinator.tools.extras' switch).
    assert f"{extras.SWITCH}=0" in env


# --- the health check, run against a real HTTP server ----------------------------------------------


@pytest.fixture
def health_server() -> Iterator[tuple[int, dict[str, int]]]:
    answer = {"status": 200}

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
            status = answer["status"] if self.path == "/health" else 404
            self.send_response(status)
            self.end_headers()
            self.wfile.write(b'{"Status": "ok"}')

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1], answer
    finally:
        server.shutdown()
        server.server_close()


def test_the_health_check_passes_on_200_and_fails_otherwise(health_server) -> None:  # noqa: ANN001
    port, answer = health_server
    # A wildcard listen address is probed on loopback; a specific one as it is.
    assert run_healthcheck(f"0.0.0.0:{port}") == 0
    assert run_healthcheck(f"127.0.0.1:{port}") == 0
    answer["status"] = 503  # a partition loading or reloading
    assert run_healthcheck(f"0.0.0.0:{port}") != 0


def test_the_health_check_fails_when_nothing_listens() -> None:
    with http.server.HTTPServer(("127.0.0.1", 0), http.server.BaseHTTPRequestHandler) as probe:
        port = probe.server_address[1]
    assert run_healthcheck(f"0.0.0.0:{port}") != 0


# --- the compose file ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return interpolate(yaml.safe_load(COMPOSE.read_text()))


def test_three_kraft_brokers_with_one_quorum(compose) -> None:  # noqa: ANN001
    kafka = brokers(compose)
    assert len(kafka) == 3
    envs = {name: environment(service) for name, service in kafka.items()}
    node_ids = {name: env["KAFKA_NODE_ID"] for name, env in envs.items()}
    assert len(set(node_ids.values())) == 3, node_ids
    voters = {env["KAFKA_CONTROLLER_QUORUM_VOTERS"] for env in envs.values()}
    assert len(voters) == 1, voters
    voter_ids = {v.split("@")[0]: v.split("@")[1].split(":")[0] for v in voters.pop().split(",")}
    assert voter_ids == {node_id: name for name, node_id in node_ids.items()}, "every broker votes, under its own id"
    assert len({env["CLUSTER_ID"] for env in envs.values()}) == 1
    for name, service in kafka.items():
        env = envs[name]
        assert set(env["KAFKA_PROCESS_ROLES"].split(",")) == {"broker", "controller"}
        assert env["KAFKA_DEFAULT_REPLICATION_FACTOR"] == "3"
        assert env["KAFKA_MIN_INSYNC_REPLICAS"] == "2"
        assert env["KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR"] == "3"
        assert env["KAFKA_TRANSACTION_STATE_LOG_MIN_ISR"] == "2"
        assert env["KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR"] == "3"
        assert env["KAFKA_UNCLEAN_LEADER_ELECTION_ENABLE"] == "false"
        assert f"INTERNAL://{name}:9092" in env["KAFKA_ADVERTISED_LISTENERS"].split(",")
        assert any(v.endswith(":" + env["KAFKA_LOG_DIRS"]) for v in service["volumes"]), "broker data on a volume"
        assert service["healthcheck"]["test"]


def test_topic_init_creates_the_topic_compacted_with_replication_3(compose) -> None:  # noqa: ANN001
    commands = topic_init_commands(compose)
    creates = [c for c in commands if c[:2] == ["topic", "create"]]
    validates = [c for c in commands if c[:2] == ["topic", "validate"]]
    assert len(creates) == 1 and len(validates) == 1, commands
    (create,), (validate,) = creates, validates
    assert option(create, "--replication-factor") == "3"
    assert option(create, "--partitions") == option(validate, "--partitions")
    assert "--if-not-exists" in create
    # Compacted: `topic create` sets cleanup.policy=compact, and nothing overrides it.
    assert not any(arg.startswith("cleanup.policy") for arg in create)
    assert topic.topic_configs(3)["cleanup.policy"] == "compact"
    internal = {f"{name}:9092" for name in brokers(compose)}
    for command in (create, validate):
        assert set(option(command, "--bootstrap-servers").split(",")) == internal
        cli.build_parser().parse_args(command)  # every flag exists
    service = compose["services"]["topic-init"]
    assert service["restart"] == "no"
    assert {n: d["condition"] for n, d in service["depends_on"].items()} == dict.fromkeys(
        brokers(compose), "service_healthy"
    )


def test_two_coordinators_in_group_ownership(compose) -> None:  # noqa: ANN001
    coordinators = coordinator_services(compose)
    assert len(coordinators) == 2, sorted(coordinators)
    urls, host_ports = set(), set()
    for name, service in coordinators.items():
        command, env = service["command"], environment(service)
        assert command[0] == "serve"
        assert setting(command, env, "--ownership", "COORDINATOR_OWNERSHIP") == "group", name
        urls.add(setting(command, env, "--advertised-url", "COORDINATOR_ADVERTISED_URL"))
        (port,) = service["ports"]
        assert port.endswith(":8400")
        host_ports.add(port.rsplit(":", 2)[-2])
        conditions = {n: d["condition"] for n, d in service["depends_on"].items()}
        assert conditions.pop("topic-init") == "service_completed_successfully"
        assert conditions == dict.fromkeys(brokers(compose), "service_healthy")
        assert service["restart"] in ("always", "unless-stopped", "on-failure")
    assert urls == {f"http://{name}:8400" for name in coordinators}, "each advertises its own URL"
    assert host_ports == {"8401", "8402"}
    # Each serves Kafka's group protocol too, and names itself (its compose host name) as a group's
    # coordinator: the gateway connects to the address FindCoordinator gives.
    for name, service in coordinators.items():
        command = service["command"]
        listener, advertised = option(command, "--kafka-listener"), option(command, "--kafka-advertised")
        assert listener.startswith("0.0.0.0:") and advertised == f"{name}:{listener.rsplit(':', 1)[1]}", name
        assert listener.rsplit(":", 1)[1] in service.get("expose", []), name


def test_tokens_and_acls_are_mounted_from_docker(compose) -> None:  # noqa: ANN001
    for name, service in coordinator_services(compose).items():
        env, mounts = environment(service), mounted_files(service)
        for variable, example in (
            ("COORDINATOR_TOKENS_FILE", "tokens.example"),
            ("COORDINATOR_ACLS_FILE", "acls.example"),
        ):
            assert mounts.get(env[variable]) == DOCKER / example, (name, variable)


def test_the_example_files_parse_and_agree() -> None:
    tokens = auth.parse_tokens((DOCKER / "tokens.example").read_text(), "tokens.example")
    acls = auth.parse_acls((DOCKER / "acls.example").read_text(), "acls.example")
    assert tokens and acls
    assert all("REPLACE-ME" in token for token in tokens), "example tokens must say that they are examples"
    principals = set(tokens.values())
    assert {acl.principal for acl in acls} <= principals | {"*"}, "an ACL for a principal no token has"


# --- what the files pass to `coordinator serve` ---------------------------------------------------


def test_every_serve_flag_and_variable_is_accepted(compose, monkeypatch) -> None:  # noqa: ANN001
    help_text = serve_parser().format_help()
    dockerfile_env = {}
    for instruction, arguments in stages()[-1]:
        if instruction == "ENV":
            dockerfile_env.update(item.partition("=")[::2] for item in shlex.split(arguments))
    used = set(re.findall(r"COORDINATOR_[A-Z_]+", healthcheck_code())) | set(dockerfile_env)
    for service in coordinator_services(compose).values():
        used |= set(environment(service))
    # The extras' switch is read by the commands that install an extra (audit, sql, --plot), not by serve.
    unknown = sorted(v for v in used - {extras.SWITCH} if OUR_ENV.match(v) and v not in help_text)
    assert not unknown, f"coordinator serve --help does not name {unknown}"

    # The command lines, parsed by the real parser with the container's environment in force (the
    # parser reads its defaults from the environment when it is built).
    for name, service in coordinator_services(compose).items():
        with monkeypatch.context() as patch:
            for variable, value in {**dockerfile_env, **environment(service)}.items():
                if OUR_ENV.match(variable):
                    patch.setenv(variable, value)
            args = cli.build_parser().parse_args(service["command"])
        assert args.ownership == "group", name
        assert not args.peer, f"{name}: group ownership refuses --peer (COORDINATOR_PEERS)"
        assert args.listen == "0.0.0.0:8400", name
        assert args.advertised_url == f"http://{name}:8400"
        assert args.tokens == "/etc/coordinator/tokens" and args.acls == "/etc/coordinator/acls"
        assert args.kafka_listener == "0.0.0.0:9400" and args.kafka_advertised == f"{name}:9400"
        # The Kafka listener does not authenticate yet: its requests act as ANONYMOUS, let in only with
        # anonymous access on (test_anonymous_may_only_read_the_connect_group: what the ACLs give it).
        assert args.allow_anonymous, name


def test_anonymous_may_only_read_the_connect_group(compose: dict[str, Any]) -> None:
    """Anonymous access is on for the Kafka listener's sake: the example ACLs give ANONYMOUS Read
    (and Describe) on the Connect workers' group, which the Kafka listener needs, and nothing else."""
    acls = auth.parse_acls((DOCKER / "acls.example").read_text(), "acls.example")
    authorizer = auth.Authorizer({}, acls, allow_anonymous=True)
    anonymous = authorizer.authenticate(None)
    group = connect_properties(compose, next(iter(connect_workers(compose))))["group.id"]
    others = ["connect-compose", "x", f"{group}-2", f"connect-{group}", "other"]
    for operation in auth.Operation:
        expected = operation in (auth.Operation.READ, auth.Operation.DESCRIBE)
        assert authorizer.allowed(anonymous, operation, group) == expected, operation
        for other in others:
            assert not authorizer.allowed(anonymous, operation, other), (operation, other)


# --- the gateway and the Kafka Connect workers ------------------------------------------------------


def published(service: dict[str, Any]) -> dict[int, int]:
    """Container port -> host port, for `ADDRESS:HOST:CONTAINER` entries."""
    result = {}
    for entry in service.get("ports", []):
        *_, host, container = str(entry).split(":")
        result[int(container)] = int(host)
    return result


def gateway_args(command: list[str], monkeypatch: pytest.MonkeyPatch) -> argparse.Namespace:
    """The gateway's command line as the real parser reads it, no variable of ours in force."""
    import os

    with monkeypatch.context() as patch:
        for variable in list(os.environ):
            if OUR_ENV.match(variable):
                patch.delenv(variable)
        return cli.build_parser().parse_args(command)


def gateway_ports(base: int, node_ids: list[int]) -> set[int]:
    """The gateway's ports (coordinator/gateway/proxy.py): P, P+1 and P+2+N for each broker node id N."""
    from coordinator.gateway.proxy import Gateway, GatewayConfig

    gateway = Gateway(
        GatewayConfig(bootstrap=[("unused", 9092)], listen=("0.0.0.0", base), groups="x", coordinators=[])
    )
    return {gateway.bootstrap_port, gateway.coordinator_port} | {gateway.broker_port(n) for n in node_ids}


def broker_node_ids(compose: dict[str, Any]) -> list[int]:
    return sorted(int(environment(s)["KAFKA_NODE_ID"]) for s in brokers(compose).values())


def test_the_gateway_command_and_its_ports(compose: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    name, service = gateway_service(compose)
    args = gateway_args(service["command"], monkeypatch)
    assert args.command == "gateway"
    host, _, port = args.listen.rpartition(":")
    base = int(port)
    assert host == "0.0.0.0"
    # The real brokers, by their internal listener, and the coordinators' Kafka listeners as each
    # advertises it.
    assert args.bootstrap_server.split(",") == [f"{n}:9092" for n in brokers(compose)]
    advertised = [option(s["command"], "--kafka-advertised") for s in coordinator_services(compose).values()]
    assert args.coordinator.split(",") == advertised
    # The host its answers name is the service's own name on the compose network.
    assert args.advertised_host == name
    re.compile(args.groups)
    # Every port a client may be sent to is exposed and published on the same number.
    ports = gateway_ports(base, broker_node_ids(compose))
    assert {int(p) for p in service["expose"]} == ports
    assert published(service) == {p: p for p in ports}
    # Its health check connects to the bootstrap port (the image's own asks serve's /health).
    assert f"('127.0.0.1', {base})" in " ".join(service["healthcheck"]["test"])
    conditions = {n: d["condition"] for n, d in service["depends_on"].items()}
    assert {n: conditions[n] for n in brokers(compose)} == dict.fromkeys(brokers(compose), "service_healthy")
    assert set(coordinator_services(compose)) <= set(conditions)
    # The gateway's ports do not collide with another service's published ports.
    others = [h for n, s in compose["services"].items() if n != name for h in published(s).values()]
    assert not ports & set(others) and len(others) == len(set(others))


def test_the_groups_regex_is_the_connect_workers_group_and_no_sink_group(
    compose: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    _, service = gateway_service(compose)
    groups = re.compile(gateway_args(service["command"], monkeypatch).groups)
    workers = connect_workers(compose)
    assert workers
    for name in workers:
        group = connect_properties(compose, name)["group.id"]
        assert groups.fullmatch(group), (name, group)
        assert not group.startswith("connect-"), "a connect- group id could be a sink connector's"
    for sink in SINK_GROUP_NAMES + [connect_properties(compose, n)["group.id"] for n in workers]:
        assert not groups.fullmatch(f"connect-{sink}"), sink


def test_two_connect_workers_bootstrap_from_the_gateway_and_their_connectors_from_the_brokers(
    compose: dict[str, Any],
) -> None:
    workers = connect_workers(compose)
    assert len(workers) == 2, sorted(workers)
    gateway, gateway_config = gateway_service(compose)
    base = int(option(gateway_config["command"], "--listen").rpartition(":")[2])
    internal = {f"{n}:9092" for n in brokers(compose)}
    image = {s["image"] for s in brokers(compose).values()}
    hosts, groups = set(), set()
    for name, service in workers.items():
        assert {service["image"]} == image, "Connect from the brokers' Apache Kafka image"
        assert service["entrypoint"] == ["/bin/sh", "-ec"]
        assert script(service).splitlines()[-1].split() == [
            "exec",
            "/opt/kafka/bin/connect-distributed.sh",
            "/tmp/worker.properties",
        ]
        assert "> /tmp/worker.properties" in script(service)
        props = connect_properties(compose, name)
        # The worker's own clients (group member, internal topics, shared admin): the gateway.
        assert props["bootstrap.servers"] == f"{gateway}:{base}"
        # Its connectors' clients: the brokers, so connector data never crosses the gateway.
        for prefix in ("producer", "consumer", "admin"):
            assert set(props[f"{prefix}.bootstrap.servers"].split(",")) == internal, prefix
        for store in ("config", "offset", "status"):
            assert props[f"{store}.storage.topic"].startswith(props["group.id"])
            assert int(props[f"{store}.storage.replication.factor"]) == len(brokers(compose))
        # Connect's leader forwards REST requests to the worker by the URL it advertises.
        assert props["rest.advertised.host.name"] == name
        listener = props["listeners"].rpartition(":")[2]
        assert props["rest.advertised.port"] == listener and listener in service["expose"]
        hosts.update(published(service).values())
        assert set(published(service)) == {int(listener)}
        groups.add(props["group.id"])
        assert {n: d["condition"] for n, d in service["depends_on"].items()} == {gateway: "service_healthy"}
    assert len(groups) == 1, "one Connect cluster"
    assert len(hosts) == 2, "each worker's REST API on a host port of its own"


# --- the gateway on Kubernetes ----------------------------------------------------------------------

KUBERNETES = DOCKER / "kubernetes"
GATEWAY_K8S = KUBERNETES / "gateway"


def k8s_objects(*files: Path) -> list[dict[str, Any]]:
    return [d for f in files for d in yaml.safe_load_all(f.read_text()) if d]


def gateway_k8s() -> tuple[dict[str, Any], dict[str, Any]]:
    kustomization = yaml.safe_load((GATEWAY_K8S / "kustomization.yaml").read_text())
    objects = k8s_objects(*(GATEWAY_K8S / r for r in kustomization["resources"]))
    (deployment,) = [o for o in objects if o["kind"] == "Deployment"]
    (service,) = [o for o in objects if o["kind"] == "Service"]
    return deployment, service


def test_the_gateway_is_a_component_of_the_kubernetes_deployment() -> None:
    main = yaml.safe_load((KUBERNETES / "kustomization.yaml").read_text())
    assert "gateway" in main["components"]
    component = yaml.safe_load((GATEWAY_K8S / "kustomization.yaml").read_text())
    assert component["kind"] == "Component" and component["apiVersion"] == "kustomize.config.k8s.io/v1alpha1"
    assert sorted(component["resources"]) == sorted(
        p.name for p in GATEWAY_K8S.glob("*.yaml") if p.name != "kustomization.yaml"
    )
    kubectl = shutil.which("kubectl")
    if kubectl:  # kustomize renders it with the rest: the gateway in the namespace, with the image
        rendered = subprocess.run(
            [kubectl, "kustomize", str(KUBERNETES)], capture_output=True, text=True, timeout=60, check=False
        )
        assert rendered.returncode == 0, rendered.stderr
        objects = [d for d in yaml.safe_load_all(rendered.stdout) if d]
        gateways = [o for o in objects if o["metadata"]["name"] == "worker-coordinator-gateway"]
        assert sorted(o["kind"] for o in gateways) == ["Deployment", "Service"]
        assert all(o["metadata"]["namespace"] == main["namespace"] for o in gateways)
        (deployment,) = [o for o in gateways if o["kind"] == "Deployment"]
        image = deployment["spec"]["template"]["spec"]["containers"][0]["image"]
        assert image == f"{main['images'][0]['newName']}:{main['images'][0]['newTag']}"


def test_the_kubernetes_gateway_objects_validate() -> None:
    for o in gateway_k8s():
        kubernetes_validate.validate(o, "1.30.0", strict=True)


def test_the_kubernetes_gateway_ports_and_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    deployment, service = gateway_k8s()
    pod = deployment["spec"]["template"]
    assert deployment["spec"]["selector"]["matchLabels"].items() <= pod["metadata"]["labels"].items()
    assert service["spec"]["selector"].items() <= pod["metadata"]["labels"].items()
    (container,) = pod["spec"]["containers"]
    assert container["args"] == ["gateway"]
    env = {e["name"]: e for e in container["env"]}
    config_map = k8s_objects(KUBERNETES / "configmap.yaml")[0]
    values = {}
    for name, e in env.items():
        if "valueFrom" in e:
            ref = e["valueFrom"]["configMapKeyRef"]
            assert ref["name"] == config_map["metadata"]["name"]
            values[name] = config_map["data"][ref["key"]]
        else:
            values[name] = e["value"]
    with monkeypatch.context() as patch:
        for name, value in values.items():
            patch.setenv(name, value)
        args = cli.build_parser().parse_args(container["args"])
    # Every variable is one `coordinator gateway` reads (the parser takes its defaults from them): each
    # value is in the setting it names. The brokers come from the coordinators' ConfigMap.
    read = {
        "KAFKA_BOOTSTRAP_SERVERS": args.bootstrap_server,
        "COORDINATOR_GATEWAY_LISTEN": args.listen,
        "COORDINATOR_GATEWAY_ADVERTISED_HOST": args.advertised_host,
        "COORDINATOR_GATEWAY_GROUPS": args.groups,
        "COORDINATOR_GATEWAY_COORDINATORS": args.coordinator,
        "COORDINATOR_LOG_FORMAT": args.log_format,
    }
    assert values == read
    base = int(args.listen.rpartition(":")[2])
    # The pods' ports: the bootstrap port, the coordinator node's, one per broker node id (0-5 here),
    # each in the Service on the same number, since the gateway's answers name its own ports.
    node_ids = [int(p["name"].removeprefix("broker-")) for p in container["ports"] if p["name"].startswith("broker-")]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert set(ports.values()) == gateway_ports(base, node_ids)
    assert ports["bootstrap"] == base and ports["coordinator"] == base + 1
    assert all(ports[f"broker-{n}"] == base + 2 + n for n in node_ids)
    assert {p["port"] for p in service["spec"]["ports"]} == set(ports.values())
    assert all(ports[p["targetPort"]] == p["port"] for p in service["spec"]["ports"])
    # Clients dial the Service's name (in the kustomization's namespace) for every port.
    namespace = yaml.safe_load((KUBERNETES / "kustomization.yaml").read_text())["namespace"]
    assert args.advertised_host == f"{service['metadata']['name']}.{namespace}.svc"
    # --coordinator: the coordinators' Service at their Kafka listener's port.
    coordinator_service = k8s_objects(KUBERNETES / "service.yaml")[0]
    (kafka_port,) = [p for p in coordinator_service["spec"]["ports"] if p["name"] == "kafka"]
    assert args.coordinator == f"{coordinator_service['metadata']['name']}:{kafka_port['port']}"
    for probe in ("readinessProbe", "livenessProbe"):
        assert container[probe]["tcpSocket"]["port"] == "bootstrap"
    assert not re.fullmatch(args.groups, "connect-sink")


def test_the_kubernetes_coordinators_serve_the_kafka_listener() -> None:
    (deployment,) = [o for o in k8s_objects(KUBERNETES / "deployment.yaml") if o["kind"] == "Deployment"]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    config = k8s_objects(KUBERNETES / "configmap.yaml")[0]["data"]
    assert config["COORDINATOR_KAFKA_LISTENER"] == f"0.0.0.0:{ports['kafka']}"
    env = {e["name"]: e.get("value") for e in container["env"]}
    order = [e["name"] for e in container["env"]]
    # Each pod names itself as a group's coordinator: the gateway then reaches the owner directly.
    assert env["COORDINATOR_KAFKA_ADVERTISED"] == f"$(POD_IP):{ports['kafka']}"
    assert order.index("POD_IP") < order.index("COORDINATOR_KAFKA_ADVERTISED")
    assert config["COORDINATOR_ALLOW_ANONYMOUS"] == "true"  # the listener's requests act as ANONYMOUS
    service = k8s_objects(KUBERNETES / "service.yaml")[0]
    assert {"name": "kafka", "port": ports["kafka"], "targetPort": "kafka", "protocol": "TCP"} in service["spec"][
        "ports"
    ]
    # The Secret's ACLs are the example file's: ANONYMOUS reads the Connect group and nothing else.
    secret = k8s_objects(KUBERNETES / "secret.yaml")[0]
    assert secret["stringData"]["acls"].split("\n")[-3:] == (DOCKER / "acls.example").read_text().split("\n")[-3:]
