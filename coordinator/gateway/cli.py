"""`coordinator gateway`: the gateway's command line (DESIGN §12; `proxy` is the gateway)."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import re
import signal

from coordinator.errors import CliError
from coordinator.tools import logs

log = logging.getLogger(__name__)


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "gateway", description="A stateless proxy in Kafka's protocol in front of the real brokers: clients "
                               "bootstrap from it, and the groups matching --groups are coordinated by our "
                               "coordinators' Kafka listeners instead of the brokers. Ports: --listen's port P "
                               "is the bootstrap port, P+1 the gateway's coordinator node, P+2+N the broker "
                               "of node id N.")
    env = os.environ.get
    parser.add_argument("--bootstrap-server", "--bootstrap-servers", dest="bootstrap_server",
                        default=env("KAFKA_BOOTSTRAP_SERVERS"), metavar="HOST:PORT[,...]",
                        help="the real brokers (env KAFKA_BOOTSTRAP_SERVERS)")
    parser.add_argument("--listen", default=env("COORDINATOR_GATEWAY_LISTEN"), metavar="HOST:PORT",
                        help="the bootstrap port; the coordinator node's and the brokers' ports follow it "
                             "(env COORDINATOR_GATEWAY_LISTEN)")
    parser.add_argument("--advertised-host", default=env("COORDINATOR_GATEWAY_ADVERTISED_HOST"), metavar="HOST",
                        help="the host the gateway's answers name (default: --listen's host, 127.0.0.1 for a "
                             "wildcard)")
    parser.add_argument("--groups", default=env("COORDINATOR_GATEWAY_GROUPS"), metavar="REGEX",
                        help="our groups: a regex matched against the whole group id (never a connect- prefix: "
                             "sink connectors' consumer groups are named so)")
    parser.add_argument("--coordinator", default=env("COORDINATOR_GATEWAY_COORDINATORS"), metavar="HOST:PORT[,...]",
                        help="the coordinators' Kafka listeners (serve --kafka-listener)")
    parser.add_argument("--log-level", default=env("COORDINATOR_LOG_LEVEL", "INFO"))
    parser.add_argument("--log-format", default=env("COORDINATOR_LOG_FORMAT", "auto"), choices=logs.FORMATS)
    parser.set_defaults(func=run)


def _addresses(text: str | None, flag: str) -> list[tuple[str, int]]:
    from coordinator.gateway.proxy import parse_address

    if not text:
        raise CliError(f"{flag} is required")
    try:
        return [parse_address(part) for part in text.split(",") if part.strip()]
    except ValueError as e:
        raise CliError(f"{flag}: {e}") from None


def run(args: argparse.Namespace) -> int:
    from coordinator.gateway.proxy import Gateway, GatewayConfig

    logs.configure(args.log_level, args.log_format)
    if not args.groups:
        raise CliError("--groups is required")
    try:
        re.compile(args.groups)
    except re.error as e:
        raise CliError(f"--groups: {e}") from None
    listen = _addresses(args.listen, "--listen")
    if len(listen) != 1:
        raise CliError("--listen takes one HOST:PORT")
    config = GatewayConfig(bootstrap=_addresses(args.bootstrap_server, "--bootstrap-server"), listen=listen[0],
                           groups=args.groups, coordinators=_addresses(args.coordinator, "--coordinator"),
                           advertised_host=args.advertised_host)

    async def main() -> None:
        gateway = Gateway(config)
        try:
            await gateway.start()
        except (OSError, ValueError) as e:
            raise CliError(f"cannot listen: {e}") from None
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        log.info("gateway: bootstrap %s:%d, coordinator node at port %d, brokers %s", *config.listen,
                 gateway.coordinator_port, config.bootstrap)
        await stop.wait()
        await gateway.close()

    asyncio.run(main())
    return 0
