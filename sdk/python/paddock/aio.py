"""The asyncio variant of the SDK: the same objects and methods, awaited.

    async with AsyncPaddock() as px:
        async with px.create_session(agent="demo") as s:
            r = await s.exec("make test")
            async for piece in await s.exec_stream("make"):
                print(piece.text, end="")

It is not a second implementation. Every call runs the blocking SDK's own
method (the same request building, answer parsing, resumes and errors) on
a worker thread of the client's pool, and its answer comes back to the
event loop; sessions, sandboxes and their files/jobs/git come back as
async objects whose methods are awaitable, and streams (exec_stream,
jobs.follow, stream_events) as async iterators.

Cancellation: when an awaited call is cancelled (task.cancel(),
asyncio.wait_for, asyncio.timeout), its connections are shut down at once,
so the blocked read in its worker thread returns and the thread ends; any
request the call would make next raises instead of being sent. The thread
is never left waiting for the daemon. What the daemon already did stays
done: a cancelled create_session may have created the session (give an
idempotency_key to retry safely), and a cancelled evaluate or rollout still
deletes its children from its worker thread after the await has ended. A
cancelled stream is closed; iterating it again ends at once.

The pool has max_threads threads (32 by default): each awaited call holds
one while it runs, a stream only while an item is awaited; calls beyond
that wait their turn. Callbacks given to a method (upload's on_chunk) run
on the worker thread.

The methods are found at run time; their types are in aio.pyi, generated
from the blocking classes by _build/aio_stub.py.
"""
import asyncio
import contextvars
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Optional

from . import client
from ._http import DEFAULT_TIMEOUT, SCOPE, CancelScope

DEFAULT_THREADS = 32
_END = object()


class _Runner:
    """Runs blocking calls on the client's pool, each under a CancelScope."""

    def __init__(self, max_threads: int):
        if not 1 <= max_threads <= 1024:
            raise ValueError(f"paddock: max_threads {max_threads}: give 1 to 1024")
        self.pool = ThreadPoolExecutor(max_workers=max_threads, thread_name_prefix="paddock-aio")

    async def run(self, scope: CancelScope, fn: Callable[..., Any], *args: Any, **kw: Any) -> Any:
        loop = asyncio.get_running_loop()
        ctx = contextvars.copy_context()

        def target() -> Any:
            SCOPE.set(scope)  # in ctx, a copy: the caller's context is untouched
            return fn(*args, **kw)

        fut = loop.run_in_executor(self.pool, ctx.run, target)
        try:
            return await fut
        except asyncio.CancelledError:
            scope.cancel()
            raise


def _wrap(value: Any, runner: _Runner, scope: CancelScope) -> Any:
    """The async object of a blocking SDK's answer (others as they are)."""
    if isinstance(value, client.Session):
        return AsyncSession(value, runner)
    if isinstance(value, client.Sandbox):
        return AsyncSandbox(value, runner)
    if isinstance(value, (client.JobFollow, client.EventStream)):
        return AsyncStream(value, runner, scope)
    if isinstance(value, list) and value and all(isinstance(v, (client.Session, client.Sandbox)) for v in value):
        return [_wrap(v, runner, scope) for v in value]
    return value


class _Call:
    """One awaitable call. When it answers a session or a sandbox it is also
    an async context manager: ``async with px.create_session() as s``
    deletes the session on exit."""

    def __init__(self, runner: _Runner, fn: Callable[..., Any], *args: Any, **kw: Any):
        self._runner, self._fn, self._args, self._kw = runner, fn, args, kw
        self._obj: Any = None
        self._started = False

    async def _go(self) -> Any:
        # Like a coroutine, a call runs once: awaiting it again would send
        # its request again.
        if self._started:
            raise RuntimeError(f"paddock: {self._fn.__name__} was already awaited")
        self._started = True
        scope = CancelScope()
        out = await self._runner.run(scope, self._fn, *self._args, **self._kw)
        return _wrap(out, self._runner, scope)

    def __await__(self):  # type: ignore[no-untyped-def]
        return self._go().__await__()

    async def __aenter__(self) -> Any:
        self._obj = await self._go()
        if not hasattr(self._obj, "__aexit__"):
            raise TypeError(f"paddock: {self._fn.__name__} does not answer a session or sandbox")
        return await self._obj.__aenter__()

    async def __aexit__(self, *exc: Any) -> None:
        await self._obj.__aexit__(*exc)


