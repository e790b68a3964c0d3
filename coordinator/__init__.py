"""The connect group coordinator, in layers (each imports only the ones below it):

- `core`: the sans-I/O state machine: protocol, state and replay, handlers, reconciliation,
  assignors, the in-memory driver;
- `api`: the HTTP contract: wire types and the OpenAPI document;
- `tools`: Kafka tooling: client settings, the topic, the local Apache Kafka, serve as a process;
- `service`: the runtime per partition, the Kafka log, the HTTP server, auth, metrics, ownership,
  the HTML pages (which draw a group's timeline with `replay`'s pure history, the one layer outside
  this package the service may import; `replay`'s reading and commands stay above);
- `sdk`: the worker's side: client, worker, fleet, admin commands, the demo;
- `cli`: the `coordinator` command, which imports a subcommand's module only when it runs.
"""
