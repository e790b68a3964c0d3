# Everything runs from the project's own virtual environment (.venv), which `make install`
# creates; every other target depends on it, so a fresh clone needs nothing installed by hand.

PYTHON      ?= $(shell command -v python3.11 || command -v python3)
VENV        := .venv
BIN         := $(VENV)/bin
STAMP       := $(VENV)/.installed
RUN_DIR     := .run
BROKER_PORT ?= 19092
BOOTSTRAP   ?= 127.0.0.1:$(BROKER_PORT)
TOPIC       ?= __worker_offsets
PARTITIONS  ?= 16
PYTEST_ARGS ?=

export PYTHONDONTWRITEBYTECODE := 1

.PHONY: install run test test-long broker-up broker-down bench bench-records bench-state clean

install: $(STAMP)

# Reinstall when the dependency list changes. The project is installed editable so the
# console script `coordinator` runs the working tree.
$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test,spark]'
	touch $(STAMP)

# The main job. For now: a local broker and the compacted topic; a later issue adds the
# coordinators and the worker fleet.
run: install broker-up
	$(BIN)/coordinator topic create --bootstrap-servers $(BOOTSTRAP) --topic $(TOPIC) \
		--partitions $(PARTITIONS) --replication-factor 1 --if-not-exists
	$(BIN)/coordinator topic validate --bootstrap-servers $(BOOTSTRAP) --topic $(TOPIC) \
		--partitions $(PARTITIONS)
	$(BIN)/coordinator topic describe --bootstrap-servers $(BOOTSTRAP) --topic $(TOPIC)
	@echo "The broker keeps running on $(BOOTSTRAP); stop it with: make broker-down"

# The tests start their own broker (tests/conftest.py) unless KAFKA_BOOTSTRAP_SERVERS is set.
test: install
	$(BIN)/python -m pytest $(PYTEST_ARGS)

# The property tests at many times their CI example counts (the stateful state-machine test most).
test-long: install
	STATEFUL_EXAMPLES=$${STATEFUL_EXAMPLES:-50000} $(BIN)/python -m pytest \
		tests/test_state_machine_stateful.py tests/test_assignors.py $(PYTEST_ARGS)

broker-up: install
	$(BIN)/coordinator dev-broker up --port $(BROKER_PORT) --run-dir $(RUN_DIR)

broker-down: install
	$(BIN)/coordinator dev-broker down --port $(BROKER_PORT) --run-dir $(RUN_DIR)

bench: bench-records bench-state

bench-records: install
	$(BIN)/python bench/bench_records.py

bench-state: install
	$(BIN)/python bench/bench_state.py

clean: broker-down
	rm -rf $(RUN_DIR) .pytest_cache .hypothesis build *.egg-info