class _Proxy:
    """The async face of one blocking SDK object: its methods give _Call
    objects to await; its plain attributes (id, info, ...) are its own."""

    def __init__(self, sync: Any, runner: _Runner):
        self._sync = sync
        self._runner = runner

    def __getattr__(self, name: str) -> Any:
        if name in ("_sync", "_runner"):
            raise AttributeError(name)  # not set yet (a copy, or a half-made object)
        attr = getattr(self._sync, name)
        if name.startswith("_") or not callable(attr):
            return attr

        def call(*args: Any, **kw: Any) -> _Call:
            return _Call(self._runner, attr, *args, **kw)

        call.__name__ = name
        call.__doc__ = attr.__doc__
        return call

    def __repr__(self) -> str:
        return "Async" + repr(self._sync)


class AsyncSession(_Proxy):
    """A session; each method of Session, awaited. files, jobs and git are
    async too. ``async with`` deletes it on exit."""

    def __init__(self, sync: client.Session, runner: _Runner):
        super().__init__(sync, runner)
        self.files = _Proxy(sync.files, runner)
        self.jobs = _Proxy(sync.jobs, runner)
        self.git = _Proxy(sync.git, runner)

    async def __aenter__(self) -> "AsyncSession":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self._runner.run(CancelScope(), self._sync.__exit__, *exc)


class AsyncSandbox(_Proxy):
    """A sandbox of the lower API; each method of Sandbox, awaited."""

    async def __aenter__(self) -> "AsyncSandbox":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self._runner.run(CancelScope(), self._sync.__exit__, *exc)


class AsyncStream:
    """A stream (exec_stream, jobs.follow, stream_events) as an async
    iterator of what the blocking one yields (Output pieces or Events), with
    the same resumes. Its other attributes (exit_code, last_event_id,
    resumes, drop) are the blocking stream's."""

    def __init__(self, sync: Any, runner: _Runner, scope: CancelScope):
        self._sync = sync
        self._runner = runner
        self._scope = scope
        self._it: Any = None

    def __aiter__(self) -> "AsyncStream":
        return self

    async def __anext__(self) -> Any:
        if self._it is None:
            self._it = iter(self._sync)
        item = await self._runner.run(self._scope, next, self._it, _END)
        if item is _END:
            raise StopAsyncIteration
        return item

    def __getattr__(self, name: str) -> Any:
        if name == "_sync":
            raise AttributeError(name)
        return getattr(self._sync, name)

    async def aclose(self) -> None:
        """End the stream (its connection is closed)."""
        self._scope.cancel()
        self._sync.close()

    async def run(self) -> "AsyncStream":
        """Read to the end, discarding output; for exit_code."""
        async for _ in self:
            pass
        return self


class AsyncPaddock(_Proxy):
    """A client of one daemon for asyncio: each method of Paddock, awaited
    (create_session, session, sessions, whoami, ...). url, token, ca and
    timeout as for Paddock; max_threads bounds the calls that run at once.
    Use it as ``async with AsyncPaddock() as px`` or call aclose()."""

    def __init__(self, url: Optional[str] = None, token: Optional[str] = None, ca: Optional[str] = None,
                 timeout: float = DEFAULT_TIMEOUT, max_threads: int = DEFAULT_THREADS):
        sync = client.Paddock(url, token, ca, timeout)
        super().__init__(sync, _Runner(max_threads))
        self.url = sync.url

    async def __aenter__(self) -> "AsyncPaddock":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Stop the worker threads once their calls end (cancelled calls
        end at once)."""
        self._runner.pool.shutdown(wait=False)
