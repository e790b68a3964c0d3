"""The classic protocol (seed 004) and the migration between it and the connect protocol (seed 000):
`group` (a classic group's state), `handlers` (JoinGroup, SyncGroup, Heartbeat, LeaveGroup), `change`
(a handler's pending change, the one place a group changes state), `phases` (a join phase started and
completed, departures), `timers` (sessions and the phases' deadlines), `translation` (a classic member's requests in a connect group), `holdings` (what a
classic member runs, by Kafka Connect's rule over its bytes), `migration` (converting a group)."""
