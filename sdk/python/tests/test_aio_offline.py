"""The asyncio variant against small local servers: a cancelled call ends
its worker thread at once, a session as an async context manager is
deleted on exit, refusals raise the same classes, and an event stream
iterated with async for resumes with Last-Event-ID. No daemon needed."""
import asyncio
import http.server
import json
import socket
import threading
import time
import unittest

import paddock
from paddock.aio import AsyncPaddock


class FakeDaemon:
    """A local HTTP server: POST .../exec on a session named "hold" reads
    the request and never answers (it notes when the client closes);
    other routes answer as a daemon would."""

    def __init__(self):
        self.seen = []
        self.closed = threading.Event()
        this = self

        class H(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def _answer(self, status, body, ctype="application/json"):
                data = body if isinstance(body, bytes) else json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _body(self):
                n = int(self.headers.get("Content-Length") or 0)
                return json.loads(self.rfile.read(n)) if n else None

            def do_POST(self):
                body = self._body()
                this.seen.append(("POST", self.path, body))
                if self.path == "/v1/agents/sessions":
                    self._answer(201, {"id": "ses-1", "revision": 1})
                elif self.path == "/v1/agents/sessions/hold/exec":
                    # Hold the answer until the client goes away.
                    self.connection.settimeout(30)
                    try:
                        while self.connection.recv(1):
                            pass
                    except OSError:
                        pass
                    this.closed.set()
                    self.close_connection = True
                elif body and body.get("command") == "rm -rf /":
                    self._answer(428, {"error": "held", "code": "approval_required", "approval_id": "apr-0123456789abcdef"})
                else:
                    self._answer(200, {"exit_code": 0, "stdout": "hi\n", "stderr": "", "timed_out": False,
                                       "truncated": False, "duration_ms": 3})

            def do_DELETE(self):
                this.seen.append(("DELETE", self.path, None))
                self.send_response(204)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def do_GET(self):
                this.seen.append(("GET", self.path, self.headers.get("Last-Event-ID")))
                if self.path == "/healthz":
                    self._answer(200, {"status": "ok"})
                    return
                if self.path == "/v1/agents/sessions/hold/jobs/job-1/stream":
                    # One piece of output, then nothing until the client goes.
                    self.send_response(200)
                    self.send_header("Content-Type", "text/event-stream")
                    self.send_header("Connection", "close")
                    self.end_headers()
                    self.wfile.write(b'id: 1:0\nevent: output\ndata: {"output_base64": "aGkK"}\n\n')
                    self.wfile.flush()
                    self.connection.settimeout(30)
                    try:
                        while self.connection.recv(1):
                            pass
                    except OSError:
                        pass
                    this.closed.set()
                    self.close_connection = True
                    return
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Connection", "close")
                self.end_headers()
                if sum(1 for s in this.seen if s[1].endswith("/events/stream")) == 1:
                    self.wfile.write(b'id: 1\nevent: ledger\ndata: {"seq": 1}\n\nid: 2\nevent: ledger\ndata: {"seq": 2}\n\n')
                else:
                    self.wfile.write(b'id: 3\nevent: ledger\ndata: {"seq": 3}\n\n'
                                     b'event: error\ndata: {"error": "ended", "code": "session_ended"}\n\n')
                self.wfile.flush()
                self.close_connection = True

        self.srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.srv.daemon_threads = True
        threading.Thread(target=self.srv.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.srv.server_port}"

    def stop(self):
        self.srv.shutdown()
        self.srv.server_close()


class AsyncOfflineTest(unittest.TestCase):
    def setUp(self):
        self.d = FakeDaemon()
        self.addCleanup(self.d.stop)

    def test_cancel_ends_the_worker_thread(self):
        async def main():
            # One worker thread: a call left blocked would hold it, and the
            # health check after the cancel would never run.
            async with AsyncPaddock(self.d.url, "tok", max_threads=1) as px:
                from paddock import client
                from paddock.aio import AsyncSession
                hold = AsyncSession(client.Session(px._sync, {"id": "hold"}), px._runner)
                t0 = time.monotonic()
                with self.assertRaises(asyncio.TimeoutError):
                    await asyncio.wait_for(hold.exec("sleep 100"), 0.3)
                self.assertTrue(await asyncio.get_running_loop().run_in_executor(None, self.d.closed.wait, 5),
                                "the held connection was not closed after the cancel")
                h = await asyncio.wait_for(px.health(), 5)
                self.assertEqual(h, {"status": "ok"})
                self.assertLess(time.monotonic() - t0, 5)

        asyncio.run(main())

    def test_cancelled_stream_is_closed(self):
        async def main():
            async with AsyncPaddock(self.d.url, "tok", max_threads=1) as px:
                from paddock import client
                from paddock.aio import AsyncSession
                hold = AsyncSession(client.Session(px._sync, {"id": "hold"}), px._runner)
                st = await hold.jobs.follow("job-1")
                first = await st.__anext__()
                self.assertEqual((first.stream, first.data), ("stdout", b"hi\n"))
                with self.assertRaises(asyncio.TimeoutError):
                    await asyncio.wait_for(st.__anext__(), 0.3)
                self.assertTrue(await asyncio.get_running_loop().run_in_executor(None, self.d.closed.wait, 5),
                                "the stream's connection was not closed after the cancel")
                # Ended: no reconnect was sent, and iterating again ends at once.
                with self.assertRaises(StopAsyncIteration):
                    await asyncio.wait_for(st.__anext__(), 5)
                self.assertEqual(sum(1 for _, p, _ in self.d.seen if p.endswith("/jobs/job-1/stream")), 1)
                self.assertEqual(await asyncio.wait_for(px.health(), 5), {"status": "ok"})

        asyncio.run(main())

    def test_session_context_manager_exec_and_errors(self):
        async def main():
            async with AsyncPaddock(self.d.url, "tok") as px:
                async with px.create_session(agent="t") as s:
                    self.assertEqual(s.id, "ses-1")
                    r = await s.exec("echo hi")
                    self.assertEqual((r.exit_code, r.stdout), (0, "hi\n"))
                    with self.assertRaises(paddock.ApprovalRequired) as cm:
                        await s.exec("rm -rf /")
                    self.assertEqual(cm.exception.approval_id, "apr-0123456789abcdef")
                    rs = await asyncio.gather(*(s.exec(f"echo {i}") for i in range(3)))
                    self.assertEqual([x.exit_code for x in rs], [0, 0, 0])
                    call = s.exec("echo once")
                    await call
                    with self.assertRaises(RuntimeError):
                        await call  # a call runs once, like a coroutine
            self.assertEqual(self.d.seen[-1][:2], ("DELETE", "/v1/agents/sessions/ses-1"))
            self.assertEqual(self.d.seen[0], ("POST", "/v1/agents/sessions", {"agent": "t"}))

        asyncio.run(main())

    def test_event_stream_async_for_resumes(self):
        async def main():
            async with AsyncPaddock(self.d.url, "tok") as px:
                from paddock import client
                from paddock.aio import AsyncSession
                s = AsyncSession(client.Session(px._sync, {"id": "ses-1"}), px._runner)
                st = await s.stream_events()
                got = [e.data["seq"] async for e in st]
                self.assertEqual(got, [1, 2, 3])
                self.assertEqual(st.resumes, 1)
            hdrs = [lei for m, p, lei in self.d.seen if p.endswith("/events/stream")]
            self.assertEqual(hdrs, [None, "2"])

        asyncio.run(main())


class StubTest(unittest.TestCase):
    """paddock/aio.pyi, the async variant's types, is generated from the
    blocking classes (_build/aio_stub.py) and every name in it resolves."""

    def _gen(self):
        import importlib.util
        import os
        here = os.path.dirname(os.path.abspath(__file__))
        spec = importlib.util.spec_from_file_location("aio_stub", os.path.join(here, "..", "_build", "aio_stub.py"))
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod

    def test_stub_is_fresh(self):
        gen = self._gen()
        with open(gen.OUT) as f:
            self.assertEqual(f.read(), gen.generate(), "paddock/aio.pyi is stale: run python3 _build/aio_stub.py in sdk/python")

    def test_stub_names_resolve(self):
        import typing
        gen = self._gen()
        ns = {"__name__": "paddock._aio_stub", "__package__": "paddock"}
        with open(gen.OUT) as f:
            exec(compile(f.read(), gen.OUT, "exec"), ns)
        from paddock import client
        checked = 0
        for cname, aname in gen.CLASSES.items():
            acls = ns[aname]
            typing.get_type_hints(acls, ns)
            sync_methods = {n for n, v in vars(getattr(client, cname)).items()
                            if callable(v) and not n.startswith("_")}
            stub_methods = {n for n, v in vars(acls).items() if callable(v) and not n.startswith("_")} - {"aclose"}
            self.assertEqual(sync_methods, stub_methods, aname)
            for n, v in vars(acls).items():
                fn = v.fget if isinstance(v, property) else v
                if callable(fn):
                    typing.get_type_hints(fn, ns)  # NameError when a name does not resolve
                    checked += 1
        self.assertGreater(checked, 80)


if __name__ == "__main__":
    unittest.main()
