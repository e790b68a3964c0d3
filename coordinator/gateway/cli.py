"""`coordinator gateway`: the gateway's command line (DESIGN §12; `proxy` is the gateway)."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import re
import signal
from pathlib import Path

from coordinator.errors import CliError
from coordinator.tools import logs, tls

log = logging.getLogger(__name__)


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "gateway",
        description="A stateless proxy in Kafka's protocol in front of the real brokers: clients "
        "bootstrap from it, and the groups matching --groups are coordinated by our "
        "coordinators' Kafka listeners instead of the brokers. Ports: --listen's port P "
        "is the bootstrap port, P+1 the gateway's coordinator node, P+2+N the broker "
        "of node id N.",
    )
    _where_flags(parser)
    _security_flags(parser)
    _output_flags(parser)
    # `coordinator` writes the gateway's errors, bad flags included, as JSON where its logs are JSON.
    parser.set_defaults(func=run, error_line=logs.error_line)


def _where_flags(parser: argparse.ArgumentParser) -> None:
    """The brokers, the gateway's ports, our groups and their coordinators."""
    env = os.environ.get
    parser.add_argument(
        "--bootstrap-server",
        "--bootstrap-servers",
        dest="bootstrap_server",
        default=env("KAFKA_BOOTSTRAP_SERVERS"),
        metavar="HOST:PORT[,...]",
        help="the real brokers (env KAFKA_BOOTSTRAP_SERVERS)",
    )
    parser.add_argument(
        "--listen",
        default=env("COORDINATOR_GATEWAY_LISTEN"),
        metavar="HOST:PORT",
        help="the bootstrap port; the coordinator node's and the brokers' ports follow it "
        "(env COORDINATOR_GATEWAY_LISTEN)",
    )
    parser.add_argument(
        "--advertised-host",
        default=env("COORDINATOR_GATEWAY_ADVERTISED_HOST"),
        metavar="HOST",
        help="the host the gateway's answers name (default: --listen's host, 127.0.0.1 for a wildcard)",
    )
    parser.add_argument(
        "--groups",
        default=env("COORDINATOR_GATEWAY_GROUPS"),
        metavar="REGEX",
        help="our groups: a regex matched against the whole group id (never a connect- prefix: "
        "sink connectors' consumer groups are named so)",
    )
    parser.add_argument(
        "--coordinator",
        default=env("COORDINATOR_GATEWAY_COORDINATORS"),
        metavar="HOST:PORT[,...]",
        help="the coordinators' Kafka listeners (serve --kafka-listener)",
    )


def _security_flags(parser: argparse.ArgumentParser) -> None:
    """TLS on every side, SASL required of clients, the gateway's own log-in at the coordinators."""
    env = os.environ.get
    security = parser.add_argument_group("security (DESIGN §12)")
    security.add_argument(
        "--tls-cert",
        default=env("COORDINATOR_GATEWAY_TLS_CERT"),
        metavar="FILE",
        help="TLS on every port of the gateway with this PEM certificate (chain) (env COORDINATOR_GATEWAY_TLS_CERT)",
    )
    security.add_argument(
        "--tls-key",
        default=env("COORDINATOR_GATEWAY_TLS_KEY"),
        metavar="FILE",
        help="the certificate's private key (env COORDINATOR_GATEWAY_TLS_KEY)",
    )
    security.add_argument(
        "--broker-tls-ca",
        default=env("COORDINATOR_GATEWAY_BROKER_TLS_CA"),
        metavar="FILE",
        help="TLS to the brokers, trusting these CA certificates (PEM) (env COORDINATOR_GATEWAY_BROKER_TLS_CA)",
    )
    security.add_argument(
        "--coordinator-tls-ca",
        default=env("COORDINATOR_GATEWAY_COORDINATOR_TLS_CA"),
        metavar="FILE",
        help="TLS to the coordinators' Kafka listeners, trusting these CA "
        "certificates (PEM) (env COORDINATOR_GATEWAY_COORDINATOR_TLS_CA)",
    )
    security.add_argument(
        "--require-sasl",
        action="store_true",
        default=env("COORDINATOR_GATEWAY_REQUIRE_SASL", "") in ("1", "true", "yes"),
        help="a client connection must authenticate (SASL, passed through to the brokers, which "
        "decide) before anything but ApiVersions; otherwise it is closed (env "
        "COORDINATOR_GATEWAY_REQUIRE_SASL=true)",
    )
    security.add_argument(
        "--coordinator-user",
        default=env("COORDINATOR_GATEWAY_COORDINATOR_USER"),
        metavar="PRINCIPAL",
        help="log in to the coordinators as this principal (SASL PLAIN; one of their "
        "--kafka-gateway-principals) and forward our groups' requests with each client's "
        "principal (env COORDINATOR_GATEWAY_COORDINATOR_USER)",
    )
    security.add_argument(
        "--coordinator-password-file",
        default=env("COORDINATOR_GATEWAY_COORDINATOR_PASSWORD_FILE"),
        metavar="FILE",
        help="a file holding the principal's token (env COORDINATOR_GATEWAY_COORDINATOR_PASSWORD_FILE)",
    )


