"""The flags every command that talks to a coordinator instance over HTTP takes: which instance, the
bearer token, the CA for HTTPS (each with its environment variable). The admin commands
(`coordinator.sdk.admin`) and `coordinator topic upgrade-format` share them."""

from __future__ import annotations

import argparse
import os

DEFAULT_URL = "http://127.0.0.1:8400"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--url",
        default=os.environ.get("COORDINATOR_URL", DEFAULT_URL),
        help=f"any coordinator instance (env COORDINATOR_URL, default {DEFAULT_URL})",
    )
    parser.add_argument(
        "--token", default=os.environ.get("COORDINATOR_TOKEN"), help="bearer token (env COORDINATOR_TOKEN)"
    )
    parser.add_argument(
        "--ca-file",
        default=os.environ.get("COORDINATOR_CA_FILE"),
        metavar="FILE",
        help="CA certificates to verify an HTTPS coordinator (env COORDINATOR_CA_FILE)",
    )
