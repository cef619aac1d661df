"""Tests of the SDK's pure parts: error classes from codes and statuses,
the Server-Sent Events parser, request helpers. No daemon needed."""
import os
import re
import unittest

import paddock
from paddock import _http, client, errors
from paddock.coverage import COVERAGE


class ErrorClassTest(unittest.TestCase):
    def test_kind_codes(self):
        for code, status, cls in [
            ("invalid_argument", 400, paddock.InvalidArgument),
            ("unauthenticated", 401, paddock.Unauthenticated),
            ("forbidden", 403, paddock.Forbidden),
            ("not_found", 404, paddock.NotFound),
            ("conflict", 409, paddock.Conflict),
            ("revision_mismatch", 412, paddock.RevisionMismatch),
            ("too_large", 413, paddock.TooLarge),
            ("idempotency_mismatch", 422, paddock.IdempotencyMismatch),
            ("approval_required", 428, paddock.ApprovalRequired),
            ("too_many_requests", 429, paddock.TooManyRequests),
            ("internal", 500, paddock.Internal),
            ("bad_gateway", 502, paddock.BadGateway),
        ]:
            e = errors.error_from(status, code, "m")
            self.assertIs(type(e), cls, code)
            self.assertEqual(e.code, code)
            # The status alone, as from a proxy's page, gives the same class.
            self.assertIs(type(errors.error_from(status, "", "m")), cls, status)

    def test_finer_codes(self):
        e = errors.error_from(403, "policy_refused", "no", {"rule": "process.deny", "pattern": "rm *", "piece": "rm -rf /"})
        self.assertIsInstance(e, paddock.PolicyDenied)
        self.assertIsInstance(e, paddock.Forbidden)
        self.assertEqual((e.rule, e.pattern, e.piece), ("process.deny", "rm *", "rm -rf /"))
        b = errors.error_from(403, "budget_exceeded", "no", {"budget": "max_execs", "limit": 1, "used": 1})
        self.assertIsInstance(b, paddock.BudgetExceeded)
        self.assertEqual((b.budget, b.limit, b.used), ("max_execs", 1, 1.0))
        # A finer code without a class of its own takes its status's.
        self.assertIs(type(errors.error_from(409, "disk_exhausted", "full")), paddock.Conflict)
        self.assertIs(type(errors.error_from(429, "event_streams_session", "cap", {"limit": 8})), paddock.TooManyRequests)
        self.assertEqual(errors.error_from(429, "event_streams_session", "cap", {"limit": 8}).limit, 8)
        a = errors.error_from(428, "approval_required", "held", {"approval_id": "apr-0123456789abcdef"})
        self.assertEqual(a.approval_id, "apr-0123456789abcdef")

    def test_decode_error_of_a_proxy_page(self):
        e = _http.decode_error(502, b"<html>bad gateway</html>")
        self.assertIsInstance(e, paddock.BadGateway)
        self.assertEqual(e.message, "<html>bad gateway</html>")
        e = _http.decode_error(409, b'{"error":"tag taken","code":"conflict"}')
        self.assertIsInstance(e, paddock.Conflict)
        self.assertEqual(str(e), "409 tag taken")


class SSETest(unittest.TestCase):
    def test_parse(self):
        raw = [b"id: 1\n", b"event: ledger\n", b'data: {"seq": 1}\n', b"\n", b": comment\n",
               b"event: vm\r\n", b'data: {"kind": "boot"}\r\n', b"\r\n", b"event: error\n", b'data: {"code": "session_ended"}\n']
        evs = list(_http.parse_sse(iter(raw)))
        self.assertEqual([(e.id, e.event, e.data) for e in evs],
                         [("1", "ledger", {"seq": 1}), (None, "vm", {"kind": "boot"})])
        # The last event has no blank line after it: a cut stream, not an event.


