"""aio.py — a small asyncio face of the synchronous client: every call
runs in a worker thread (asyncio.to_thread), and streams become async
iterators.  The traceparent set with sandboxd.trace() in the calling task
follows the call into the thread (to_thread copies the context).

    from sandboxd.aio import AsyncClient
    client = AsyncClient()
    ex = await client.sandbox.execute("python:3.12-slim", ["python", "-c", "print(1)"])
    s = await client.sandbox.sessions.create("container")
    async for ev in s.stream(["sh", "-c", "echo hi"]):
        ...
"""
import asyncio
import inspect
from typing import Any, AsyncIterator, Iterator

from .client import Client

_DONE = object()


async def _aiter(it: Iterator[Any]) -> AsyncIterator[Any]:
    try:
        while True:
            v = await asyncio.to_thread(next, it, _DONE)  # type: ignore[call-arg]
            if v is _DONE:
                return
            yield v
    finally:
        close = getattr(it, "close", None)
        if close:
            await asyncio.to_thread(close)


class _Async:
    """Wraps an object: its methods become coroutines (iterators they
    return become async iterators); sub-resources are wrapped too."""

    def __init__(self, target: Any):
        self._target = target

    def __getattr__(self, name: str) -> Any:
        v = getattr(self._target, name)
        if not callable(v) or inspect.isclass(v):
            return _wrap(v)
        if name in ("stream", "follow", "watch", "iter"):
            def gen(*a: Any, **kw: Any) -> AsyncIterator[Any]:
                async def run() -> AsyncIterator[Any]:
                    it = await asyncio.to_thread(v, *a, **kw)
                    async for x in _aiter(iter(it)):
                        yield x
                return run()
            return gen

        async def call(*a: Any, **kw: Any) -> Any:
            return _wrap(await asyncio.to_thread(v, *a, **kw))
        return call

    def __repr__(self) -> str:
        return f"Async({self._target!r})"


def _wrap(v: Any) -> Any:
    mod = getattr(type(v), "__module__", "")
    if mod == "sandboxd.client":
        return _Async(v)
    return v


class AsyncClient(_Async):
    """AsyncClient(...) takes Client's arguments."""

    def __init__(self, *a: Any, **kw: Any):
        super().__init__(Client(*a, **kw))
