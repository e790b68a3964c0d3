"""The connect group coordinator, in layers (each imports only the ones below it):

- `core`: the sans-I/O state machine: protocol, state and replay, handlers, reconciliation,
  assignors, the in-memory driver;
- `tools`: what every layer uses: Kafka client settings, the topic and reading its partitions
  (`partitions`: which one a group lives in), the local Apache Kafka, Maven, serve as a process,
  logging, times and tables for people;
- `api`: the HTTP contract: wire types and the OpenAPI document;
- (the top-level `replay` package: the topic's history, replayed through `core`, stands here)
- `service`: the runtime per partition, the Kafka log, the HTTP server, auth, metrics, the events
  operators are told, ownership, the HTML pages (a group's timeline drawn with `replay`);
- `sdk`: the worker's side: client, worker, fleet, admin commands, the demo;
- `cli`: the `coordinator` command, which imports a subcommand's module only when it runs.
"""
