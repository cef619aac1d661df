"""Paddock and Session: the SDK's objects over the public HTTP API."""
import base64
import contextvars
import hashlib
import os
import threading
import urllib.parse
from concurrent.futures import ThreadPoolExecutor
from typing import Any, BinaryIO, Callable, Dict, Iterator, List, Optional, Union

from . import models as m
from ._http import SCOPE, SSE, Event, Transport, env
from .errors import Conflict, InvalidArgument, NotFound, PaddockError

CHUNK = 4 << 20  # the largest upload chunk and range read the API takes
MAX_WHOLE_FILE = 8 << 20  # files/content's limit
MAX_COMMAND = 64 << 10
MAX_RUN_TIMEOUT = 3600
DEFAULT_RUN_TIMEOUT = 300
MAX_CANDIDATES = 16
MAX_ROLLOUT_COUNT = 32
OUTPUT_TAIL = 2 << 10
SCORE_PASSED, SCORE_TEST_FAILS, SCORE_FAILED = 100, 10, 0
MAX_RESUMES = 8  # reconnects of one stream or transfer after a dropped connection


def _q(s: str) -> str:
    return urllib.parse.quote(s, safe="")


def _query(**kw: Any) -> str:
    items = {k: ("true" if v is True else "false" if v is False else v) for k, v in kw.items() if v is not None}
    return ("?" + urllib.parse.urlencode(items)) if items else ""


def _if_match(rev: Optional[int]) -> Dict[str, str]:
    return {} if rev is None else {"If-Match": str(rev)}


def _drop_none(d: Dict[str, Any]) -> Dict[str, Any]:
    return {k: v for k, v in d.items() if v is not None}


class ExecResult(dict):
    """exec's answer (the ExecResult schema): a dict with attribute access
    for its fields. tests/test_models.py holds the properties to the
    schema."""

    _schema = "ExecResult"
    _not_offered: Dict[str, str] = {}

    @property
    def exit_code(self) -> int:
        return int(self["exit_code"])

    @property
    def stdout(self) -> str:
        return str(self.get("stdout", ""))

    @property
    def stderr(self) -> str:
        return str(self.get("stderr", ""))

    @property
    def timed_out(self) -> bool:
        return bool(self.get("timed_out"))

    @property
    def duration_ms(self) -> int:
        return int(self.get("duration_ms", 0))

    @property
    def truncated(self) -> bool:
        """stdout or stderr went over its cap and was cut."""
        return bool(self.get("truncated"))

    @property
    def signal(self) -> Optional[str]:
        """The signal that killed the command, if one did."""
        return self.get("signal")


class Output:
    """A piece of a streamed command's output: stream is "stdout" or "stderr"."""

    __slots__ = ("stream", "data")

    def __init__(self, stream: str, data: bytes):
        self.stream = stream
        self.data = data

    @property
    def text(self) -> str:
        return self.data.decode("utf-8", "replace")

    def __repr__(self) -> str:
        return f"Output({self.stream!r}, {self.data!r})"


class JobFollow:
    """Iterates a job's output as Output pieces, from its stream; after a
    dropped connection it reconnects with the last event id (at most
    MAX_RESUMES times). exit_code, state and signal are set at the end."""

    def __init__(self, session: "Session", job: Optional[str], first: Optional[SSE] = None, last_event_id: str = "0:0"):
        self._s = session
        self.job = job
        self._sse = first
        self.last_event_id = last_event_id
        self.exit_code: Optional[int] = None
        self.state: Optional[str] = None
        self.signal: Optional[str] = None
        self.resumes = 0

    def __iter__(self) -> Iterator[Output]:
        while True:
            if self._sse is None:
                if self.job is None:
                    raise Conflict(0, "conflict", "exec stream: dropped before the job was named")
                self._sse = self._s._t.stream(
                    "GET", self._s._p(f"/jobs/{_q(self.job)}/stream"), headers={"Last-Event-ID": self.last_event_id})
            for ev in self._sse:
                if ev.id:
                    self.last_event_id = ev.id
                d = ev.data
                if ev.event == "start":
                    self.job = d.get("job")
                elif ev.event == "output":
                    yield Output("stdout", base64.b64decode(d.get("output_base64", "")))
                elif ev.event == "stderr":
                    yield Output("stderr", str(d.get("stderr", "")).encode())
                elif ev.event == "exit":
                    self.state, self.signal = d.get("state"), d.get("signal")
                    ec = d.get("exit_code")
                    self.exit_code = ec if isinstance(ec, int) and ec >= 0 else 128 + 9
                    self._sse.close()
                    return
                elif ev.event == "error":
                    self._sse.close()
                    if d.get("code") == "stream_max_age":
                        break  # the stream's life ended: reconnect
                    from .errors import error_from
                    raise error_from(0, str(d.get("code", "")), str(d.get("error", "")), d)
            self._sse.close()
            self._sse = None
            self.resumes += 1
            if self.resumes > MAX_RESUMES:
                raise PaddockError(0, "unavailable", f"job stream dropped {self.resumes} times")

    def drop(self) -> None:
        """Cut the connection (as a network failure would); iteration resumes."""
        if self._sse is not None:
            self._sse.drop()

    def close(self) -> None:
        if self._sse is not None:
            self._sse.close()

    def run(self) -> "JobFollow":
        """Read to the end, discarding output; for exit_code."""
        for _ in self:
            pass
        return self


