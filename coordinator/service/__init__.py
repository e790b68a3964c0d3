"""The coordinator service: the I/O shell around the state machine (DESIGN §6).

Per partition a serial runtime over the Kafka log, the HTTP server and its security and metrics,
partition ownership, and `coordinator serve`, which puts them together."""
