# Everything runs from the project's own virtual environment (.venv), which `make install`
# creates; every other target depends on it, so a fresh clone needs nothing installed by hand.
# `make install` (and so `make run`) installs only what the main job needs; the targets that need an
# extra of pyproject.toml (test, spark, plot) install it first, once each (a stamp per extra), and
# `coordinator audit`/`sql`/`spark-conf` and `replay timeline --plot FILE.png` install theirs on first use.

PYTHON      ?= $(shell command -v python3.11 || command -v python3)
VENV        := .venv
BIN         := $(VENV)/bin
STAMP       := $(VENV)/.installed
EXTRA       := $(VENV)/.installed-
RUN_DIR     := .run
BROKER_PORT ?= 19092
# 1, or 3 for a local cluster with replication factor 3 and min ISR 2 (node i on BROKER_PORT+i-1).
BROKER_NODES ?= 1
BROKER      := --port $(BROKER_PORT) --nodes $(BROKER_NODES) --run-dir $(RUN_DIR)
BOOTSTRAP   ?= 127.0.0.1:$(BROKER_PORT)
TOPIC       ?= __worker_offsets
PARTITIONS  ?= 16
PYTEST_ARGS ?=

export PYTHONDONTWRITEBYTECODE := 1

.PHONY: install install-test install-spark install-plot run run-connect test lint test-long broker-up broker-down bench bench-records bench-state bench-rebalance bench-replay bench-service bench-audit bench-wire bench-vs-connect bench-migration bench-capacity bench-gateway bench-simulate bench-whatif soak fleet promtool chromium postgresql clean

install: $(STAMP)

# Reinstall when the dependency list changes. The project is installed editable so the
# console script `coordinator` runs the working tree. pip is not upgraded: the venv's own installs
# the project's wheels, and asking the index for a new pip costs a newcomer's first run seconds.
$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e .
	touch $(STAMP)

# An extra (`$(EXTRA)test`, ...spark, ...plot): its requirements on top of the base install, again when
# pyproject.toml changes. Installed as pip installs '.[NAME]', without rebuilding the project.
$(EXTRA)%: $(STAMP)
	$(BIN)/python -c 'import sys; from coordinator.tools.extras import requirements; print(*requirements(sys.argv[1]), sep="\n")' $* \
		> $(VENV)/requirements-$*.txt
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -r $(VENV)/requirements-$*.txt
	touch $@

install-test: $(EXTRA)test
install-spark: $(EXTRA)spark
install-plot: $(EXTRA)plot

# Runs the command $(1) against the local Apache Kafka with the compacted topic created: the broker is
# started first and stopped after, unless one was already running. The first start downloads Kafka's
# jars from Maven Central.
with_broker = @if $(BIN)/coordinator dev-broker status $(BROKER) >/dev/null; then \
		started=no; else $(BIN)/coordinator dev-broker up $(BROKER) || exit 1; started=yes; fi; \
	$(BIN)/coordinator topic create --bootstrap-servers $(BOOTSTRAP) --topic $(TOPIC) \
		--partitions $(PARTITIONS) --replication-factor $(BROKER_NODES) --if-not-exists >/dev/null \
	&& $(1); status=$$?; \
	if [ $$started = yes ]; then $(BIN)/coordinator dev-broker down $(BROKER); fi; \
	exit $$status

# The main job: a coordinator, a fleet of workers and a scripted story (coordinator/sdk/demo.py).
run: install
	$(call with_broker,$(BIN)/coordinator demo --bootstrap-servers $(BOOTSTRAP) --topic $(TOPIC))

# The second main job: a coordinator with its Kafka listener, a gateway and three unmodified Kafka
# Connect 4.3.1 workers (coordinator/sdk/demo_connect.py; Kafka Connect's jars come from Maven Central
# on first use).
run-connect: install
	$(call with_broker,$(BIN)/coordinator demo --connect --bootstrap-servers $(BOOTSTRAP) --topic $(TOPIC))

