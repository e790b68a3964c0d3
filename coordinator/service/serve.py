"""`coordinator serve`: the coordinator service (DESIGN §6, §7).

Every flag can also come from an environment variable (named in its help), so a container is
configured without a command line. Start-up waits for Kafka with backoff and says what it waits
for; SIGTERM or SIGINT stops serving, hands the partitions over (group mode) and exits 0.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import ssl
from typing import Any

from aiohttp import web
from aiohttp.abc import AbstractAccessLogger
from tenacity import RetryCallState, Retrying, retry_if_exception, stop_after_delay, wait_exponential

from coordinator.core.assignors import ASSIGNORS
from coordinator.core.config import KAFKA_CLASSIC_MIN_SESSION_TIMEOUT_MS
from coordinator.core.group_coordinator import CoordinatorConfig
from coordinator.errors import CliError
from coordinator.service.auth import Authorizer, ConfigError
from coordinator.service.server import MAX_BODY_BYTES, CoordinatorServer
from coordinator.service.whatif import MIN_MEMORY_MB as MIN_WHATIF_MEMORY_MB
from coordinator.service.whatif import Bounds
from coordinator.tools import kafka_config, logs
from coordinator.tools import tls as tls_context

log = logging.getLogger("coordinator.service.serve")

DEFAULT_LISTEN = "127.0.0.1:8400"


class _FromEnv(str):
    """A flag's value as an environment variable gave it, so that an error can name the variable."""

    variable: str


def env(name: str, default: Any = None) -> Any:
    """A flag's default from the environment. Numbers stay strings here: argparse converts a string
    default with the flag's `type` only when `serve` is the command run and the flag is not given,
    so a bad value is a usage error of `serve` naming the flag and the variable, never an error of
    another subcommand."""
    value = os.environ.get(name)
    if value is None:
        return default
    text = _FromEnv(value)
    text.variable = name
    return text


def _number(kind: type) -> Any:
    """An argparse type for int or float flags that names the variable when the value came from one."""

    def parse(text: str) -> Any:
        try:
            return kind(text)
        except ValueError:
            got = f"{text.variable}={str(text)!r}" if isinstance(text, _FromEnv) else repr(text)
            raise argparse.ArgumentTypeError(
                f"expected {'a whole number' if kind is int else 'a number'}, got {got}"
            ) from None

    parse.__name__ = kind.__name__  # argparse names the type in some messages
    return parse


def env_flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "serve",
        description="Serve the connect group protocol over HTTP for the partitions of the topic this instance owns.",
    )
    kafka_config.add_arguments(parser)
    _http_flags(parser)
    _kafka_listener_flags(parser)
    _ownership_flags(parser)
    _security_flags(parser)
    _group_default_flags(parser)
    _classic_flags(parser)
    _whatif_flags(parser)
    _output_flags(parser)
    # `coordinator` writes serve's errors, bad flags included, as JSON where its logs are JSON.
    parser.set_defaults(func=run, error_line=logs.error_line)


def _http_flags(parser: argparse.ArgumentParser) -> None:
    """The HTTP listener: its address, TLS and the largest request."""
    http = parser.add_argument_group("HTTP")
    http.add_argument(
        "--listen",
        default=env("COORDINATOR_LISTEN", DEFAULT_LISTEN),
        metavar="HOST:PORT",
        help=f"address to listen on (env COORDINATOR_LISTEN, default {DEFAULT_LISTEN})",
    )
    http.add_argument(
        "--advertised-url",
        default=env("COORDINATOR_ADVERTISED_URL"),
        metavar="URL",
        help="the URL workers reach this instance at (env COORDINATOR_ADVERTISED_URL; default from --listen)",
    )
    http.add_argument(
        "--tls-cert",
        default=env("COORDINATOR_TLS_CERT"),
        metavar="FILE",
        help="serve HTTPS, and TLS on --kafka-listener, with this PEM certificate (chain) (env COORDINATOR_TLS_CERT)",
    )
    http.add_argument(
        "--tls-key",
        default=env("COORDINATOR_TLS_KEY"),
        metavar="FILE",
        help="the certificate's private key (env COORDINATOR_TLS_KEY)",
    )
    http.add_argument(
        "--max-request-bytes",
        type=_number(int),
        default=env("COORDINATOR_MAX_REQUEST_BYTES", str(MAX_BODY_BYTES)),
        metavar="BYTES",
        help="the largest request body taken; larger ones are answered 413 unread (env "
        f"COORDINATOR_MAX_REQUEST_BYTES, default {MAX_BODY_BYTES}: an install of 50,000 tasks "
        "with long names is about 4 MB)",
    )


