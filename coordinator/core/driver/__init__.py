"""The in-memory driver: the state machine, a log and its timers on a virtual clock, with simulated
workers of both protocols (`simulation`). Tests and benchmarks drive histories through it, and
`coordinator replay simulate` will drive recorded ones."""

from coordinator.core.driver.simulation import Driver, SimClassicWorker, SimWorker, converge, step_all

__all__ = ["Driver", "SimClassicWorker", "SimWorker", "converge", "step_all"]
