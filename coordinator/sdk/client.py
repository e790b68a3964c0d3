"""An HTTP client of the coordinator API: finds a group's coordinator and retries what can be retried.

Any instance answers find-coordinator; the answer is cached per partition's group until a call
says NOT_COORDINATOR (the partition moved), COORDINATOR_LOAD_IN_PROGRESS (it is loading) or the
connection fails: then it backs off (tenacity, exponential with jitter) and asks again. Protocol
errors other than those are returned to the caller as they are: what to do about them is the
caller's business (the worker SDK, the admin commands).
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Callable
from typing import Any

import aiohttp
import orjson
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception_type, stop_after_delay, wait_random_exponential

from coordinator.core.protocol import ErrorCode

RETRIABLE = frozenset({ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                       ErrorCode.COORDINATOR_NOT_AVAILABLE})


class ApiError(Exception):
    """An answer that is not a protocol response: 400, 401, 403, 413, a non-JSON body."""

    def __init__(self, status: int, body: Any) -> None:
        message = body.get("ErrorMessage") if isinstance(body, dict) else str(body)[:200]
        super().__init__(f"HTTP {status}: {message}")
        self.status = status
        self.body = body


class Unavailable(Exception):
    """The coordinator could not be reached, or kept answering a retriable error, until the deadline."""


class _Retry(Exception):
    pass


class CoordinatorClient:
    def __init__(self, url: str, *, token: str | None = None, ssl_context: ssl.SSLContext | None = None,
                 timeout_s: float = 10.0, retry_for_s: float = 30.0,
                 on_retry: Callable[[str], None] | None = None) -> None:
        self.bootstrap_url = url.rstrip("/")
        self.headers = {"Content-Type": "application/json"}
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
            self._session = aiohttp.ClientSession(timeout=self.timeout, json_serialize=lambda o: orjson.dumps(o).decode())
        return self._session

    async def request(self, method: str, path: str, body: Any = None, url: str | None = None) -> dict:
        """One HTTP exchange, no retry. Protocol errors come back in the body; the rest raise."""
        data = None if body is None else orjson.dumps(body)
        async with self._http().request(method, (url or self.bootstrap_url) + path, data=data, headers=self.headers,
                                        ssl=self.ssl_context) as response:
            raw = await response.read()
        try:
            parsed = orjson.loads(raw)
        except orjson.JSONDecodeError:
            raise ApiError(response.status, raw.decode(errors="replace")) from None
        if response.status != 200:
            raise ApiError(response.status, parsed)
        return parsed

    async def coordinator_of(self, group_id: str) -> str:
        url = self._coordinators.get(group_id)
        if url is None:
            found = await self.request("POST", "/v1/find-coordinator", {"GroupId": group_id})
            if found["ErrorCode"] != 0:
                raise _Retry(f"find-coordinator: {found.get('ErrorMessage')}")
            url = self._coordinators[group_id] = found["Url"].rstrip("/")
        return url

    async def call(self, group_id: str, method: str, path: str, body: Any = None) -> dict:
        """A request about `group_id`, sent to its coordinator; NOT_COORDINATOR, loading and
        connection failures are retried (rediscovering the coordinator) for `retry_for_s`."""
        try:
            async for attempt in AsyncRetrying(retry=retry_if_exception_type(_Retry),
                                               stop=stop_after_delay(self.retry_for_s),
                                               wait=wait_random_exponential(multiplier=0.05, max=2),
                                               before_sleep=self._before_sleep, reraise=True):
                with attempt:
                    return await self._once(group_id, method, path, body)
        except _Retry as e:
            raise Unavailable(f"no coordinator for group {group_id} answered within {self.retry_for_s:g}s: {e}") from None
        raise AssertionError("unreachable")

    async def _once(self, group_id: str, method: str, path: str, body: Any) -> dict:
        try:
            url = await self.coordinator_of(group_id)
            answer = await self.request(method, path, body, url)
        except (aiohttp.ClientError, asyncio.TimeoutError, OSError) as e:
            self._coordinators.pop(group_id, None)
            raise _Retry(f"{type(e).__name__}: {e}") from None
        code = answer.get("ErrorCode", 0)
        if code in RETRIABLE:
            self._coordinators.pop(group_id, None)
            raise _Retry(f"{ErrorCode(code).name}: {answer.get('ErrorMessage')}")
        return answer

    def _before_sleep(self, state: RetryCallState) -> None:
        if self.on_retry is not None and state.outcome is not None:
            self.on_retry(str(state.outcome.exception()))
