"""The Prometheus text format as the tests read it (prometheus_client's own parser reads the families where a
test needs types and labels)."""

from __future__ import annotations


def exposed(exposition: bytes | str) -> dict[str, float]:
    """Each sample of an exposition by its series exactly as written (`name{label="value",...}`): its value."""
    text = exposition.decode() if isinstance(exposition, bytes) else exposition
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            series, _, value = line.rpartition(" ")
            out[series] = float(value)
    return out
