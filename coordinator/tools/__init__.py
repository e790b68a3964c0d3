"""Kafka tooling used by every other layer: client settings (`kafka_config`), the compacted topic
(`topic`), the local Apache Kafka (`devbroker`) and `coordinator serve` as a child process
(`process`). Nothing here imports the state machine, the service or the SDK."""
