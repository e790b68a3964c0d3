"""An HTTP client of the coordinator API: finds a group's coordinator and retries what can be retried.

Any instance answers find-coordinator; the answer is cached per partition's group until a call
says NOT_COORDINATOR (the partition moved), COORDINATOR_LOAD_IN_PROGRESS (it is loading) or the
connection fails: then it backs off (tenacity, exponential with jitter) and asks again. Protocol
errors other than those are returned to the caller as they are: what to do about them is the
caller's business (the worker SDK, the admin commands).
"""

from __future__ import annotations

import asyncio
import random
import ssl
import time
from collections.abc import Callable
from typing import TypeVar

import aiohttp
import msgspec
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception_type, stop_after_delay, wait_random_exponential

from coordinator.api import operations, wire
from coordinator.core.protocol import ErrorCode, ErrorResponse

T = TypeVar("T")

# What members heartbeating through a client show as their ClientId unless it names another, as a
# Kafka client's client.id defaults to one naming the client.
DEFAULT_CLIENT_ID = "coordinator-sdk"

RETRIABLE = frozenset(
    {ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.COORDINATOR_NOT_AVAILABLE}
)


# The back-off before the first retry (at most; random below it), doubling on each retry up to 2 s.
_FIRST_WAIT_S = 0.05


class ApiError(Exception):
    """An answer that is not a protocol response: 400, 401, 403, 413, a body that is not the API's."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"HTTP {status}: {message}")
        self.status = status
        self.message = message


class _Outcome(wire.Body):
    """Any answer's ErrorCode and ErrorMessage, read before the whole answer."""

    error_code: int = 0
    error_message: str | None = None


class Unavailable(Exception):
    """The coordinator could not be reached, or kept answering a retriable error, until the deadline."""


class _Retry(Exception):
    pass


class CoordinatorClient:
    def __init__(
        self,
        url: str,
        *,
        token: str | None = None,
        ssl_context: ssl.SSLContext | None = None,
        timeout_s: float = 10.0,
        retry_for_s: float = 30.0,
        on_retry: Callable[[str], None] | None = None,
        client_id: str = DEFAULT_CLIENT_ID,
    ) -> None:
        self.bootstrap_url = url.rstrip("/")
        # Client-Id: the members this client heartbeats for show it as their ClientId (Kafka's client.id).
        self.headers = {"Content-Type": "application/json", "Client-Id": client_id}
        if token:
            self.headers["Authorization"] = f"Bearer {token}"
        self.ssl_context = ssl_context
        self.timeout = aiohttp.ClientTimeout(total=timeout_s)
        self.retry_for_s = retry_for_s
        self.on_retry = on_retry
        self._coordinators: dict[str, str] = {}  # group id -> URL of its coordinator
        self._session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> CoordinatorClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    def _http(self) -> aiohttp.ClientSession:
        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=self.timeout)
        return self._session

    async def request(
        self,
        method: str,
        path: str,
        answer: type[T],
        body: msgspec.Struct | None = None,
        url: str | None = None,
        timeout_s: float | None = None,
    ) -> T | ErrorResponse:
        """One HTTP exchange, no retry: the `answer`, or the protocol error (ErrorResponse) when an
        error left out the answer's fields. Anything that is not the API's answer raises ApiError.
        `timeout_s` replaces the client's for a request that may wait (a classic JoinGroup)."""
        data = None if body is None else wire.encode(body)
        timeout = None if timeout_s is None else aiohttp.ClientTimeout(total=timeout_s)
        async with self._http().request(
            method,
            (url or self.bootstrap_url) + path,
            data=data,
            headers=self.headers,
            ssl=self.ssl_context,
            timeout=timeout,
        ) as response:
            raw = await response.read()
        try:
            outcome = msgspec.json.decode(raw, type=_Outcome)
        except msgspec.MsgspecError:
            raise ApiError(response.status, raw.decode(errors="replace")[:200]) from None
        if response.status != 200:
            raise ApiError(response.status, outcome.error_message or "")
        try:
            return msgspec.json.decode(raw, type=answer)
        except msgspec.ValidationError as e:
            if outcome.error_code:
                return ErrorResponse(outcome.error_code, outcome.error_message)
            raise ApiError(response.status, f"not a {answer.__name__}: {e}") from None

    async def coordinator_of(self, group_id: str) -> str:
        url = self._coordinators.get(group_id)
        if url is None:
            found = await self.request(
                *operations.route("findCoordinator"),
                wire.FindCoordinatorResponse,
                wire.FindCoordinatorRequest(group_id=group_id),
            )
            if isinstance(found, ErrorResponse):
                raise _Retry(f"find-coordinator: {found.error_message}")
            url = self._coordinators[group_id] = found.url.rstrip("/")
        return url

    async def call(
        self,
        group_id: str,
        method: str,
        path: str,
        answer: type[T],
        body: msgspec.Struct | None = None,
        timeout_s: float | None = None,
    ) -> T | ErrorResponse:
        """A request about `group_id`, sent to its coordinator; NOT_COORDINATOR, loading and
        connection failures are retried (rediscovering the coordinator) for `retry_for_s`."""
        # The first attempt outside tenacity: nearly every call succeeds at once, and building the
        # retry loop cost about a fifth of a worker's CPU per heartbeat (bench/soak.py, 10,000 workers).
        started = time.monotonic()
        try:
            return await self._once(group_id, method, path, answer, body, timeout_s)
        except _Retry as e:
            if self.on_retry is not None:
                self.on_retry(str(e))
            first = e
        await asyncio.sleep(random.uniform(0, _FIRST_WAIT_S))  # the loop's own first wait, with jitter
        remaining = self.retry_for_s - (time.monotonic() - started)
        if remaining <= 0:
            raise Unavailable(
                f"no coordinator for group {group_id} answered within {self.retry_for_s:g}s: {first}"
            ) from None
        try:
            async for attempt in AsyncRetrying(
                retry=retry_if_exception_type(_Retry),
                stop=stop_after_delay(remaining),
                wait=wait_random_exponential(multiplier=_FIRST_WAIT_S, max=2),
                before_sleep=self._before_sleep,
                reraise=True,
            ):
                with attempt:
                    return await self._once(group_id, method, path, answer, body, timeout_s)
        except _Retry as e:
            raise Unavailable(
                f"no coordinator for group {group_id} answered within {self.retry_for_s:g}s: {e}"
            ) from None
        raise AssertionError("unreachable")

    async def _once(
        self,
        group_id: str,
        method: str,
        path: str,
        answer: type[T],
        body: msgspec.Struct | None,
        timeout_s: float | None = None,
    ) -> T | ErrorResponse:
        try:
            url = await self.coordinator_of(group_id)
            got = await self.request(method, path, answer, body, url, timeout_s)
        except (TimeoutError, aiohttp.ClientError, OSError) as e:
            self._coordinators.pop(group_id, None)
            raise _Retry(f"{type(e).__name__}: {e}") from None
        code = getattr(got, "error_code", 0)
        if code in RETRIABLE:
            self._coordinators.pop(group_id, None)
            raise _Retry(f"{ErrorCode(code).name}: {got.error_message}")
        return got

    def _before_sleep(self, state: RetryCallState) -> None:
        if self.on_retry is not None and state.outcome is not None:
            self.on_retry(str(state.outcome.exception()))
