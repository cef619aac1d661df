"""The SDK against a real daemon: PADDOCK_URL, PADDOCK_TOKEN (the admin's)
and PADDOCK_CA name it. cmd/paddock's TestPythonSDK starts `paddock serve`
(gateway with TLS, procbox) and runs this suite with them set, and with
PADDOCK_SDK_LIVE=1, which turns a missing daemon into a failure instead of
a skip."""
import hashlib
import os
import re
import tempfile
import threading
import time
import unittest

import paddock

LIVE = bool(os.environ.get("PADDOCK_URL"))


def setUpModule():
    if not LIVE:
        if os.environ.get("PADDOCK_SDK_LIVE") == "1":
            raise RuntimeError("PADDOCK_SDK_LIVE=1 but PADDOCK_URL is not set")
        raise unittest.SkipTest("no daemon: set PADDOCK_URL, PADDOCK_TOKEN and PADDOCK_CA")


class Live(unittest.TestCase):
    px: paddock.Paddock

    @classmethod
    def setUpClass(cls):
        cls.px = paddock.Paddock()

    def session(self, **req):
        s = self.px.create_session(**req)
        self.addCleanup(s.delete)
        return s


class SessionTest(Live):
    def test_context_manager_deletes(self):
        with self.px.create_session() as s:
            self.assertEqual(s.exec("echo hi").stdout, "hi\n")
            sid = s.id
        self.assertEqual(self.px.session(sid).info["state"], "deleted")
        self.assertIn(sid, [x.id for x in self.px.sessions(include_deleted=True)])
        self.assertNotIn(sid, [x.id for x in self.px.sessions()])

    def test_exec(self):
        s = self.session()
        r = s.exec("echo out; echo err >&2; exit 3")
        self.assertEqual((r.exit_code, r.stdout, r.stderr), (3, "out\n", "err\n"))
        self.assertFalse(r.timed_out)
        self.assertEqual(s.exec("sleep 5", timeout=1).timed_out, True)

    def test_exec_stream_resumes_after_drop(self):
        s = self.session()
        st = s.exec_stream("for i in 1 2 3 4 5 6; do echo line$i; echo e$i >&2; sleep 0.3; done; exit 4")
        out, err, dropped = b"", b"", False
        for piece in st:
            if piece.stream == "stdout":
                out += piece.data
            else:
                err += piece.data
            if not dropped and b"line2" in out:
                st.drop()  # the connection fails mid-stream
                dropped = True
        self.assertTrue(dropped)
        self.assertGreaterEqual(st.resumes, 1)
        self.assertEqual(out.decode(), "".join(f"line{i}\n" for i in range(1, 7)))
        self.assertEqual(err.decode(), "".join(f"e{i}\n" for i in range(1, 7)))
        self.assertEqual(st.exit_code, 4)
        self.assertTrue(st.job)

    def test_probe_and_whoami(self):
        s = self.session()
        self.assertIsInstance(s.probe(), dict)
        self.assertEqual(self.px.whoami()["kind"], "admin")
        self.assertIsInstance(self.px.backends(), dict)
        self.assertIsInstance(self.px.health(), dict)


