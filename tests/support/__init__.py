"""What the tests share, in one place: no test module imports another (a helper a second test needs
moves here). `require` says what a missing tool or package means (a skip, or a failure under CI's
switch), `installed` finds the tools `make test` installs, `cli` runs `coordinator` in-process,
`topics` creates topics, `metrics` reads the Prometheus text format, `waiting` waits on conditions."""