# The tests start their own Apache Kafka (tests/conftest.py: one node for each test process, three for
# the broker-failure tests) and stop it, unless KAFKA_BOOTSTRAP_SERVERS is set. TEST_PROCESSES=N runs
# them on N processes (pytest-xdist; a test module never spans two, tests/conftest.py says why). Two by
# default, in lanes: the integration units (brokers, JVMs, timers) one after the other in the first
# process, never two side by side (on our two cores that made tests that pass alone fail), and the units
# without a broker in the second, in the time the first waits (tests/conftest.py).
TEST_PROCESSES ?= 2
test: install-test install-spark install-plot promtool chromium postgresql
	$(BIN)/python -m pytest -n $(TEST_PROCESSES) $(PYTEST_ARGS)

# ruff (pinned in the test extra; rules and the reason for each ignore in pyproject.toml): the lint
# rules, then the formatting, which `$(BIN)/ruff format .` applies.
lint: install-test
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

# CI's switch (.ci/run sets it; tests/support/require.py reads it in the tests): with COORDINATOR_TESTS_REQUIRE_ALL
# set to anything but empty, 0, false or no, a tool below that cannot be installed ends `make` with an error
# instead of a warning, and the tests that need it fail instead of skipping.
REQUIRE_ALL := case "$${COORDINATOR_TESTS_REQUIRE_ALL:-}" in ""|0|false|no) ;; *) exit 1;; esac

# promtool, for tests/test_ops_files.py's `promtool check rules`: Debian's prometheus package, fetched
# with apt-get download and unpacked into ~/.cache (nothing installed system-wide, no service started).
# Best effort: without apt the test that runs it is skipped, saying why (an error under CI's switch).
PROMTOOL := $(HOME)/.cache/worker-coordinator/promtool/promtool
promtool:
	@if [ -x "$(PROMTOOL)" ] || command -v promtool >/dev/null 2>&1; then exit 0; fi; \
	dir=$$(mktemp -d) && chmod 755 $$dir && cd $$dir && \
	{ apt-get download prometheus >/dev/null 2>&1 || { apt-get update -qq >/dev/null 2>&1 && apt-get download prometheus >/dev/null 2>&1; }; } && \
	dpkg-deb --fsys-tarfile prometheus_*.deb | tar -x ./usr/bin/promtool && \
	mkdir -p "$(dir $(PROMTOOL))" && mv usr/bin/promtool "$(PROMTOOL)"; \
	rm -rf $$dir; \
	[ -x "$(PROMTOOL)" ] || { echo "make promtool: Debian's prometheus package could not be fetched; the promtool test skips without it (fails under COORDINATOR_TESTS_REQUIRE_ALL)" >&2; $(REQUIRE_ALL); }

# chromium, for tests/test_pages.py's headless-browser test of the group page: Debian's package, installed
# system-wide (unlike promtool it needs dozens of shared libraries, which only apt resolves), so only as root
# with apt-get; `apt-get update` first only if the install fails (stale or absent package lists). About 125 MB
# of packages; it waits up to 2 min for the dpkg lock if another apt holds it. Best effort: where it cannot be
# installed the browser test is skipped, saying why (an error under CI's switch).
chromium:
	@if command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1; then exit 0; fi; \
	if [ "$$(id -u)" != 0 ]; then why="not root"; \
	elif ! command -v apt-get >/dev/null 2>&1; then why="no apt-get"; \
	else echo "make chromium: installing Debian's chromium with apt-get" >&2; \
		export DEBIAN_FRONTEND=noninteractive; \
		apt-get install -y -qq -o DPkg::Lock::Timeout=120 --no-install-recommends chromium >/dev/null 2>&1 || \
		{ apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq -o DPkg::Lock::Timeout=120 --no-install-recommends chromium >/dev/null 2>&1; }; \
		why="apt-get install chromium failed"; fi; \
	command -v chromium >/dev/null 2>&1 || \
		{ echo "make chromium: Debian's chromium could not be installed ($$why); the browser tests skip without it (fail under COORDINATOR_TESTS_REQUIRE_ALL)" >&2; $(REQUIRE_ALL); }