class FilesTest(Live):
    def test_read_write_list_delete(self):
        s = self.session()
        info = s.files.write("/workspace/d/a.txt", "hello\n", mode="0600")
        self.assertEqual(info["size"], 6)
        self.assertEqual(s.files.read_text("/workspace/d/a.txt"), "hello\n")
        ls = s.files.list("/workspace/d")
        self.assertEqual([e["name"] for e in ls["entries"]], ["a.txt"])
        r = s.files.read_range("/workspace/d/a.txt", 1, 3, checksum=True)
        self.assertEqual(r["length"], 3)
        self.assertEqual(r["sha256"], hashlib.sha256(b"hello\n").hexdigest())
        s.files.delete("/workspace/d", recursive=True)
        with self.assertRaises(paddock.NotFound):
            s.files.read("/workspace/d/a.txt")

    def test_upload_20mib_interrupted_and_resumed(self):
        s = self.session()
        data = os.urandom(20 << 20)
        digest = hashlib.sha256(data).hexdigest()
        seen = []

        class Cut(Exception):
            pass

        def cut(up):
            seen.append(up["received"])
            if len(seen) == 2:
                raise Cut()

        with self.assertRaises(Cut):
            s.files.upload(data, "/workspace/big.bin", on_chunk=cut)
        ups = s.files.uploads()
        self.assertEqual(len(ups), 1)
        self.assertEqual((ups[0]["state"], ups[0]["received"]), ("open", 8 << 20))
        # Resume from a file on disk this time: the SDK asks the daemon
        # where it stands and sends only the rest.
        with tempfile.NamedTemporaryFile() as f:
            f.write(data)
            f.flush()
            sent = []
            done = s.files.upload(f.name, "/workspace/big.bin", resume=ups[0]["id"], on_chunk=lambda u: sent.append(u["received"]))
        self.assertEqual(sent[0], 12 << 20)
        self.assertEqual(len(sent), 3)
        self.assertEqual((done["state"], done["verified"], done["size"]), ("complete", True, 20 << 20))
        self.assertEqual(s.exec("sha256sum /workspace/big.bin").stdout.split()[0], digest)
        # Too large for a whole-file read: the daemon refuses it.
        with self.assertRaises(paddock.TooLarge):
            s.files.read("/workspace/big.bin")
        # A ranged download, interrupted after its first 4 MiB, resumed.
        with tempfile.TemporaryDirectory() as d:
            local = os.path.join(d, "big.bin")
            with open(local, "wb") as f:
                f.write(data[:5 << 20])  # what an interrupted download left
            got = s.files.download("/workspace/big.bin", local)
            self.assertEqual(got["resumed_at"], 5 << 20)
            self.assertEqual((got["size"], got["sha256"]), (20 << 20, digest))
            with open(local, "wb") as f:
                f.write(b"x" * 100)  # a local start that is not the file's
            with self.assertRaises(paddock.Conflict):
                s.files.download("/workspace/big.bin", local)


class JobsTest(Live):
    def test_jobs(self):
        s = self.session()
        j = s.jobs.start("cat; echo done; sleep 60", stdin=True)
        self.assertEqual(j["state"], "running")
        s.jobs.write(j["id"], "abc\n")
        s.jobs.write(j["id"], b"\x00\x01\n", close=True)
        r = s.jobs.read(j["id"], wait_ms=3000)
        out = r["output"]
        for _ in range(20):
            if "done" in out:
                break
            r = s.jobs.read(j["id"], offset=r["next_offset"], wait_ms=1000)
            out += r["output"]
        self.assertEqual(out, "abc\n\x00\x01\ndone\n")
        self.assertIn(j["id"], [x["id"] for x in s.jobs.list()])
        with self.assertRaises(paddock.Conflict):
            s.jobs.close_stdin(j["id"])  # closed already
        s.jobs.kill(j["id"], "KILL")
        f = s.jobs.follow(j["id"]).run()
        self.assertIn(f.state, ("killed", "signaled"))
        self.assertEqual(f.exit_code, 137)


class ApprovalTest(Live):
    def test_approval_flow(self):
        s = self.session(policy={"process": {"ask": ["touch *"], "deny": ["rm *"]}})
        with self.assertRaises(paddock.ApprovalRequired) as held:
            s.exec("touch /workspace/deployed")
        aid = held.exception.approval_id
        self.assertRegex(aid, r"^apr-[0-9a-f]{16}$")
        self.assertEqual(held.exception.status, 428)
        pending = [a for a in s.approvals() if a["id"] == aid]
        self.assertEqual(pending[0]["state"], "pending")
        self.assertEqual(s.approve(aid, note="ok")["state"], "approved")
        self.assertEqual(s.exec("touch /workspace/deployed", approval_id=aid).exit_code, 0)
        self.assertEqual(s.files.list("/workspace/deployed")["kind"], "file")
        with self.assertRaises(paddock.Forbidden):
            s.exec("touch /workspace/deployed", approval_id=aid)  # used once already
        # Denied: the retry is refused.
        with self.assertRaises(paddock.ApprovalRequired) as again:
            s.exec("touch /workspace/other")
        s.deny(again.exception.approval_id)
        with self.assertRaises(paddock.Forbidden):
            s.exec("touch /workspace/other", approval_id=again.exception.approval_id)
        with self.assertRaises(paddock.Conflict):
            s.approve(again.exception.approval_id)
        # A job waits in the same way.
        with self.assertRaises(paddock.ApprovalRequired):
            s.jobs.start("touch /workspace/job")

    def test_approval_wait(self):
        s = self.session(policy={"process": {"ask": ["touch *"]}})

        def approve_when_held():
            for _ in range(100):
                for a in s.approvals():
                    if a["state"] == "pending":
                        s.approve(a["id"])
                        return
                time.sleep(0.1)

        t = threading.Thread(target=approve_when_held)
        t.start()
        r = s.exec("touch /workspace/waited", approval_wait_seconds=30)
        t.join()
        self.assertEqual(r.exit_code, 0)


