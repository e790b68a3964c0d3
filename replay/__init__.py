"""A group's history for debugging: read the log, replay it through the coordinator, answer (DESIGN §9).

The on-call engineer's question is "why did task A-1 move at 03:12, and who had it before?". The
answer is in the topic: every change the coordinator made is a record there. This package reads
the records and applies them through `coordinator.core.state.CoordinatorState.replay`, the coordinator's
only interpretation of them, so the state it shows at any offset is the state a coordinator
loading the topic would have had there.

    source.py      where records come from: the live topic (read_committed, a window of offsets
                   or times), or a dump file `coordinator dump` wrote (JSON lines or binary)
    positions.py   offsets, times, windows and points, and how they are written
    history.py     the replay: records through `CoordinatorState.replay`, ownership intervals,
                   rebalances, corrupt records
    derive.py      what each record meant, derived from the state's slots before and after it
                   (one function per record type; the classic group's in derive_classic.py)
    events.py      the events: their kinds, in the protocol's words, and as JSON
    errors.py      ReplayError: what goes wrong reading or replaying, in one line
    invariants.py  what `verify` checks: no item held twice, epochs never back, valid targets
    plot.py        who held what over time, as a PNG or an HTML page: laid out in
                   plot_layout.py, drawn by plot_png.py (matplotlib) or plot_svg.py
    progress.py    progress of long reads on stderr
    cli.py         `coordinator replay timeline|state|diff|who-owned|verify` and `coordinator dump`:
                   their parsers, and ReplayError made the command line's CliError
    commands/      each subcommand's run (timeline, state and diff, who_owned, verify, dump),
                   and reading.py, what they share

Where it stands. `replay` stands on the state machine (`coordinator.core`), the wire types and the
Kafka tooling (`coordinator.tools.partitions` reads a partition as a coordinator loads it), and
below the service: the coordinator's group page (`coordinator.service.pages`) replays a group's
records and draws its timeline with `history` and `plot`, which load neither Kafka's client nor
matplotlib (`tests/test_layers.py` holds it to that).
"""