# postgresql, for tests/test_spark_metastore.py's shared Hive metastore: Debian's server, installed as chromium
# is (root, apt-get, `apt-get update` only if the install fails, the dpkg lock waited for). The package starts
# no server the tests use: they run their own, in a directory of their own, as the postgres user. About 60 MB of
# packages. Best effort: where it cannot be installed the metastore test is skipped, saying why (an error under CI's
# switch).
postgresql:
	@if ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then exit 0; fi; \
	if [ "$$(id -u)" != 0 ]; then why="not root"; \
	elif ! command -v apt-get >/dev/null 2>&1; then why="no apt-get"; \
	else echo "make postgresql: installing Debian's postgresql with apt-get" >&2; \
		export DEBIAN_FRONTEND=noninteractive; \
		apt-get install -y -qq -o DPkg::Lock::Timeout=120 --no-install-recommends postgresql >/dev/null 2>&1 || \
		{ apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq -o DPkg::Lock::Timeout=120 --no-install-recommends postgresql >/dev/null 2>&1; }; \
		why="apt-get install postgresql failed"; fi; \
	ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || \
		{ echo "make postgresql: Debian's postgresql could not be installed ($$why); the metastore test skips without it (fails under COORDINATOR_TESTS_REQUIRE_ALL)" >&2; $(REQUIRE_ALL); }

# The property tests at many times their CI example counts (the stateful state-machine test most).
test-long: install-test
	STATEFUL_EXAMPLES=$${STATEFUL_EXAMPLES:-50000} $(BIN)/python -m pytest \
		tests/test_state_machine_stateful.py tests/test_assignors.py $(PYTEST_ARGS)

broker-up: install
	$(BIN)/coordinator dev-broker up $(BROKER)

broker-down: install
	$(BIN)/coordinator dev-broker down $(BROKER)

bench: bench-records bench-state bench-wire bench-rebalance bench-replay bench-service bench-capacity bench-gateway bench-audit bench-vs-connect bench-migration

bench-records: install
	$(BIN)/python bench/bench_records.py

# A heartbeat request from its bytes to the core's HeartbeatRequest: msgspec decoding straight into the core's
# message against the hand parser it replaced, both in one run (no broker).
bench-wire: install
	$(BIN)/python bench/bench_wire.py

bench-simulate: install
	$(BIN)/python bench/bench_simulate.py $(SIMULATE_ARGS)

# The group page's "what if" view under load (bench/bench_whatif.py): heartbeat p50/p99 of a steady fleet
# against one serve, alone and while the view simulates the generated week back to back (WHATIF_ARGS).
bench-whatif: install broker-up
	$(BIN)/python bench/bench_whatif.py --bootstrap-servers $(BOOTSTRAP) $(WHATIF_ARGS)

bench-state: install
	$(BIN)/python bench/bench_state.py

# Rebalances with real workers, a `coordinator serve` per run and the local broker: scale out, rolling
# bounces, crashes, a join storm, client-side and server-side assignor (`REBALANCE_ARGS=--quick` to smoke-test).
bench-rebalance: install broker-up
	$(BIN)/python bench/bench_rebalance.py --bootstrap-servers $(BOOTSTRAP) $(REBALANCE_ARGS)

# Side by side with real Kafka Connect (bench/bench_vs_connect.py): five Connect workers (JVMs, jars from
# Maven Central on first use) and five of ours, the same scenarios and timeouts on a broker of their own.
# About 40 minutes with Connect's default timeouts; `VS_CONNECT_ARGS=--fast` divides them by 10 (~10 min).
bench-vs-connect: install
	$(BIN)/python bench/bench_vs_connect.py $(VS_CONNECT_ARGS)

# A rolling upgrade of 10 classic workers to the connect protocol against a classic rolling restart
# (issue 17), on the pure state machine with a virtual clock: moves, unowned task-seconds, convergence.
bench-migration: install
	$(BIN)/python bench/bench_migration.py $(MIGRATION_ARGS)

