"""The transport: one HTTPS (or HTTP) request per call with http.client,
JSON in and out, errors turned into PaddockError classes, and a reader of
Server-Sent Events."""
import contextvars
import http.client
import json
import os
import socket
import ssl
import threading
import urllib.parse
from typing import Any, Dict, Iterator, List, Mapping, Optional, Tuple

from .errors import PaddockError, error_from

# Bounds on what the SDK reads from the daemon.
MAX_BODY = 64 << 20  # a JSON answer
MAX_ERROR_BODY = 1 << 20  # an error answer
MAX_SSE_LINE = 32 << 20  # one line of an event stream
DEFAULT_TIMEOUT = 2 * 3600.0  # seconds a request may take in all


class Cancelled(Exception):
    """A call whose CancelScope was cancelled (the asyncio variant's
    cancellation); it never reaches a caller that awaits."""


class CancelScope:
    """The connections one call opens, so that another thread can end the
    call at once: cancel() shuts every open socket of the call down (a
    blocked read returns) and makes any later connection attempt of the
    call raise Cancelled. The asyncio variant sets one per awaited call; the
    blocking API has none."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._socks: List[socket.socket] = []
        self.cancelled = False

    def add(self, sock: socket.socket) -> None:
        """Note a connected socket of the call; Cancelled if the call is."""
        with self._lock:
            if self.cancelled:
                raise Cancelled("paddock: call cancelled")
            self._socks = [x for x in self._socks if x.fileno() != -1]
            self._socks.append(sock)

    def cancel(self) -> None:
        with self._lock:
            self.cancelled = True
            socks, self._socks = self._socks, []
        for sock in socks:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


# The scope of the call running in this context (None: not cancellable).
SCOPE: "contextvars.ContextVar[Optional[CancelScope]]" = contextvars.ContextVar("paddock_scope", default=None)


class Transport:
    def __init__(self, url: str, token: str, ca: Optional[str] = None, timeout: float = DEFAULT_TIMEOUT):
        u = urllib.parse.urlsplit(url.rstrip("/"))
        if u.scheme not in ("http", "https") or not u.hostname:
            raise ValueError(f"paddock: url {url!r} is not http(s)://host[:port]")
        self.url = url.rstrip("/")
        self.scheme = u.scheme
        self.host = u.hostname
        self.port = u.port or (443 if u.scheme == "https" else 80)
        self.prefix = u.path
        self.token = token
        self.timeout = timeout
        self.ssl_context: Optional[ssl.SSLContext] = None
        if u.scheme == "https":
            ctx = ssl.create_default_context()
            if ca:
                ctx.load_verify_locations(cafile=ca)
            self.ssl_context = ctx

    def connect(self, timeout: Optional[float] = None) -> http.client.HTTPConnection:
        t = self.timeout if timeout is None else timeout
        if self.scheme == "https":
            return http.client.HTTPSConnection(self.host, self.port, timeout=t, context=self.ssl_context)
        return http.client.HTTPConnection(self.host, self.port, timeout=t)

    def _send(self, method: str, path: str, body: Optional[bytes], headers: Mapping[str, str],
              timeout: Optional[float] = None) -> Tuple[http.client.HTTPConnection, http.client.HTTPResponse, Any]:
        """Send a request; the connection, its answer and the connection's
        socket (kept here: http.client lets go of it when the answer ends
        with the connection, as an event stream's may)."""
        h = {"Authorization": "Bearer " + self.token}
        h.update(headers)
        conn = self.connect(timeout)
        scope = SCOPE.get()
        try:
            conn.connect()
            sock = conn.sock
            if scope is not None:
                scope.add(sock)  # from here on a cancel shuts it down
            conn.request(method, self.prefix + path, body=body, headers=h)
            resp = conn.getresponse()
        except BaseException:
            conn.close()
            raise
        return conn, resp, sock

    def request(self, method: str, path: str, body: Any = None, headers: Optional[Mapping[str, str]] = None,
                raw: Optional[bytes] = None, content_type: str = "application/json") -> Any:
        """Send one request; the decoded JSON answer (None for an empty one)."""
        h: Dict[str, str] = dict(headers or {})
        data: Optional[bytes] = raw
        if body is not None:
            data = json.dumps(body).encode()
        if data is not None:
            h["Content-Type"] = content_type
        conn, resp, _ = self._send(method, path, data, h)
        try:
            if resp.status // 100 != 2:
                raise decode_error(resp.status, resp.read(MAX_ERROR_BODY))
            out = resp.read(MAX_BODY + 1)
            if len(out) > MAX_BODY:
                raise PaddockError(resp.status, "too_large", f"answer over {MAX_BODY} bytes")
            if not out:
                return None
            return json.loads(out)
        finally:
            conn.close()

    def stream(self, method: str, path: str, body: Any = None, headers: Optional[Mapping[str, str]] = None) -> "SSE":
        """Open a Server-Sent Events stream; the API's error unless it is 200."""
        h: Dict[str, str] = {"Accept": "text/event-stream"}
        h.update(headers or {})
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            h["Content-Type"] = "application/json"
        conn, resp, sock = self._send(method, path, data, h)
        if resp.status != 200:
            try:
                raise decode_error(resp.status, resp.read(MAX_ERROR_BODY))
            finally:
                conn.close()
                resp.close()
        return SSE(conn, resp, sock)


def decode_error(status: int, data: bytes) -> PaddockError:
    """The error of an answer: its code and message, or the text itself when
    it is not an error body (a proxy's own page)."""
    body: Dict[str, Any] = {}
    try:
        parsed = json.loads(data)
        if isinstance(parsed, dict):
            body = parsed
    except ValueError:
        pass
    msg = str(body.get("error") or data.decode("utf-8", "replace").strip())
    return error_from(status, str(body.get("code") or ""), msg, body)


class Event:
    """One Server-Sent Event: its id (None when it had none), name and data."""

    __slots__ = ("id", "event", "data")

    def __init__(self, id: Optional[str], event: str, data: Dict[str, Any]):
        self.id = id
        self.event = event
        self.data = data

    def __repr__(self) -> str:
        return f"Event(id={self.id!r}, event={self.event!r}, data={self.data!r})"


def parse_sse(lines: Iterator[bytes]) -> Iterator[Event]:
    """Events from the lines of a stream (each with its line ending)."""
    ev_id: Optional[str] = None
    name = "message"
    data: list = []
    for raw in lines:
        line = raw.decode("utf-8", "replace").rstrip("\r\n")
        if line == "":
            if data:
                text = "\n".join(data)
                try:
                    parsed = json.loads(text)
                except ValueError:
                    parsed = {"text": text}
                yield Event(ev_id, name, parsed if isinstance(parsed, dict) else {"value": parsed})
            ev_id, name, data = None, "message", []
            continue
        if line.startswith(":"):
            continue
        field, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if field == "id":
            ev_id = value
        elif field == "event":
            name = value
        elif field == "data":
            data.append(value)


class SSE:
    """An open event stream. Iterate it for Events; close() ends it, and
    drop() cuts the connection as a network failure would."""

    def __init__(self, conn: http.client.HTTPConnection, resp: http.client.HTTPResponse, sock: Any = None):
        self.conn = conn
        self.resp = resp
        self.sock = sock if sock is not None else conn.sock

    def _lines(self) -> Iterator[bytes]:
        while True:
            try:
                line = self.resp.readline(MAX_SSE_LINE + 1)
            except (OSError, http.client.HTTPException, ValueError, AttributeError):
                return  # dropped: the caller resumes
            if not line:
                return
            if len(line) > MAX_SSE_LINE:
                raise PaddockError(0, "too_large", f"event stream line over {MAX_SSE_LINE} bytes")
            yield line

    def __iter__(self) -> Iterator[Event]:
        return parse_sse(self._lines())

    def drop(self) -> None:
        sock = self.sock
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def close(self) -> None:
        self.conn.close()
        self.resp.close()


def env(name: str) -> Optional[str]:
    v = os.environ.get(name)
    return v if v else None
