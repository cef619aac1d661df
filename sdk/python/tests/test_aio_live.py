"""paddock.aio against a real daemon (see test_live.py for how it is
named and run): a session as an async context manager, exec, a streamed
exec as an async iterator, files, the approval flow, a fork whose
children's execs run together under asyncio.gather, and delete; and a
cancelled read of a stream over the gateway's TLS, which must free its
worker thread at once."""
import asyncio
import unittest

import paddock
from paddock.aio import AsyncPaddock

from .test_live import LIVE, setUpModule  # noqa: F401 (the same skip rule)


class AsyncLiveTest(unittest.TestCase):
    def test_async_walkthrough(self):
        asyncio.run(self.walkthrough())

    async def walkthrough(self):
        async with AsyncPaddock() as px:
            async with px.create_session(policy={"process": {"ask": ["touch *"]}}) as s:
                sid = s.id
                r = await s.exec("echo out; echo err >&2; exit 3")
                self.assertEqual((r.exit_code, r.stdout, r.stderr), (3, "out\n", "err\n"))

                st = await s.exec_stream("for i in 1 2 3; do echo line$i; sleep 0.2; done; exit 5")
                out = b""
                async for piece in st:
                    self.assertEqual(piece.stream, "stdout")
                    out += piece.data
                self.assertEqual(out, b"line1\nline2\nline3\n")
                self.assertEqual(st.exit_code, 5)

                info = await s.files.write("/workspace/a.txt", "hello\n")
                self.assertEqual(info["size"], 6)
                self.assertEqual(await s.files.read_text("/workspace/a.txt"), "hello\n")
                ls = await s.files.list("/workspace")
                self.assertIn("a.txt", [e["name"] for e in ls["entries"]])

                with self.assertRaises(paddock.ApprovalRequired) as held:
                    await s.exec("touch /workspace/deployed")
                aid = held.exception.approval_id
                self.assertTrue(aid.startswith("apr-"))
                await s.approve(aid)
                self.assertEqual((await s.exec("touch /workspace/deployed", approval_id=aid)).exit_code, 0)

                kids = await s.fork(3)
                self.assertEqual(len(kids), 3)
                try:
                    rs = await asyncio.gather(*(k.exec(f"echo child{i} && cat /workspace/a.txt") for i, k in enumerate(kids)))
                    self.assertEqual([x.stdout for x in rs], [f"child{i}\nhello\n" for i in range(3)])
                    self.assertEqual(len({k.id for k in kids} | {sid}), 4)
                finally:
                    await asyncio.gather(*(k.delete() for k in kids))
                for k in kids:
                    self.assertEqual((await px.session(k.id)).info["state"], "deleted")
            self.assertEqual((await px.session(sid)).info["state"], "deleted")
            with self.assertRaises(paddock.Conflict):
                await (await px.session(sid)).exec("true")

    def test_cancel_over_tls(self):
        asyncio.run(self.cancel_over_tls())

    async def cancel_over_tls(self):
        # One worker thread: if the cancelled read kept it, the calls after
        # the cancel would never run.
        async with AsyncPaddock(max_threads=1) as px:
            async with px.create_session() as s:
                st = await s.exec_stream("echo started; sleep 30; echo late")
                first = await asyncio.wait_for(st.__anext__(), 30)
                self.assertEqual(first.data, b"started\n")
                t0 = asyncio.get_running_loop().time()
                with self.assertRaises(asyncio.TimeoutError):
                    await asyncio.wait_for(st.__anext__(), 1)
                self.assertEqual((await asyncio.wait_for(s.exec("echo after"), 10)).stdout, "after\n")
                self.assertLess(asyncio.get_running_loop().time() - t0, 10)
                with self.assertRaises(StopAsyncIteration):
                    await asyncio.wait_for(st.__anext__(), 5)
                self.assertEqual(st.resumes, 1)  # the cut was seen; no reconnect went out


if __name__ == "__main__":
    unittest.main()