def _kafka_listener_flags(parser: argparse.ArgumentParser) -> None:
    """The Kafka listener (Kafka's binary protocol for the classic group APIs)."""
    kafka = parser.add_argument_group("Kafka listener (Kafka's binary protocol for the classic group APIs)")
    kafka.add_argument(
        "--kafka-listener",
        default=env("COORDINATOR_KAFKA_LISTENER"),
        metavar="HOST:PORT",
        help="also serve ApiVersions, FindCoordinator, JoinGroup, SyncGroup, Heartbeat, LeaveGroup, "
        "DescribeGroups, ListGroups and DeleteGroups in Kafka's protocol here, for unmodified "
        "Kafka clients such as Connect workers (env COORDINATOR_KAFKA_LISTENER; default: off)",
    )
    kafka.add_argument(
        "--kafka-advertised",
        default=env("COORDINATOR_KAFKA_ADVERTISED"),
        metavar="HOST:PORT",
        help="the address FindCoordinator names, when clients dial another than --kafka-listener "
        "(env COORDINATOR_KAFKA_ADVERTISED)",
    )
    kafka.add_argument(
        "--kafka-gateway-principals",
        default=env("COORDINATOR_KAFKA_GATEWAY_PRINCIPALS"),
        metavar="PRINCIPAL[,...]",
        help="the principals (of --tokens, over SASL PLAIN) trusted to forward their clients' "
        "requests with the clients' principals: our gateways (env "
        "COORDINATOR_KAFKA_GATEWAY_PRINCIPALS)",
    )


def _ownership_flags(parser: argparse.ArgumentParser) -> None:
    """Which partitions this instance serves: static or shared through a consumer group."""
    own = parser.add_argument_group("ownership")
    own.add_argument(
        "--ownership",
        choices=("static", "group"),
        default=env("COORDINATOR_OWNERSHIP", "static"),
        help="static: serve --partitions; group: share the partitions with the other instances "
        "through a Kafka consumer group (env COORDINATOR_OWNERSHIP, default static)",
    )
    own.add_argument(
        "--partitions",
        default=env("COORDINATOR_PARTITIONS", "all"),
        metavar="LIST",
        help="static ownership: 'all' or a list such as 0-3,7 (env COORDINATOR_PARTITIONS)",
    )
    own.add_argument(
        "--group-id",
        default=env("COORDINATOR_GROUP_ID"),
        metavar="ID",
        help="group ownership: the consumer group (env COORDINATOR_GROUP_ID, default worker-coordinator-<topic>)",
    )
    own.add_argument(
        "--ownership-session-timeout-ms",
        type=_number(int),
        default=env("COORDINATOR_OWNERSHIP_SESSION_TIMEOUT_MS", "10000"),
        metavar="MS",
        help="group ownership: an instance silent this long loses its partitions to the others "
        "(env COORDINATOR_OWNERSHIP_SESSION_TIMEOUT_MS, default 10000)",
    )
    own.add_argument(
        "--standby-partitions",
        type=_number(int),
        default=env("COORDINATOR_STANDBY_PARTITIONS", "0"),
        metavar="N",
        help="group ownership: keep hot standbys of N partitions this instance does not own (the ones "
        "after its own; all of them when N is at least their number), so that taking one over reads "
        "only the records it has not seen (env COORDINATOR_STANDBY_PARTITIONS, default 0)",
    )
    own.add_argument(
        "--peer",
        action="append",
        default=_env_list("COORDINATOR_PEERS"),
        metavar="URL",
        help="static ownership only: another static instance (serving other --partitions), "
        "whose /health find-coordinator asks for the partitions not served here; group "
        "ownership finds owners through the consumer group and refuses --peer (repeatable; "
        "env COORDINATOR_PEERS, comma-separated)",
    )


