"""The connect group coordinator: state machine, runtime, Kafka log, HTTP API, worker SDK, CLI.

Later issues fill this package in; the foundation issue adds the command line (`cli`), the Kafka
client settings shared by every command (`kafka_config`), the topic tooling (`topic`) and the local
development broker (`devbroker`).
"""