class ErrorsTest(Live):
    """Each error class from a real refusal of the daemon."""

    def test_policy_denied(self):
        s = self.session(policy={"process": {"deny": ["rm *"]}})
        with self.assertRaises(paddock.PolicyDenied) as e:
            s.exec("echo x; rm -rf /workspace")
        self.assertEqual((e.exception.rule, e.exception.pattern, e.exception.code), ("process.deny", "rm *", "policy_refused"))
        self.assertEqual(e.exception.piece, "rm -rf /workspace")

    def test_budget_exceeded(self):
        s = self.session(budget={"max_execs": 1})
        s.exec("true")
        with self.assertRaises(paddock.BudgetExceeded) as e:
            s.exec("true")
        self.assertEqual((e.exception.budget, e.exception.limit, e.exception.used), ("max_execs", 1, 1))

    def test_kinds(self):
        s = self.session()
        with self.assertRaises(paddock.NotFound):
            self.px.session("ses-doesnotexist")
        s.checkpoint(tag="before")
        with self.assertRaises(paddock.Conflict) as c:
            s.checkpoint(tag="before")
        self.assertEqual(c.exception.code, "conflict")
        with self.assertRaises(paddock.InvalidArgument):
            s.exec("")
        with self.assertRaises(paddock.RevisionMismatch):
            s.checkpoint(tag="stale", revision=s.revision + 100)
        with self.assertRaises(paddock.Unauthenticated):
            paddock.Paddock(token="pdk_not_a_token_of_this_daemon").whoami()
        tok = s.mint_token(["read"], label="sdk test")
        ro = paddock.Paddock(token=tok["token"]).session(s.id)
        with self.assertRaises(paddock.Forbidden):
            ro.exec("true")
        s.exec("true", idempotency_key="k-1")
        with self.assertRaises(paddock.IdempotencyMismatch):
            s.exec("false", idempotency_key="k-1")

    def test_too_many_streams(self):
        s = self.session()
        opened = []
        try:
            with self.assertRaises(paddock.TooManyRequests) as e:
                for _ in range(9):
                    opened.append(s._t.stream("GET", s._p("/events/stream")))
            self.assertEqual((len(opened), e.exception.code, e.exception.limit), (8, "event_streams_session", 8))
        finally:
            for o in opened:
                o.close()


class EventsTest(Live):
    def test_stream_resumes_after_drop(self):
        s = self.session()
        s.exec("echo one")
        st = s.stream_events()
        guard = threading.Timer(60, st.close)  # the test ends even if the second exec never shows
        guard.start()
        self.addCleanup(guard.cancel)
        seqs, dropped = [], False
        for ev in st:
            if ev.event != "ledger":
                continue
            seqs.append(ev.data["seq"])
            if not dropped and ev.data.get("kind") == "exec":
                st.drop()
                dropped = True
                s.exec("echo two")  # written while the client is cut off
                continue
            if dropped and ev.data.get("kind") == "exec":
                st.close()
        self.assertGreaterEqual(st.resumes, 1)
        self.assertEqual(seqs, sorted(set(seqs)), "a resumed stream repeats or reorders nothing")
        ledger = [e["seq"] for e in s.events()["ledger"]]
        self.assertEqual(seqs, ledger[:len(seqs)])
        self.assertEqual(len([1 for e in s.events()["ledger"] if e["kind"] == "exec"]), 2)

    def test_history(self):
        s = self.session()
        s.exec("echo x")
        self.assertTrue(s.trajectory()["steps"])
        self.assertIn("added", s.artifacts())
        # A stopped session's stream sends its history and ends.
        s.delete()
        kinds = [e.data.get("kind") for e in s.stream_events() if e.event == "ledger"]
        self.assertIn("exec", kinds)