class EventStream:
    """The session's ledger as live events. Iterating yields Events (ledger
    and vm); after a dropped connection, or the stream's hour, it reconnects
    with Last-Event-ID set to the last ledger seq. It ends when the session
    stops running (session_ended)."""

    def __init__(self, session: "Session", last_event_id: Optional[int] = None, since: Optional[str] = None):
        self._s = session
        self.last_event_id = last_event_id
        self._since = since
        self._sse: Optional[SSE] = None
        self.resumes = 0
        self._lock = threading.Lock()
        self._closed = False

    def _open(self) -> SSE:
        h = {} if self.last_event_id is None else {"Last-Event-ID": str(self.last_event_id)}
        since = self._since if self.last_event_id is None else None
        return self._s._t.stream("GET", self._s._p("/events/stream") + _query(since=since), headers=h)

    def __iter__(self) -> Iterator[Event]:
        while not self._closed:
            sse = self._open()
            with self._lock:
                self._sse = sse
            for ev in sse:
                if ev.event == "error":
                    sse.close()
                    if ev.data.get("code") == "stream_max_age":
                        break
                    return
                if ev.event == "ledger" and ev.id:
                    self.last_event_id = int(ev.id)
                yield ev
            sse.close()
            if self._closed:
                return
            self.resumes += 1
            if self.resumes > MAX_RESUMES:
                raise PaddockError(0, "unavailable", f"event stream dropped {self.resumes} times")

    def drop(self) -> None:
        with self._lock:
            if self._sse is not None:
                self._sse.drop()

    def close(self) -> None:
        self._closed = True
        with self._lock:
            if self._sse is not None:
                self._sse.drop()


