"""The classic protocol (seed 004) and the migration between it and the connect protocol (seed 000):
`group` (a classic group's state), `handlers` (JoinGroup, SyncGroup, Heartbeat, LeaveGroup and the
classic timers), `translation` (a classic member's requests in a connect group), `holdings` (what a
classic member runs, by Kafka Connect's rule over its bytes), `migration` (converting a group)."""
