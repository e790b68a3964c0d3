"""How a restart splits the records table into runs of whole batches (spark.audit._runs): bounded
driver memory without splitting a batch, which would break a partition's offset order."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from spark.audit import _runs


def test_runs_cut_before_the_batch_that_would_pass_the_limit() -> None:
    counts = [(0, 40), (1, 40), (2, 40), (5, 10), (6, 90)]
    assert list(_runs(counts, 100)) == [(0, 1), (2, 5), (6, 6)]


def test_a_batch_larger_than_the_limit_is_a_run_of_its_own() -> None:
    assert list(_runs([(3, 500), (4, 1), (7, 2)], 100)) == [(3, 3), (4, 7)]


def test_no_batches_no_runs() -> None:
    assert list(_runs([], 100)) == []


@given(
    st.lists(st.integers(min_value=1, max_value=300), max_size=40),
    st.integers(min_value=1, max_value=500),
)
def test_runs_cover_every_batch_once_in_order_within_the_limit(sizes: list[int], limit: int) -> None:
    counts = [(10 * i, n) for i, n in enumerate(sizes)]
    runs = list(_runs(counts, limit))
    covered = [b for first, last in runs for b, _ in counts if first <= b <= last]
    assert covered == [b for b, _ in counts]
    for first, last in runs:
        inside = [n for b, n in counts if first <= b <= last]
        assert sum(inside) <= limit or len(inside) == 1