def _security_flags(parser: argparse.ArgumentParser) -> None:
    """Tokens, ACLs, anonymous requests."""
    sec = parser.add_argument_group("security")
    sec.add_argument(
        "--tokens",
        default=env("COORDINATOR_TOKENS_FILE"),
        metavar="FILE",
        help="bearer tokens, one 'TOKEN PRINCIPAL' per line (env COORDINATOR_TOKENS_FILE)",
    )
    sec.add_argument(
        "--acls",
        default=env("COORDINATOR_ACLS_FILE"),
        metavar="FILE",
        help="ACLs, one 'PRINCIPAL OPERATIONS GROUP-PATTERN' per line (env COORDINATOR_ACLS_FILE); "
        "without it every authenticated principal may do everything",
    )
    sec.add_argument(
        "--allow-anonymous",
        action="store_true",
        default=env_flag("COORDINATOR_ALLOW_ANONYMOUS"),
        help="requests without a token act as principal ANONYMOUS (env COORDINATOR_ALLOW_ANONYMOUS)",
    )


def _group_default_flags(parser: argparse.ArgumentParser) -> None:
    """The groups' defaults (a group's own config overrides them)."""
    defaults = CoordinatorConfig()
    groups = parser.add_argument_group("group defaults (a group's own config overrides them)")
    for flag, field, help_ in (
        ("--session-timeout-ms", "session_timeout_ms", "a member silent this long is removed"),
        ("--heartbeat-interval-ms", "heartbeat_interval_ms", "how often members heartbeat"),
        (
            "--rebalance-timeout-ms",
            "rebalance_timeout_ms",
            "time to revoke or compute (default: each member's RebalanceTimeoutMs)",
        ),
        (
            "--scheduled-rebalance-max-delay-ms",
            "scheduled_rebalance_max_delay_ms",
            "how long a departed worker's work waits for it to return",
        ),
        (
            "--server-assignment-interval-ms",
            "server_assignment_interval_ms",
            "a server-side assignor runs at most once per this interval per group",
        ),
        (
            "--initial-assignment-delay-ms",
            "initial_assignment_delay_ms",
            "an empty group that gets members waits this long for more before its first target (Kafka's "
            "group.initial.rebalance.delay.ms)",
        ),
    ):
        name = "COORDINATOR_" + field.upper()
        default = getattr(defaults, field)
        groups.add_argument(
            flag,
            type=_number(int),
            default=env(name, None if default is None else str(default)),
            metavar="MS",
            help=f"{help_} (env {name}, default {default})",
        )
    groups.add_argument(
        "--server-assignor",
        choices=sorted(ASSIGNORS),
        default=env("COORDINATOR_SERVER_ASSIGNOR", defaults.default_server_assignor),
        help="the server-side assignor when no member names one (env COORDINATOR_SERVER_ASSIGNOR)",
    )


def _classic_flags(parser: argparse.ArgumentParser) -> None:
    """Kafka's group coordinator settings for the classic protocol."""
    defaults = CoordinatorConfig()
    classic = parser.add_argument_group("the classic protocol (Kafka's group coordinator settings)")
    for flag, field, default, metavar, help_ in (
        (
            "--classic-min-session-timeout-ms",
            "classic_min_session_timeout_ms",
            KAFKA_CLASSIC_MIN_SESSION_TIMEOUT_MS,
            "MS",
            (
                "a JoinGroup asking for a shorter session is refused INVALID_SESSION_TIMEOUT, which a Java "
                "worker does not survive (Kafka's group.min.session.timeout.ms)"
            ),
        ),
        (
            "--classic-group-max-size",
            "classic_group_max_size",
            defaults.classic_group_max_size,
            "MEMBERS",
            (
                "a classic group takes at most this many members; more are refused GROUP_MAX_SIZE_REACHED "
                "(Kafka's group.max.size)"
            ),
        ),
    ):
        name = "COORDINATOR_" + field.upper()
        classic.add_argument(
            flag,
            type=_number(int),
            default=env(name, str(default)),
            metavar=metavar,
            help=f"{help_} (env {name}, default {default})",
        )