class LifecycleTest(Live):
    def test_checkpoint_restore_fork_promote(self):
        s = self.session()
        s.files.write("/workspace/v", "1")
        s.checkpoint(tag="one")
        s.files.write("/workspace/v", "2")
        s.restore("one")
        self.assertEqual(s.files.read_text("/workspace/v"), "1")
        kids = s.fork(2)
        self.assertEqual(len(kids), 2)
        for k in kids:
            self.addCleanup(k.delete)
        with kids[0] as k:
            k.files.write("/workspace/new.txt", "from child")
            plan = k.promote(dry_run=True)
            self.assertEqual([a["path"].rsplit("/", 1)[-1] for a in plan["plan"]["apply"]], ["new.txt"])
            k.promote(plan_id=plan["plan_id"])
        self.assertEqual(s.files.read_text("/workspace/new.txt"), "from child")
        with self.assertRaises(paddock.Conflict) as e:
            s.promote()
        self.assertEqual(e.exception.code, "not_fork_child")

    def test_evaluate_and_rollout(self):
        s = self.session()
        res = s.evaluate(["echo a > /workspace/f", "exit 1", "echo b > /workspace/f; sleep 1"], test="test -s /workspace/f")
        self.assertEqual(res["winner"], 0)
        self.assertEqual([r["score"] for r in res["results"]], [100, 0, 100])
        self.assertEqual([r["deleted"] for r in res["results"]], [False, True, True])
        w = self.px.session(res["winner_session"])
        self.addCleanup(w.delete)
        self.assertEqual(w.files.read_text("/workspace/f"), "a\n")
        ro = s.rollout(3, "echo $((1+1))")
        self.assertEqual([r["stdout_tail"] for r in ro["runs"]], ["2\n"] * 3)
        self.assertTrue(all(r["deleted"] for r in ro["runs"]))

    def test_speculate_changesets_rewind_replay(self):
        s = self.session()
        cs = s.speculate("echo hi > /workspace/spec.txt", ["/workspace"])
        self.assertIn(cs["id"], [c["id"] for c in s.changesets()])
        self.assertEqual(s.changeset(cs["id"])["id"], cs["id"])
        s.decide_changeset(cs["id"], "approve")
        s.apply_changeset(cs["id"])
        self.assertEqual(s.files.read_text("/workspace/spec.txt"), "hi\n")
        self.assertIsInstance(s.rewind(), dict)
        self.assertIsInstance(s.replay(dry_run=True), dict)


class MiscTest(Live):
    def test_tokens_previews_git(self):
        s = self.session()
        t = s.mint_token(["read"], ttl_seconds=60)
        self.assertIn(t["id"], [x["id"] for x in s.tokens()])
        s.revoke_token(t["id"])
        with self.assertRaises(paddock.Unauthenticated):
            paddock.Paddock(token=t["token"]).whoami()
        p = s.create_preview(8000, ttl_seconds=60)
        self.assertIn(p["id"], [x["id"] for x in s.previews()])
        s.delete_preview(p["id"])
        self.assertEqual(s.previews(), [])
        if s.exec("command -v git").exit_code == 0:
            s.exec("cd /workspace && git init -q && git config user.email a@b && git config user.name a")
            s.files.write("/workspace/g.txt", "g")
            self.assertIn("g.txt", str(s.git.status()))
            s.git.commit(message="first")
            self.assertIn("first", str(s.git.log()))

    def test_sandboxes(self):
        with self.px.create_sandbox(ttl_seconds=300) as sb:
            sb.write_file("/tmp/x", "hello")
            self.assertEqual(sb.read_file("/tmp/x"), b"hello")
            self.assertEqual(sb.process("cat /tmp/x")["stdout"], "hello")
            self.assertIn(sb.id, [x.id for x in self.px.sandboxes()])
        with self.assertRaises(paddock.NotFound):
            self.px.sandbox(sb.id)


if __name__ == "__main__":
    unittest.main()
