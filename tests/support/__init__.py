"""What the tests share, in one place: no test module imports another (a helper a second test needs moves
here). `require` says what a missing tool means (a skip, or a failure under CI's switch), `installed` finds the
tools `make test` installs, `cli` runs `coordinator` in-process, `metrics` reads the Prometheus text format,
`waiting` waits on a condition in an event loop, and the rest are the helpers of one area that several test
modules use (`admin`, `classic`, `compose`, `kafka_listener`, `migration`, `runtime_memory`, `spark_audit`,
`worker_sdk`). Topics are created with tests/topics.py; the shared fixtures' modules (live_server,
serve_workers, kafka_groups, spark_cluster, ...) stay beside the tests."""