def _whatif_flags(parser: argparse.ArgumentParser) -> None:
    """The bounds of the group page's "what if" simulations (`coordinator.service.whatif`)."""
    whatif = parser.add_argument_group("the group page's what-if view (each simulation is a child process)")
    for flag, name, kind, default, metavar, help_ in (
        ("--whatif-timeout-s", "COORDINATOR_WHATIF_TIMEOUT_S", float, Bounds().timeout_s, "SECONDS",
         "a simulation still running after this is killed and its page says so"),
        ("--whatif-memory-mb", "COORDINATOR_WHATIF_MEMORY_MB", int, Bounds().memory_mb, "MB",
         "a simulation's address space (RLIMIT_AS); beyond it, its page says it ran out"),
        ("--whatif-concurrency", "COORDINATOR_WHATIF_CONCURRENCY", int, Bounds().concurrency, "N",
         "simulations at once; one more is answered 429"),
    ):  # fmt: skip
        whatif.add_argument(
            flag, type=_number(kind), default=env(name, str(default)), metavar=metavar,
            help=f"{help_} (env {name}, default {default:g})",
        )  # fmt: skip


def whatif_bounds(args: argparse.Namespace) -> Bounds:
    """The flags' bounds, or a one-line error naming the flag."""
    for flag, value, least in (
        ("--whatif-timeout-s", args.whatif_timeout_s, 0.1),
        ("--whatif-memory-mb", args.whatif_memory_mb, MIN_WHATIF_MEMORY_MB),
        ("--whatif-concurrency", args.whatif_concurrency, 1),
    ):
        if value < least:
            raise CliError(f"{flag} must be at least {least:g}, not {value:g}", exit_code=2)
    return Bounds(args.whatif_timeout_s, args.whatif_memory_mb, args.whatif_concurrency)


def _output_flags(parser: argparse.ArgumentParser) -> None:
    """How long to wait for Kafka, and the logs."""
    parser.add_argument(
        "--connect-timeout",
        type=_number(float),
        default=env("COORDINATOR_CONNECT_TIMEOUT", "120"),
        metavar="SECONDS",
        help="give up when Kafka does not answer within this (env COORDINATOR_CONNECT_TIMEOUT, default 120)",
    )
    logs_ = parser.add_argument_group("logs")
    logs_.add_argument(
        "--log-level",
        default=env("COORDINATOR_LOG_LEVEL", "INFO"),
        choices=("DEBUG", "INFO", "WARNING", "ERROR"),
        help="(env COORDINATOR_LOG_LEVEL)",
    )
    logs_.add_argument(
        "--log-format",
        default=env("COORDINATOR_LOG_FORMAT", "auto"),
        choices=logs.FORMATS,
        help="json: one JSON object per line, with event, group, member, epoch and partition "
        "fields for joins, leaves, fencings, rebalances, ownership moves and partition "
        "loads; text: for people; auto: text on a terminal, json otherwise (env "
        "COORDINATOR_LOG_FORMAT, default auto); start-up errors follow it",
    )
    logs_.add_argument(
        "--access-log",
        action="store_true",
        default=env_flag("COORDINATOR_ACCESS_LOG"),
        help="log every HTTP request (method, path, status, milliseconds, client) as an "
        "`http-request` event (env COORDINATOR_ACCESS_LOG)",
    )


def _env_list(name: str) -> list[str]:
    return [v.strip() for v in env(name, "").split(",") if v.strip()]


def parse_partitions(text: str) -> set[int] | None:
    """`--partitions`: None for all, else the set it lists. Checked before Kafka is asked anything."""
    if text.strip().lower() == "all":
        return None
    chosen: set[int] = set()
    try:
        for part in text.split(","):
            low, dash, high = part.strip().partition("-")
            chosen.update(range(int(low), int(high) + 1) if dash else [int(low)])
    except ValueError:
        raise CliError(f"--partitions {text!r}: expected 'all' or a list such as 0-3,7", exit_code=2) from None
    return chosen


def _owned(chosen: set[int] | None, count: int) -> list[int]:
    if chosen is None:
        return list(range(count))
    outside = sorted(p for p in chosen if not 0 <= p < count)
    if outside:
        raise CliError(f"--partitions: the topic has partitions 0-{count - 1}, not {outside}", exit_code=2)
    return sorted(chosen)


def parse_listen(text: str, flag: str = "--listen") -> tuple[str, int]:
    host, colon, port = text.rpartition(":")
    if not colon or not port.isdigit() or not 0 < int(port) < 65536:
        raise CliError(f"{flag} {text!r}: expected HOST:PORT", exit_code=2)
    return host.strip("[]") or "0.0.0.0", int(port)