class HelperTest(unittest.TestCase):
    def test_query(self):
        self.assertEqual(client._query(path="/a b", recursive=True, x=None), "?path=%2Fa+b&recursive=true")
        self.assertEqual(client._query(), "")

    def test_tail(self):
        s = "é" * 3000
        t = client._tail(s)
        self.assertLessEqual(len(t.encode()), client.OUTPUT_TAIL)
        self.assertTrue(s.endswith(t))

    def test_orchestration_limits(self):
        px = paddock.Paddock("https://127.0.0.1:1", "t")
        s = client.Session(px, {"id": "x"})
        with self.assertRaises(paddock.InvalidArgument):
            s.evaluate([])
        with self.assertRaises(paddock.InvalidArgument):
            s.evaluate(["true"] * 17)
        with self.assertRaises(paddock.InvalidArgument):
            s.rollout(33, "true")
        with self.assertRaises(paddock.InvalidArgument):
            s.rollout(2, "true", timeout=3601)

    def test_env(self):
        import os
        old = dict(os.environ)
        try:
            os.environ.update(PADDOCK_URL="https://example.test:9/", PADDOCK_TOKEN="tok")
            os.environ.pop("PADDOCK_CA", None)
            px = paddock.Paddock()
            self.assertEqual(px.url, "https://example.test:9")
            self.assertEqual(px._t.token, "tok")
            with self.assertRaises(ValueError):
                paddock.Paddock("ftp://x", "t")
        finally:
            os.environ.clear()
            os.environ.update(old)



OPENAPI = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "docs", "api", "openapi.yaml")


def openapi_routes(text):
    """"METHOD path" of every operation in openapi.yaml's paths section
    (its layout: a path at two spaces of indent, a method at four)."""
    routes, path, in_paths = set(), None, False
    for line in text.splitlines():
        if line == "paths:":
            in_paths = True
            continue
        if in_paths and line and not line.startswith(" "):
            break
        m = re.match(r"^  (/\S*):$", line)
        if m:
            path = m.group(1)
            continue
        m = re.match(r"^    (get|post|put|delete|patch|head|options):$", line)
        if m and path:
            routes.add(f"{m.group(1).upper()} {path}")
    return routes


class CoverageTest(unittest.TestCase):
    def test_every_route_is_offered_or_explained(self):
        with open(OPENAPI) as f:
            routes = openapi_routes(f.read())
        self.assertGreater(len(routes), 70)
        missing = sorted(routes - set(COVERAGE))
        self.assertEqual(missing, [], "routes of openapi.yaml the Python SDK neither offers nor explains: add them to paddock/coverage.py")
        stale = sorted(set(COVERAGE) - routes)
        self.assertEqual(stale, [], "paddock/coverage.py lists routes openapi.yaml does not have")
        classes = {"Paddock": paddock.Paddock, "Session": paddock.Session, "Sandbox": paddock.Sandbox,
                   "Files": client.Files, "Jobs": client.Jobs, "Git": client.Git}
        for route, how in COVERAGE.items():
            if how.startswith("not offered: "):
                self.assertGreater(len(how), len("not offered: ") + 10, route)
                continue
            cls, _, meth = how.partition(".")
            self.assertTrue(callable(getattr(classes[cls], meth, None)), f"{route}: {how} does not exist")


class FakeDaemonTest(unittest.TestCase):
    """The SDK's reconnects against a small local HTTP server that cuts
    its first event stream without an error event, as a dropped
    connection does."""

    def setUp(self):
        import http.server
        import threading
        seen = self.seen = []

        class H(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def do_GET(self):
                seen.append((self.path, self.headers.get("Last-Event-ID"), self.headers.get("Authorization")))
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Connection", "close")
                self.end_headers()
                if len(seen) == 1:
                    self.wfile.write(b'id: 1\nevent: ledger\ndata: {"seq": 1}\n\nevent: vm\ndata: {"kind": "boot"}\n\n'
                                     b'id: 2\nevent: ledger\ndata: {"seq": 2}\n\n')
                else:
                    self.wfile.write(b'id: 3\nevent: ledger\ndata: {"seq": 3}\n\n'
                                     b'event: error\ndata: {"error": "ended", "code": "session_ended"}\n\n')
                self.wfile.flush()
                self.close_connection = True

        self.srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
        threading.Thread(target=self.srv.serve_forever, daemon=True).start()
        self.addCleanup(self.srv.server_close)
        self.addCleanup(self.srv.shutdown)

    def test_event_stream_resumes_with_last_event_id(self):
        px = paddock.Paddock(f"http://127.0.0.1:{self.srv.server_port}", "tok")
        st = client.Session(px, {"id": "ses-1"}).stream_events()
        got = [(e.event, e.data) for e in st]
        self.assertEqual(got, [("ledger", {"seq": 1}), ("vm", {"kind": "boot"}), ("ledger", {"seq": 2}), ("ledger", {"seq": 3})])
        self.assertEqual(st.resumes, 1)
        self.assertEqual([(h, a) for _, h, a in self.seen], [(None, "Bearer tok"), ("2", "Bearer tok")])
        self.assertEqual(self.seen[0][0], "/v1/agents/sessions/ses-1/events/stream")


if __name__ == "__main__":
    unittest.main()