# `coordinator replay timeline` and `state --at` on a dump of 1,000,000 records of many groups (no broker).
bench-replay: install
	$(BIN)/python bench/bench_replay.py

# `coordinator serve` under load, with the local broker: steady heartbeats against a bare aiohttp endpoint,
# join/leave churn, kill -9 failover, partition load (`SERVICE_ARGS=--quick` to smoke-test).
bench-service: install-test broker-up
	$(BIN)/python bench/bench_service.py --bootstrap-servers $(BOOTSTRAP) $(SERVICE_ARGS)

# What one `coordinator serve` answers, for docs/capacity.md: steady heartbeats at rising offered rates
# (open loop) against a p99 bound, memory per member, and join/leave churn on a one-partition topic.
bench-capacity: install broker-up
	$(BIN)/python bench/bench_capacity.py --bootstrap-servers $(BOOTSTRAP) $(CAPACITY_ARGS)

# Issue 28's figures, with the local broker: JoinGroup+SyncGroup and Heartbeat round trips/s over the Kafka
# listener against the HTTP API (one `coordinator serve`), produce/fetch MB/s and added p99 latency through
# `coordinator gateway` against straight to the broker, and what rewriting KIP-951's node endpoints in Python
# would cost (`GATEWAY_ARGS=--quick` to smoke-test).
bench-gateway: install broker-up
	$(BIN)/python bench/bench_gateway.py --bootstrap-servers $(BOOTSTRAP) $(GATEWAY_ARGS)

# One `coordinator serve` for 10 minutes under steady heartbeats from 50 groups x 4 SDK workers plus churn
# (a leave, a join, a task count change, a kill without a leave, every 2 s), with the local broker: RSS, open
# fds, heartbeat p50/p99, requests and rebalances every minute, their growth, then every task owned once
# (bench/soak.py; `SOAK_ARGS="--minutes 1 --groups 10"` for a short one).
soak: install broker-up
	$(BIN)/python bench/soak.py --bootstrap-servers $(BOOTSTRAP) $(SOAK_ARGS)

# The soak at scale (issue 33): 100,000 workers (5,000 groups x 20) heartbeating every 60 s against three
# `coordinator serve` instances in group ownership, for 30 minutes, with the same churn and the same
# ownership check at the end. 60 s, not 30, to fit this machine's 2 cores: a heartbeat costs about
# 0.35 ms of the coordinators' CPU and 0.4 ms of the simulated workers' (bench/soak.py, 10,000 workers),
# so 1,667 heartbeats/s take about 1.2 cores, and 3,333/s at 30 s would take them all. The workers run in
# two processes (--worker-processes 2: one event loop fell behind at 50,000), each with a pool of 500
# HTTP connections (at 100, 833 heartbeats/s a process leave 120 ms an exchange, and a wait for a free
# connection counts in the client's 10 s timeout), the session is three heartbeats, and the groups join
# one after another over 10 minutes (FLEET_ARGS overrides any of it: a flag given twice takes the last).
fleet: install broker-up
	$(BIN)/python bench/soak.py --bootstrap-servers $(BOOTSTRAP) --instances 3 --groups 5000 --workers 20 \
		--heartbeat-ms 60000 --session-ms 180000 --join-over 600 --minutes 30 --worker-processes 2 --connections 500 $(FLEET_ARGS)

# `coordinator audit` (Spark) on a topic of 1,000,000 records in 16 partitions with the local broker: the no-decoding baseline, the raw records table (JVM and Python decoders),
# the full audit, end-to-end lag with a processing-time trigger (`AUDIT_ARGS=--quick` to smoke-test).
bench-audit: install-spark broker-up
	$(BIN)/python bench/bench_audit.py --bootstrap-servers $(BOOTSTRAP) $(AUDIT_ARGS)

clean: broker-down
	rm -rf $(RUN_DIR) .pytest_cache .hypothesis build *.egg-info