def run(args: argparse.Namespace) -> int:
    logs.configure(args.log_level, args.log_format)
    if args.ownership == "group" and args.peer:
        raise CliError(
            "--peer (COORDINATOR_PEERS) is for static ownership only: in group ownership "
            "find-coordinator asks the consumer group who owns a partition; remove it",
            exit_code=2,
        )
    if args.standby_partitions < 0:
        raise CliError(f"--standby-partitions {args.standby_partitions}: expected 0 or more", exit_code=2)
    if args.standby_partitions and args.ownership != "group":
        raise CliError(
            "--standby-partitions (COORDINATOR_STANDBY_PARTITIONS) is for group ownership only: a static "
            "instance never takes over another's partitions; add --ownership group or remove it",
            exit_code=2,
        )
    bounds = whatif_bounds(args)
    config = kafka_config.client_config(args)
    # A broker with auto.create.topics.enable (Apache Kafka's default) creates a missing topic that a
    # client asks metadata about, and librdkafka's producers and admin clients ask for that unless told
    # not to: the topic must come from `coordinator topic create` (compacted), never from a lookup.
    config.setdefault("allow.auto.create.topics", "false")
    # librdkafka's own lines go through our logging too (confluent-kafka's `logger`), so that in
    # JSON every line of the process is one object, not JSON mixed with librdkafka's `%6|...` text.
    config["logger"] = logging.getLogger("kafka")
    host, port = parse_listen(args.listen)
    if args.kafka_advertised and not args.kafka_listener:
        raise CliError("--kafka-advertised needs --kafka-listener", exit_code=2)
    if args.kafka_listener:  # refused before Kafka is waited for
        parse_listen(args.kafka_listener, "--kafka-listener")
    if args.kafka_advertised:
        parse_listen(args.kafka_advertised, "--kafka-advertised")
    if args.kafka_gateway_principals and not (args.kafka_listener and args.tokens):
        raise CliError(
            "--kafka-gateway-principals needs --kafka-listener and --tokens (a gateway authenticates "
            "with SASL PLAIN: its principal and one of its tokens)",
            exit_code=2,
        )
    chosen = parse_partitions(args.partitions)
    tls = _tls_context(args)
    advertised = args.advertised_url or f"{'https' if tls else 'http'}://{_reachable(host)}:{port}"
    try:
        authorizer = Authorizer.from_files(args.tokens, args.acls, args.allow_anonymous)
    except ConfigError as e:
        raise CliError(str(e), exit_code=2) from None
    partitions = wait_for_topic(args)
    owned = _owned(chosen, partitions) if args.ownership == "static" else []
    group_config = CoordinatorConfig(
        session_timeout_ms=args.session_timeout_ms,
        heartbeat_interval_ms=args.heartbeat_interval_ms,
        rebalance_timeout_ms=args.rebalance_timeout_ms,
        scheduled_rebalance_max_delay_ms=args.scheduled_rebalance_max_delay_ms,
        server_assignment_interval_ms=args.server_assignment_interval_ms,
        initial_assignment_delay_ms=args.initial_assignment_delay_ms,
        default_server_assignor=args.server_assignor,
        classic_min_session_timeout_ms=args.classic_min_session_timeout_ms,
        classic_group_max_size=args.classic_group_max_size,
    )
    server = CoordinatorServer(
        config,
        args.topic,
        partitions,
        owned,
        advertised,
        group_config,
        authorizer=authorizer,
        max_body_bytes=args.max_request_bytes,
        whatif_bounds=bounds,
    )
    return asyncio.run(_serve(server, args, config, host, port, tls))


class AccessLog(AbstractAccessLogger):
    """One `http-request` event per request, fields for machines, a line for people."""

    def log(self, request: web.BaseRequest, response: web.StreamResponse, time: float) -> None:
        ms = round(time * 1000, 3)
        logs.event(
            access,
            "http-request",
            "%s %s %d %.3f ms",
            request.method,
            request.path,
            response.status,
            ms,
            method=request.method,
            path=request.path,
            status=response.status,
            ms=ms,
            client=request.remote,
        )


access = logging.getLogger("coordinator.access")


def _reachable(host: str) -> str:
    return "127.0.0.1" if host in ("0.0.0.0", "::", "") else host


def _tls_context(args: argparse.Namespace) -> ssl.SSLContext | None:
    return tls_context.server_context(args.tls_cert, args.tls_key)