class Files:
    """Files in a session's sandbox."""

    def __init__(self, session: "Session"):
        self._s = session

    def list(self, path: str) -> m.Listing:
        return self._s._get("/files" + _query(path=path))

    def read(self, path: str) -> bytes:
        out = self._s._get("/files/content" + _query(path=path))
        return base64.b64decode(out["content_base64"])

    def read_text(self, path: str) -> str:
        return self.read(path).decode("utf-8")

    def write(self, path: str, content: Union[bytes, str], mode: Optional[str] = None, parents: bool = True) -> m.FileInfo:
        data = content.encode() if isinstance(content, str) else content
        if len(data) > MAX_WHOLE_FILE:
            raise InvalidArgument(0, "too_large", f"{len(data)} bytes: over {MAX_WHOLE_FILE}, use upload()")
        body = _drop_none({"path": path, "content_base64": base64.b64encode(data).decode(), "mode": mode, "parents": parents})
        return self._s._t.request("PUT", self._s._p("/files/content"), body)

    def delete(self, path: str, recursive: bool = False) -> None:
        self._s._t.request("DELETE", self._s._p("/files") + _query(path=path, recursive=recursive or None))

    def read_range(self, path: str, offset: int = 0, length: int = CHUNK, checksum: bool = False) -> m.FileRange:
        return self._s._get("/files/range" + _query(path=path, offset=offset, length=length, checksum=checksum or None))

    # Resumable uploads.

    def uploads(self) -> List[m.Upload]:
        return self._s._get("/uploads")["uploads"]

    def upload_status(self, upload_id: str) -> m.Upload:
        return self._s._get(f"/uploads/{_q(upload_id)}")

    def abort_upload(self, upload_id: str) -> None:
        self._s._t.request("DELETE", self._s._p(f"/uploads/{_q(upload_id)}"))

    def upload(self, local: Union[str, bytes], path: str, mode: Optional[str] = None, resume: Optional[str] = None,
               chunk_size: int = CHUNK, on_chunk: Optional[Callable[[m.Upload], None]] = None) -> m.Upload:
        """Upload a local file (a path, or bytes) to path in chunks, with its
        sha256 checked by the daemon. resume names an open upload to go on
        with from where the daemon stands (after this or another process was
        cut off). A dropped connection is retried from the daemon's received
        offset, at most MAX_RESUMES times. on_chunk sees the upload after
        each chunk (an exception from it stops the upload, resumable)."""
        if not 1 <= chunk_size <= CHUNK:
            raise InvalidArgument(0, "invalid_argument", f"chunk_size {chunk_size}: give 1 to {CHUNK}")
        if isinstance(local, bytes):
            size, digest = len(local), hashlib.sha256(local).hexdigest()
        else:
            size, h = 0, hashlib.sha256()
            with open(local, "rb") as f:
                for block in iter(lambda: f.read(1 << 20), b""):
                    h.update(block)
                    size += len(block)
            digest = h.hexdigest()
        if resume:
            up = self.upload_status(resume)
            if up["size"] != size or (up.get("sha256") and up["sha256"].lower() != digest):
                raise Conflict(0, "conflict", f"upload {resume} is of another file ({up['size']} bytes)")
        else:
            up = self._s._t.request("POST", self._s._p("/uploads"), _drop_none({"path": path, "size": size, "sha256": digest, "mode": mode}))
        uid = up["id"]
        retries = 0
        src: Optional[BinaryIO] = None if isinstance(local, bytes) else open(local, "rb")
        try:
            while up["state"] != "complete" and up["received"] < size:
                off = int(up["received"])
                if src is None:
                    piece = local[off:off + chunk_size]  # type: ignore[index]
                else:
                    src.seek(off)
                    piece = src.read(chunk_size)
                try:
                    up = self._s._t.request("PUT", self._s._p(f"/uploads/{_q(uid)}") + _query(offset=off), raw=piece,
                                            content_type="application/octet-stream")
                except (OSError, Conflict) as e:
                    # The connection dropped, or the daemon stands elsewhere
                    # (a chunk that arrived without its answer): ask where.
                    retries += 1
                    if retries > MAX_RESUMES:
                        raise
                    if isinstance(e, Conflict) and "offset" not in e.message:
                        raise
                    up = self.upload_status(uid)
                    continue
                if on_chunk is not None:
                    on_chunk(up)
        finally:
            if src is not None:
                src.close()
        return self._s._t.request("POST", self._s._p(f"/uploads/{_q(uid)}/complete"))

    def download(self, path: str, local: str, resume: bool = True) -> Dict[str, Any]:
        """Download path to the local file in ranged reads, checking the
        whole file's sha256 at the end. With resume, a local file already
        there is taken as the start of the download (after an interrupted
        one) and only the rest is read. A dropped connection is retried
        from where the local file stands, at most MAX_RESUMES times.
        Answers {"size", "sha256", "resumed_at"}."""
        start = os.path.getsize(local) if resume and os.path.exists(local) else 0
        retries = 0
        with open(local, "ab" if start else "wb") as out:
            off = start
            while True:
                try:
                    r = self.read_range(path, off, CHUNK, checksum=True)
                except OSError:
                    retries += 1
                    if retries > MAX_RESUMES:
                        raise
                    continue
                data = base64.b64decode(r["data_base64"])
                out.write(data)
                off += len(data)
                if r["eof"] or not data:
                    break
        h = hashlib.sha256()
        with open(local, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
        got = h.hexdigest()
        if r.get("sha256") and r["sha256"] != got:
            raise Conflict(0, "conflict", f"download of {path}: sha256 {got} is not the file's {r['sha256']} (it changed, or the local start was not its start)")
        return {"size": off, "sha256": got, "resumed_at": start}


class Jobs:
    """Supervised background jobs in a session's sandbox."""

    def __init__(self, session: "Session"):
        self._s = session

    def start(self, command: str, stdin: bool = False, timeout: Optional[int] = None, max_output_bytes: Optional[int] = None,
              approval_id: Optional[str] = None, approval_wait_seconds: Optional[int] = None) -> Dict[str, Any]:
        body = _drop_none({"command": command, "stdin": stdin or None, "timeout_seconds": timeout, "max_output_bytes": max_output_bytes,
                           "approval_id": approval_id, "approval_wait_seconds": approval_wait_seconds})
        return self._s._t.request("POST", self._s._p("/jobs"), body)

    def list(self) -> List[m.Job]:
        return self._s._get("/jobs")["jobs"]

    def read(self, job: str, offset: int = 0, stderr_offset: int = 0, wait_ms: Optional[int] = None) -> m.JobRead:
        """Output from the offsets; wait_ms waits (long poll) for more."""
        return self._s._get(f"/jobs/{_q(job)}" + _query(offset=offset, stderr_offset=stderr_offset, wait_ms=wait_ms))

    def write(self, job: str, data: Union[str, bytes], close: bool = False) -> m.Job:
        body: Dict[str, Any] = {"text": data} if isinstance(data, str) else {"data_base64": base64.b64encode(data).decode()}
        if close:
            body["close"] = True
        return self._s._t.request("POST", self._s._p(f"/jobs/{_q(job)}/stdin"), body)

    def close_stdin(self, job: str) -> m.Job:
        return self._s._t.request("POST", self._s._p(f"/jobs/{_q(job)}/stdin"), {"close": True})

    def kill(self, job: str, signal: str = "TERM") -> m.Job:
        return self._s._t.request("DELETE", self._s._p(f"/jobs/{_q(job)}") + _query(signal=signal))

    def follow(self, job: str, last_event_id: str = "0:0") -> JobFollow:
        return JobFollow(self._s, job, None, last_event_id)


class Git:
    def __init__(self, session: "Session"):
        self._s = session

    def status(self) -> m.GitResult:
        return self._s._get("/git/status")

    def diff(self, path: Optional[str] = None, staged: bool = False) -> m.GitResult:
        return self._s._get("/git/diff" + _query(path=path, staged=staged or None))

    def log(self) -> m.GitResult:
        return self._s._get("/git/log")

    def commit(self, **body: Any) -> m.GitResult:
        return self._s._t.request("POST", self._s._p("/git/commit"), body)

    def branch(self, **body: Any) -> m.GitResult:
        return self._s._t.request("POST", self._s._p("/git/branch"), body)


def _tail(s: str) -> str:
    b = s.encode()
    if len(b) <= OUTPUT_TAIL:
        return s
    return b[-OUTPUT_TAIL:].decode("utf-8", "ignore")


def _check_command(what: str, cmd: str) -> None:
    if not cmd:
        raise InvalidArgument(0, "invalid_argument", f"{what} is empty")
    if len(cmd.encode()) > MAX_COMMAND:
        raise InvalidArgument(0, "invalid_argument", f"{what} is over {MAX_COMMAND} bytes")


def _run_timeout(t: Optional[int]) -> int:
    if t is None or t == 0:
        return DEFAULT_RUN_TIMEOUT
    if not 1 <= t <= MAX_RUN_TIMEOUT:
        raise InvalidArgument(0, "invalid_argument", f"timeout {t}s: give 1 to {MAX_RUN_TIMEOUT}")
    return t


_IN_INFO = "in .info, the record as of the last answer (refresh() reads it again)"


class Session:
    """A session of the agents API. Use it as a context manager to delete it
    on exit: ``with px.create_session() as s: s.exec("make test")``."""

    _schema = "Session"
    _not_offered = {f: _IN_INFO for f in ("agent", "state", "backend", "sandbox_id", "capabilities", "policy", "runtime",
                                          "workspace", "checkpoints", "children", "usage", "created_at", "expires_at")}
    id: str
    info: m.Session

    def __init__(self, client: "Paddock", info: Dict[str, Any]):
        self._c = client
        self._t = client._t
        self.info = info
        self.id = info["id"]
        self.files = Files(self)
        self.jobs = Jobs(self)
        self.git = Git(self)

    def __repr__(self) -> str:
        return f"Session({self.id!r})"

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.delete()

    def _p(self, rest: str = "") -> str:
        return "/v1/agents/sessions/" + _q(self.id) + rest

    def _get(self, rest: str) -> Any:
        return self._t.request("GET", self._p(rest))

    @property
    def revision(self) -> int:
        return int(self.info.get("revision", 0))

    def refresh(self) -> m.Session:
        self.info = self._get("")
        return self.info

    def delete(self, revision: Optional[int] = None) -> None:
        self._t.request("DELETE", self._p(), headers=_if_match(revision))

    # Commands.

    def exec(self, command: str, timeout: Optional[int] = None, approval_id: Optional[str] = None,
             approval_wait_seconds: Optional[int] = None, idempotency_key: Optional[str] = None) -> ExecResult:
        """Run a shell line and wait for it. A non-zero exit is a result, not
        an error; a refusal raises (PolicyDenied, BudgetExceeded,
        ApprovalRequired, ...)."""
        body = _drop_none({"command": command, "timeout_seconds": timeout, "approval_id": approval_id,
                           "approval_wait_seconds": approval_wait_seconds})
        h = {"Idempotency-Key": idempotency_key} if idempotency_key else {}
        return ExecResult(self._t.request("POST", self._p("/exec"), body, headers=h))

    def exec_stream(self, command: str, timeout: Optional[int] = None, approval_id: Optional[str] = None) -> JobFollow:
        """Run a command as a job and iterate its output as it comes
        (Output pieces); exit_code is set once iterated to the end. A dropped
        connection resumes through the job's own stream."""
        body = _drop_none({"command": command, "timeout_seconds": timeout, "approval_id": approval_id})
        sse = self._t.stream("POST", self._p("/exec/stream"), body)
        return JobFollow(self, None, sse)

    def probe(self) -> m.Probe:
        return self._get("/probe")

    # Lifecycle.

    def checkpoint(self, tag: Optional[str] = None, memory: Optional[bool] = None, revision: Optional[int] = None) -> m.Checkpoint:
        return self._t.request("POST", self._p("/checkpoint"), _drop_none({"tag": tag, "memory": memory}), headers=_if_match(revision))

    def restore(self, tag: str, revision: Optional[int] = None) -> m.Session:
        self.info = self._t.request("POST", self._p("/restore"), {"tag": tag}, headers=_if_match(revision))
        return self.info

    def fork(self, count: int = 1, identity: Optional[str] = None, from_tag: Optional[str] = None,
             revision: Optional[int] = None) -> List["Session"]:
        """Fork into count children (Session objects; use each as a context
        manager, or delete them)."""
        out = self._t.request("POST", self._p("/fork"), _drop_none({"count": count, "identity": identity, "from": from_tag}),
                              headers=_if_match(revision))
        return [Session(self._c, ch) for ch in out.get("children") or []]

    def promote(self, dry_run: bool = False, plan_id: Optional[str] = None, skip_conflicts: bool = False,
                paths: Optional[List[str]] = None) -> m.PromoteResult:
        """Carry this fork child's workspace changes back to its parent."""
        body = _drop_none({"dry_run": dry_run or None, "plan_id": plan_id, "skip_conflicts": skip_conflicts or None, "paths": paths})
        return self._t.request("POST", self._p("/promote"), body)

    def evaluate(self, candidates: List[str], test: Optional[str] = None, keep_all: bool = False,
                 timeout: Optional[int] = None) -> Dict[str, Any]:
        """Fork one child per candidate, run each candidate and then (when it
        exited 0) the test, in parallel; score them and name the winner, as
        the Go SDK's Evaluate does (the same scores, order and cleanup)."""
        n = len(candidates)
        if not 1 <= n <= MAX_CANDIDATES:
            raise InvalidArgument(0, "invalid_argument", f"{n} candidates: give 1 to {MAX_CANDIDATES}")
        for i, cand in enumerate(candidates):
            _check_command(f"candidate {i}", cand)
        if test:
            _check_command("the test", test)
        secs = _run_timeout(timeout)
        kids = self.fork(n)
        results = [{"index": i, "command": candidates[i], "session": k.id, "score": SCORE_FAILED, "exit_code": None,
                    "timed_out": False, "duration_ms": 0, "stdout_tail": "", "stderr_tail": "", "deleted": False}
                   for i, k in enumerate(kids)]

        def run(i: int) -> None:
            r, k = results[i], kids[i]
            try:
                out = k.exec(r["command"], timeout=secs)
            except PaddockError as e:
                r["error"] = f"candidate refused: {e}"
                return
            r.update(exit_code=out.exit_code, timed_out=out.timed_out, duration_ms=out.duration_ms,
                     stdout_tail=_tail(out.stdout), stderr_tail=_tail(out.stderr))
            if out.exit_code != 0 or out.timed_out:
                return
            if not test:
                r["score"] = SCORE_PASSED
                return
            r["score"] = SCORE_TEST_FAILS
            try:
                tr = k.exec(test, timeout=secs)
            except PaddockError as e:
                r["error"] = f"test refused: {e}"
                return
            r.update(test_exit_code=tr.exit_code, duration_ms=r["duration_ms"] + tr.duration_ms, timed_out=tr.timed_out,
                     stdout_tail=_tail(tr.stdout), stderr_tail=_tail(tr.stderr))
            if tr.exit_code == 0 and not tr.timed_out:
                r["score"] = SCORE_PASSED

        self._c._parallel(kids, run)
        order = sorted(range(len(results)), key=lambda i: (-results[i]["score"], results[i]["duration_ms"], i))
        winner = order[0] if order and results[order[0]]["score"] == SCORE_PASSED else -1
        if not keep_all:
            self._c._delete_each([i for i in range(len(kids)) if i != winner], kids, results)
        res: Dict[str, Any] = {"parent": self.id, "results": results, "winner": winner}
        if winner >= 0:
            res["winner_session"] = results[winner]["session"]
        return res

    def rollout(self, count: int, command: str, keep: bool = False, timeout: Optional[int] = None) -> Dict[str, Any]:
        """Fork count children, run command in each in parallel, and delete
        them afterwards unless keep (as the Go SDK's Rollout)."""
        if not 1 <= count <= MAX_ROLLOUT_COUNT:
            raise InvalidArgument(0, "invalid_argument", f"count {count}: give 1 to {MAX_ROLLOUT_COUNT}")
        _check_command("the command", command)
        secs = _run_timeout(timeout)
        kids = self.fork(count)
        runs = [{"index": i, "session": k.id, "exit_code": None, "timed_out": False, "duration_ms": 0,
                 "stdout_tail": "", "stderr_tail": "", "deleted": False} for i, k in enumerate(kids)]

        def run(i: int) -> None:
            try:
                out = kids[i].exec(command, timeout=secs)
            except PaddockError as e:
                runs[i]["error"] = f"command refused: {e}"
                return
            runs[i].update(exit_code=out.exit_code, timed_out=out.timed_out, duration_ms=out.duration_ms,
                           stdout_tail=_tail(out.stdout), stderr_tail=_tail(out.stderr))

        self._c._parallel(kids, run)
        if not keep:
            self._c._delete_each(list(range(len(kids))), kids, runs)
        return {"parent": self.id, "command": command, "runs": runs}

    # Rewind, replay, speculate and changesets.

    def rewind(self) -> m.Rewind:
        return self._get("/rewind")

    def rewind_config(self, **body: Any) -> m.Rewind:
        return self._t.request("POST", self._p("/rewind/config"), body)

    def rewind_undo(self, **body: Any) -> m.RewindUndo:
        return self._t.request("POST", self._p("/rewind/undo"), body)

    def rewind_pin(self, tag: str, pinned: bool = True) -> m.RewindPoint:
        return self._t.request("POST", self._p("/rewind/pin"), {"tag": tag, "pinned": pinned})

    def rewind_bisect(self, **body: Any) -> m.RewindBisect:
        return self._t.request("POST", self._p("/rewind/bisect"), body)

    def rewind_branch(self, **body: Any) -> m.RewindBranch:
        return self._t.request("POST", self._p("/rewind/branch"), body)

    def replay(self, target: Optional[str] = None, dry_run: bool = False, **rest: Any) -> m.ReplayResult:
        return self._t.request("POST", self._p("/replay"), _drop_none({"target": target, "dry_run": dry_run or None, **rest}))

    def speculate(self, command: str, paths: List[str], **rest: Any) -> m.Changeset:
        return self._t.request("POST", self._p("/speculate"), {"command": command, "paths": paths, **rest})

    def changesets(self) -> List[m.Changeset]:
        return self._get("/changesets")["changesets"]

    def changeset(self, cid: str) -> m.Changeset:
        return self._get(f"/changesets/{_q(cid)}")

    def decide_changeset(self, cid: str, decision: str, reason: Optional[str] = None) -> m.Changeset:
        return self._t.request("POST", self._p(f"/changesets/{_q(cid)}/decide"), _drop_none({"decision": decision, "reason": reason}))

    def apply_changeset(self, cid: str) -> m.ApplyResult:
        return self._t.request("POST", self._p(f"/changesets/{_q(cid)}/apply"))

    # Previews, tokens, approvals, grants.

    def create_preview(self, port: int, ttl_seconds: Optional[int] = None) -> m.Preview:
        return self._t.request("POST", self._p("/preview"), _drop_none({"port": port, "ttl_seconds": ttl_seconds}))

    def previews(self) -> List[m.Preview]:
        return self._get("/previews")["previews"]

    def delete_preview(self, preview: str) -> None:
        self._t.request("DELETE", self._p(f"/preview/{_q(preview)}"))

    def mint_token(self, ops: List[str], ttl_seconds: Optional[int] = None, label: Optional[str] = None) -> m.SessionToken:
        return self._t.request("POST", self._p("/tokens"), _drop_none({"ops": ops, "ttl_seconds": ttl_seconds, "label": label}))

    def tokens(self) -> List[m.SessionToken]:
        return self._get("/tokens")["tokens"]

    def revoke_token(self, token_id: str) -> None:
        self._t.request("DELETE", self._p(f"/tokens/{_q(token_id)}"))

    def approvals(self) -> List[m.Approval]:
        return self._get("/approvals")["approvals"]

    def approve(self, approval_id: str, note: Optional[str] = None) -> m.Approval:
        return self._t.request("POST", self._p(f"/approvals/{_q(approval_id)}/approve"), _drop_none({"note": note}))

    def deny(self, approval_id: str, note: Optional[str] = None) -> m.Approval:
        return self._t.request("POST", self._p(f"/approvals/{_q(approval_id)}/deny"), _drop_none({"note": note}))

    def grants(self) -> List[m.Grant]:
        return self._get("/grants")["grants"]

    def create_grant(self, **body: Any) -> m.Grant:
        return self._t.request("POST", self._p("/grants"), body)

    def delete_grant(self, grant: str) -> None:
        self._t.request("DELETE", self._p(f"/grants/{_q(grant)}"))

    def delete_grants(self) -> None:
        """Revoke every grant of the session."""
        self._t.request("DELETE", self._p("/grants"))

    def pty_ticket(self, **body: Any) -> m.TerminalTicket:
        """A single-use ticket that opens one terminal (GET .../pty, a
        WebSocket, which this SDK does not open: see COVERAGE)."""
        return self._t.request("POST", self._p("/pty-ticket"), body or None)

    # History.

    def events(self, since: Optional[str] = None) -> m.Events:
        return self._get("/events" + _query(since=since))

    def stream_events(self, last_event_id: Optional[int] = None, since: Optional[str] = None) -> EventStream:
        return EventStream(self, last_event_id, since)

    def artifacts(self) -> m.Artifacts:
        return self._get("/artifacts")

    def trajectory(self) -> m.Trajectory:
        return self._get("/trajectory")


class Sandbox:
    """The lower API: a sandbox with commands, files and a TTL."""

    _schema = "Sandbox"
    _not_offered = {f: _IN_INFO for f in ("backend", "created_at", "expires_at", "image", "offline", "status",
                                          "ttl_seconds", "workdir")}
    id: str
    info: m.Sandbox

    def __init__(self, client: "Paddock", info: Dict[str, Any]):
        self._t = client._t
        self.info = info
        self.id = info["id"]

    def __enter__(self) -> "Sandbox":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.delete()

    def _p(self, rest: str = "") -> str:
        return "/v1/sandboxes/" + _q(self.id) + rest

    def refresh(self) -> m.Sandbox:
        self.info = self._t.request("GET", self._p())
        return self.info

    def delete(self) -> None:
        self._t.request("DELETE", self._p())

    def process(self, command: str, timeout: Optional[int] = None, cwd: Optional[str] = None,
                env: Optional[Dict[str, str]] = None) -> m.ProcessResult:
        return self._t.request("POST", self._p("/process"), _drop_none({"command": command, "timeout_seconds": timeout, "cwd": cwd, "env": env}))

    def read_file(self, path: str) -> bytes:
        out = self._t.request("POST", self._p("/fs/read"), {"path": path})
        return base64.b64decode(out["content_base64"])

    def write_file(self, path: str, content: Union[str, bytes], mode: Optional[str] = None) -> m.SandboxWritten:
        text = content.decode() if isinstance(content, bytes) else content
        return self._t.request("POST", self._p("/fs/write"), _drop_none({"path": path, "content": text, "mode": mode}))

    def speculate(self, command: str, paths: List[str], **rest: Any) -> m.Changeset:
        return self._t.request("POST", self._p("/speculate"), {"command": command, "paths": paths, **rest})

    def changesets(self) -> List[m.Changeset]:
        return self._t.request("GET", self._p("/changesets"))["changesets"]

    def changeset(self, cid: str) -> m.Changeset:
        return self._t.request("GET", self._p(f"/changesets/{_q(cid)}"))

    def decide_changeset(self, cid: str, decision: str, reason: Optional[str] = None) -> m.Changeset:
        return self._t.request("POST", self._p(f"/changesets/{_q(cid)}/decide"), _drop_none({"decision": decision, "reason": reason}))

    def apply_changeset(self, cid: str) -> m.ApplyResult:
        return self._t.request("POST", self._p(f"/changesets/{_q(cid)}/apply"))


class Paddock:
    """A client of one Paddock daemon. url, token and ca default to
    PADDOCK_URL, PADDOCK_TOKEN and PADDOCK_CA, as for the CLI; ca is a PEM
    file of extra roots to trust (the daemon gateway's internal CA)."""

    def __init__(self, url: Optional[str] = None, token: Optional[str] = None, ca: Optional[str] = None,
                 timeout: float = 2 * 3600.0):
        url = url or env("PADDOCK_URL") or "https://127.0.0.1:7788"
        token = token if token is not None else (env("PADDOCK_TOKEN") or "")
        ca = ca or env("PADDOCK_CA")
        self._t = Transport(url, token, ca, timeout)
        self.url = self._t.url

    def create_session(self, idempotency_key: Optional[str] = None, **request: Any) -> Session:
        """Create a session (request: the CreateRequest fields, such as
        agent, ttl_seconds, workspace, runtime, policy, budget)."""
        h = {"Idempotency-Key": idempotency_key} if idempotency_key else {}
        return Session(self, self._t.request("POST", "/v1/agents/sessions", request, headers=h))

    def session(self, session_id: str) -> Session:
        return Session(self, self._t.request("GET", "/v1/agents/sessions/" + _q(session_id)))

    def sessions(self, include_deleted: bool = False) -> List[Session]:
        out = self._t.request("GET", "/v1/agents/sessions" + _query(include_deleted=include_deleted or None))
        return [Session(self, s) for s in out.get("sessions") or []]

    def create_sandbox(self, **request: Any) -> Sandbox:
        return Sandbox(self, self._t.request("POST", "/v1/sandboxes", request))

    def sandbox(self, sandbox_id: str) -> Sandbox:
        return Sandbox(self, self._t.request("GET", "/v1/sandboxes/" + _q(sandbox_id)))

    def sandboxes(self) -> List[Sandbox]:
        return [Sandbox(self, s) for s in self._t.request("GET", "/v1/sandboxes").get("sandboxes") or []]

    def whoami(self) -> m.WhoAmI:
        return self._t.request("GET", "/v1/whoami")

    def backends(self) -> m.BackendList:
        return self._t.request("GET", "/v1/backends")

    def admin_policy(self) -> m.PolicyStatus:
        """The policy modules in force (admin only)."""
        return self._t.request("GET", "/v1/admin/policy")

    def compile_policy(self, policy: Optional[Dict[str, Any]] = None, backend: Optional[str] = None) -> m.PolicyCompile:
        """What a create with policy would record, and every reason it would
        be refused, creating nothing. A refusal is in the answer (ok False),
        not an exception."""
        return self._t.request("POST", "/v1/policy/compile", _drop_none({"policy": policy, "backend": backend}))

    def tenants(self) -> m.TenantList:
        """The tenants in force, their limits and session counts (admin only)."""
        return self._t.request("GET", "/v1/admin/tenants")

    def health(self) -> m.Health:
        return self._t.request("GET", "/healthz")

    def _parallel(self, kids: List[Session], run: Callable[[int], None]) -> None:
        """Run run(i) for every child in parallel; when one stops with an
        error that is not the daemon's refusal, delete every child and raise.
        Each worker runs in a copy of the caller's context, so a cancel of
        the asyncio variant reaches its requests; the cleanup's deletes run
        outside it, so a cancelled evaluate or rollout still deletes its
        children (in its worker thread, after the await has ended)."""
        with ThreadPoolExecutor(max_workers=max(1, len(kids))) as pool:
            futs = [pool.submit(contextvars.copy_context().run, run, i) for i in range(len(kids))]
            errs = [f.exception() for f in futs]
        bad = [e for e in errs if e is not None]
        if bad:
            tok = SCOPE.set(None)
            try:
                for k in kids:
                    try:
                        k.delete()
                    except Exception:
                        pass
            finally:
                SCOPE.reset(tok)
            raise PaddockError(0, "internal", f"stopped, its children deleted: {bad[0]}") from bad[0]

    def _delete_each(self, idx: List[int], kids: List[Session], rows: List[Dict[str, Any]]) -> None:
        def one(i: int) -> None:
            try:
                kids[i].delete()
                rows[i]["deleted"] = True
            except Exception as e:  # recorded, not raised: the run itself is done
                rows[i]["delete_error"] = str(e)

        with ThreadPoolExecutor(max_workers=max(1, len(idx))) as pool:
            list(pool.map(lambda i: contextvars.copy_context().run(one, i), idx))
