"""`coordinator serve` with a gate in front of its transactions' commits, so that a test can kill it
with a batch open for certain (tests/test_serve_process.py, kill -9 in the middle of a rebalance).

Run as `python tests/gated_serve.py ARGS...` for `coordinator serve ARGS...`, with
$GATED_SERVE_GATE naming a file. While that file does not exist, every commit goes through. Once
it exists and holds a number N, N more transactions commit; the one after is written (its records
produced and flushed to the broker inside its transaction), the file `<gate>.blocked` is created,
and its commit does not happen: the writer waits until the process is killed, or until the file
`<gate>.release` exists, when the commit goes on (tests/test_events_after_commit.py). Every request
waiting for that batch (or, the partition committing one batch at a time, for any later one) stays
unanswered meanwhile. Nothing else differs from `coordinator serve`.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

import confluent_kafka

from coordinator.cli import main
from coordinator.service import log as coordinator_log

GATE = Path(os.environ["GATED_SERVE_GATE"])
BLOCKED = GATE.with_name(GATE.name + ".blocked")
RELEASE = GATE.with_name(GATE.name + ".release")

_lock = threading.Lock()
_commits_since_gate = 0


class GatedProducer:
    """The transactional producer of `coordinator.service.log.PartitionWriter`, with the gate in `commit_transaction`."""

    def __init__(self, config: dict[str, Any]) -> None:
        self._producer = confluent_kafka.Producer(config)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._producer, name)

    def commit_transaction(self, *args: Any) -> None:
        global _commits_since_gate
        if GATE.exists():
            with _lock:
                blocked = _commits_since_gate >= int(GATE.read_text())
                _commits_since_gate += 1
            if blocked:
                self._producer.flush(30)  # the batch's records are in the log, its transaction open
                BLOCKED.touch()
                while not RELEASE.exists():
                    time.sleep(0.05)
        self._producer.commit_transaction(*args)


coordinator_log.Producer = GatedProducer

if __name__ == "__main__":
    raise SystemExit(main(["serve", *sys.argv[1:]]))