def wait_for_topic(args: argparse.Namespace) -> int:
    """The topic's partition count, once Kafka answers; retried with backoff until --connect-timeout."""
    from coordinator.tools.topic import Admin  # its AdminClient wrapper turns Kafka errors into one clear line

    args.timeout = max(1.0, min(10.0, args.connect_timeout / 3))

    def waiting(state: RetryCallState) -> None:
        log.warning(
            "waiting for Kafka at %s to answer (%s); retrying in %.1f s",
            args.bootstrap_servers,
            state.outcome.exception(),
            state.next_action.sleep if state.next_action else 0,
        )

    def unanswered(e: BaseException) -> bool:
        # A usage error (exit code 2: a --kafka-config property librdkafka does not know) is the same
        # at every attempt: refused at once, not after --connect-timeout of retries.
        return isinstance(e, CliError) and e.exit_code != 2

    try:
        for attempt in Retrying(
            retry=retry_if_exception(unanswered),
            stop=stop_after_delay(args.connect_timeout),
            wait=wait_exponential(multiplier=0.5, max=10),
            before_sleep=waiting,
            reraise=True,
        ):
            with attempt:
                topic = Admin(args).describe(args.topic)
    except CliError as e:
        if not unanswered(e):
            raise
        raise CliError(f"gave up after --connect-timeout {args.connect_timeout:g}s: {e}") from None
    if topic is None:
        raise CliError(
            f"topic {args.topic} does not exist at {args.bootstrap_servers}; create it with: "
            f"coordinator topic create --topic {args.topic} --partitions N",
            exit_code=1,
        )
    if not topic.compacted:
        log.warning(
            "topic %s is not compacted (cleanup.policy=%s): it will grow without bound",
            args.topic,
            topic.setting("cleanup.policy"),
        )
    return len(topic.partitions)


async def _serve(
    server: CoordinatorServer,
    args: argparse.Namespace,
    config: dict[str, str],
    host: str,
    port: int,
    tls: ssl.SSLContext | None,
) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    runner = web.AppRunner(
        server.app(),
        handle_signals=False,
        **({"access_log_class": AccessLog, "access_log": log} if args.access_log else {"access_log": None}),
    )
    await runner.setup()
    try:
        await web.TCPSite(runner, host, port, ssl_context=tls, reuse_address=True).start()
    except OSError as e:
        await runner.cleanup()
        raise CliError(f"cannot listen on {args.listen}: {e.strerror}") from None
    kafka_listener = None
    if args.kafka_listener:
        from coordinator.service.kafka_listener import KafkaListener

        kafka_host, kafka_port = parse_listen(args.kafka_listener, "--kafka-listener")
        advertised = parse_listen(args.kafka_advertised, "--kafka-advertised") if args.kafka_advertised else None
        gateways = frozenset(p.strip() for p in (args.kafka_gateway_principals or "").split(",") if p.strip())
        kafka_listener = KafkaListener(server, advertised, ssl=tls, gateway_principals=gateways)
        try:
            await kafka_listener.start(kafka_host, kafka_port)
        except OSError as e:
            await runner.cleanup()
            raise CliError(f"cannot listen on {args.kafka_listener}: {e.strerror}") from None
        log.info("Kafka listener on %s, advertised as %s:%d", args.kafka_listener, *kafka_listener.advertised)
    ownership = None
    if args.ownership == "group":
        from coordinator.service.ownership import GroupOwnership

        ownership = GroupOwnership(
            server,
            config,
            args.group_id or f"worker-coordinator-{args.topic}",
            session_timeout_ms=args.ownership_session_timeout_ms,
            standby_partitions=args.standby_partitions,
            kafka_advertised=kafka_listener.advertised if kafka_listener else None,
        )
        await ownership.start()
    else:
        if args.peer:
            from coordinator.service.ownership import Locator, PeerHealth

            server.locate = Locator(PeerHealth(server, args.peer))
        await server.start()
    log.info(
        "serving %s on %s (%s ownership%s)",
        args.topic,
        server.advertised_url,
        args.ownership,
        f", partitions {sorted(server.runtimes)}" if args.ownership == "static" else "",
    )
    await stop.wait()
    log.info("stopping")
    if kafka_listener is not None:
        await kafka_listener.close()
    if ownership is not None:
        await ownership.close()
    await server.close()
    await runner.cleanup()
    return 0
