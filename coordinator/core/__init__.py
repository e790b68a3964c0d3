"""The state machine of the connect group protocol, sans-I/O (DESIGN §3).

Handlers take (state, request, now) and return records, a response and timers; `replay` is the
only code that changes the state. Nothing in this package imports a Kafka client, HTTP, asyncio or
a clock (`tests/test_state_machine_purity.py` checks it), so it runs the same in the service, the
in-memory driver, the replay tool and the benchmarks.
"""