def _output_flags(parser: argparse.ArgumentParser) -> None:
    """Metrics and logs."""
    env = os.environ.get
    parser.add_argument(
        "--metrics-listen",
        default=env("COORDINATOR_GATEWAY_METRICS_LISTEN"),
        metavar="HOST:PORT",
        help="serve the gateway's Prometheus metrics at http://HOST:PORT/metrics (env "
        "COORDINATOR_GATEWAY_METRICS_LISTEN; default: off)",
    )
    # choices: a level logging does not know was a traceback from logs.configure.
    parser.add_argument(
        "--log-level",
        default=env("COORDINATOR_LOG_LEVEL", "INFO"),
        choices=("DEBUG", "INFO", "WARNING", "ERROR"),
        help="(env COORDINATOR_LOG_LEVEL)",
    )
    parser.add_argument(
        "--log-format",
        default=env("COORDINATOR_LOG_FORMAT", "auto"),
        choices=logs.FORMATS,
        help="json: one JSON object per line; text: for people; auto: text on a terminal, json "
        "otherwise (env COORDINATOR_LOG_FORMAT, default auto); start-up errors follow it",
    )


def _addresses(text: str | None, flag: str) -> list[tuple[str, int]]:
    from coordinator.gateway.rules import parse_address

    if not text:
        raise CliError(f"{flag} is required", exit_code=2)
    try:
        return [parse_address(part) for part in text.split(",") if part.strip()]
    except ValueError as e:
        raise CliError(f"{flag}: {e}", exit_code=2) from None


def _credentials(args: argparse.Namespace) -> tuple[str, str] | None:
    if not args.coordinator_user and not args.coordinator_password_file:
        return None
    if not (args.coordinator_user and args.coordinator_password_file):
        raise CliError("--coordinator-user and --coordinator-password-file go together", exit_code=2)
    try:
        password = Path(args.coordinator_password_file).read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as e:
        raise CliError(
            f"--coordinator-password-file: cannot read {args.coordinator_password_file}: {e}", exit_code=2
        ) from None
    if not password:
        raise CliError(f"--coordinator-password-file: {args.coordinator_password_file} is empty", exit_code=2)
    return args.coordinator_user, password


def run(args: argparse.Namespace) -> int:
    from coordinator.gateway.proxy import Gateway, GatewayConfig

    logs.configure(args.log_level, args.log_format)
    if not args.groups:
        raise CliError("--groups is required", exit_code=2)
    try:
        re.compile(args.groups)
    except re.error as e:
        raise CliError(f"--groups: {e}", exit_code=2) from None
    listen = _addresses(args.listen, "--listen")
    if len(listen) != 1:
        raise CliError("--listen takes one HOST:PORT", exit_code=2)
    metrics_at = _addresses(args.metrics_listen, "--metrics-listen")[0] if args.metrics_listen else None
    config = GatewayConfig(
        bootstrap=_addresses(args.bootstrap_server, "--bootstrap-server"),
        listen=listen[0],
        groups=args.groups,
        coordinators=_addresses(args.coordinator, "--coordinator"),
        advertised_host=args.advertised_host,
        server_ssl=tls.server_context(args.tls_cert, args.tls_key),
        broker_ssl=tls.client_context(args.broker_tls_ca, "--broker-tls-ca"),
        coordinator_ssl=tls.client_context(args.coordinator_tls_ca, "--coordinator-tls-ca"),
        require_sasl=args.require_sasl,
        coordinator_credentials=_credentials(args),
    )

    async def main() -> None:
        gateway = Gateway(config)
        try:
            await gateway.start()
        except (OSError, ValueError) as e:
            raise CliError(f"cannot listen: {e}") from None
        runner = None
        if metrics_at is not None:
            from aiohttp import web

            runner = web.AppRunner(gateway.metrics.app(), access_log=None)
            await runner.setup()
            try:
                await web.TCPSite(runner, *metrics_at).start()
            except OSError as e:
                await runner.cleanup()
                await gateway.close()
                raise CliError(f"--metrics-listen: cannot listen on {args.metrics_listen}: {e.strerror}") from None
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        log.info(
            "gateway: bootstrap %s:%d, coordinator node at port %d, brokers %s",
            *config.listen,
            gateway.coordinator_port,
            config.bootstrap,
        )
        await stop.wait()
        await gateway.close()
        if runner is not None:
            await runner.cleanup()

    asyncio.run(main())
    return 0
