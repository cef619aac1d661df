"""The SDK's fields held to docs/api/openapi.yaml through paddock/models.py
(generated from the document; internal/tools/pymodels.TestGenerated holds
it equal to a fresh generation). No daemon needed:

- every offered route is called through the SDK against a recording
  transport; each JSON body the SDK sends has only fields of the route's
  request schema, each with a compatible type, and every field that schema
  requires; each field the SDK reads
  from an answer is in the route's answer schema;
- each method's return annotation names its route's answer schema;
- each model class (a class with _schema) has only properties and
  attributes that are fields of its schema, of a compatible type, and
  offers every required field or says why not.
"""
import os
import tempfile
import typing
import unittest
from typing import Any, Dict, List, Optional, Tuple

import paddock
from paddock import client, models
from paddock.coverage import COVERAGE

def _matches(template: str, path: str) -> bool:
    t, p = template.split("/"), path.split("/")
    return len(t) == len(p) and all(a == b or (a.startswith("{") and b != "") for a, b in zip(t, p))


def route_of(method: str, path: str) -> str:
    """The route of openapi.yaml a request goes to ("METHOD template")."""
    path = path.split("?", 1)[0]
    hits = [k for k in models.OPERATIONS if k.split(" ", 1)[0] == method and _matches(k.split(" ", 1)[1], path)]
    # A literal segment beats a parameter (uploads/{upload} vs a literal).
    hits.sort(key=lambda k: k.count("{"))
    if not hits:
        raise AssertionError(f"{method} {path}: no route of openapi.yaml")
    return hits[0]


def kind_ok(value: Any, kind: str) -> bool:
    kinds = kind.split("|")
    if value is None:
        return "null" in kinds
    for k in kinds:
        if k == "any":
            return True
        if k == "string" and isinstance(value, str):
            return True
        if k == "integer" and isinstance(value, int) and not isinstance(value, bool):
            return True
        if k == "number" and isinstance(value, (int, float)) and not isinstance(value, bool):
            return True
        if k == "boolean" and isinstance(value, bool):
            return True
        if k == "array" and isinstance(value, list):
            return True
        if k == "object" and isinstance(value, dict):
            return True
    return False


def check_body(where: str, schema: str, body: Dict[str, Any], errs: List[str]) -> None:
    fields = models.FIELDS[schema]
    for key, (_, _, required) in fields.items():
        if required and key not in body:
            errs.append(f"{where}: does not send {key!r}, which schema {schema} requires")
    for key, value in body.items():
        if key not in fields:
            errs.append(f"{where}: sends {key!r}, which schema {schema} does not have")
            continue
        kind, sub, _ = fields[key]
        if not kind_ok(value, kind):
            errs.append(f"{where}: sends {key!r} as {type(value).__name__}, schema {schema} has {kind}")
        elif sub and isinstance(value, dict):
            check_body(f"{where}.{key}", sub, value, errs)
        elif sub and isinstance(value, list):
            for item in value:
                if isinstance(item, dict):
                    check_body(f"{where}.{key}[]", sub, item, errs)


class Seen(dict):
    """An answer that notes each field the SDK reads from it."""

    def __init__(self, schema: str, log: List[Tuple[str, str]], data: Dict[str, Any]):
        super().__init__(data)
        self._schema, self._log = schema, log

    def __getitem__(self, key):
        self._log.append((self._schema, key))
        return super().__getitem__(key)

    def get(self, key, default=None):
        self._log.append((self._schema, key))
        return super().get(key, default)

    def __contains__(self, key):
        self._log.append((self._schema, key))
        return super().__contains__(key)


def synth(schema: str, log: List[Tuple[str, str]], depth: int = 0) -> Seen:
    """An answer of the schema with every field present."""
    out: Dict[str, Any] = {}
    for key, (kind, sub, _) in models.FIELDS[schema].items():
        k = kind.split("|")[0]
        if k == "string":
            out[key] = "" if key.endswith("_base64") or key == "sha256" else "s1"
        elif k in ("integer", "number"):
            out[key] = 0
        elif k == "boolean":
            out[key] = False
        elif k == "array":
            out[key] = [synth(sub, log, depth + 1)] if sub and depth < 2 else []
        elif k == "object":
            out[key] = synth(sub, log, depth + 1) if sub and depth < 3 else {}
        else:
            out[key] = None
    return Seen(schema, log, out)


class _DummySSE:
    """A stream that ends at once, as the route's stream ends."""

    def __init__(self, route: str):
        self.route = route

    def __iter__(self):
        if self.route.endswith("/events/stream"):
            return iter([paddock.Event(None, "error", {"code": "session_ended", "error": "ended"})])
        return iter([paddock.Event("1:0", "exit", {"exit_code": 0, "state": "exited"})])

    def close(self):
        pass

    def drop(self):
        pass


class Recorder(client.Transport):
    """A transport that answers every request with a made-up answer of the
    route's schema and records what was sent."""

    def __init__(self):
        super().__init__("http://127.0.0.1:1", "tok")
        self.sent: List[Tuple[str, Any, Optional[bytes]]] = []
        self.reads: List[Tuple[str, str]] = []
        self.answers: Dict[str, Dict[str, Any]] = {}

    def request(self, method, path, body=None, headers=None, raw=None, content_type="application/json"):
        route = route_of(method, path)
        self.sent.append((route, body, raw))
        resp = models.OPERATIONS[route][1]
        if resp is None:
            return None
        ans = synth(resp, self.reads)
        ans.update(self.answers.get(route, {}))
        return ans

    def stream(self, method, path, body=None, headers=None):
        route = route_of(method, path)
        self.sent.append((route, body, None))
        return _DummySSE(route)


S = "/v1/agents/sessions/{id}"


def every_call(px: "paddock.Paddock", rec: Recorder, tmp: str) -> None:
    """Call each offered method once, with every optional argument given."""
    s = client.Session(px, {"id": "ses-1", "revision": 3})
    sb = client.Sandbox(px, {"id": "sbx-1"})
    px.health(), px.whoami(), px.backends(), px.admin_policy()
    px.compile_policy({"preset": "offline", "process": {"ask": ["git push*"]}}, backend="procbox"), px.tenants()
    px.create_session(idempotency_key="k1", agent="a", ttl_seconds=60)
    px.session("ses-1"), px.sessions(include_deleted=True)
    px.create_sandbox(image="debian", ttl_seconds=60)
    px.sandbox("sbx-1"), px.sandboxes()
    s.exec("echo hi", timeout=5, approval_id="apr-0123456789abcdef", approval_wait_seconds=3, idempotency_key="k2")
    s.exec_stream("echo hi", timeout=5, approval_id="apr-0123456789abcdef").run()
    s.probe(), s.refresh()
    s.checkpoint(tag="t1", memory=True, revision=3)
    s.restore("t1", revision=3)
    s.fork(2, identity="shared", from_tag="t1", revision=3)
    s.promote(dry_run=True, plan_id="p1", skip_conflicts=True, paths=["a"])
    s.evaluate(["true", "false"], test="true", timeout=5)
    s.rollout(2, "true", timeout=5)
    s.rewind()
    s.rewind_config(enabled=True, max_points=5, memory=False, triggers=["exec"])
    s.rewind_undo(steps=1)
    s.rewind_pin("rw-1", pinned=False)
    s.rewind_bisect(test="true", good="rw-1", bad="rw-2", timeout_seconds=5)
    s.rewind_branch(tag="rw-1", count=2, identity="shared")
    s.replay(target="s2", dry_run=True, since=1, until=2, stop_on_failure=True)
    s.speculate("touch a", ["/work"], cwd="/work", timeout_seconds=5)
    s.changesets(), s.changeset("chg-1")
    s.decide_changeset("chg-1", "approve", reason="ok")
    s.apply_changeset("chg-1")
    s.create_preview(8080, ttl_seconds=60)
    s.previews(), s.delete_preview("pv-1")
    s.mint_token(["exec"], ttl_seconds=60, label="l")
    s.tokens(), s.revoke_token("tok-1")
    s.approvals()
    s.approve("apr-0123456789abcdef", note="n"), s.deny("apr-0123456789abcdef", note="n")
    s.create_grant(hosts=["api.example.com"], header="Authorization", secret_ref="env:K", ttl_seconds=60), s.grants(), s.delete_grant("g1"), s.delete_grants()
    s.pty_ticket()
    s.events(since="2026-01-01T00:00:00Z"), list(s.stream_events()), s.artifacts(), s.trajectory()
    s.git.status(), s.git.diff(path="a", staged=True), s.git.log()
    s.git.commit(message="m", repo="/work", staged_only=True), s.git.branch(name="b", repo="/work")
    s.files.list("/work"), s.files.read("/work/a")
    s.files.write("/work/a", "hi", mode="0644", parents=True)
    s.files.delete("/work/a", recursive=True)
    s.files.read_range("/work/a", 0, 10, checksum=True)
    s.files.uploads(), s.files.upload_status("up-1"), s.files.abort_upload("up-1")
    rec.answers[f"POST {S}/uploads"] = {"size": 3, "received": 0, "state": "open"}
    rec.answers[f"PUT {S}/uploads/{{upload}}"] = {"size": 3, "received": 3, "state": "open"}
    s.files.upload(b"abc", "/work/up", mode="0600")
    s.files.download("/work/a", os.path.join(tmp, "dl"))
    s.jobs.start("sleep 1", stdin=True, timeout=5, max_output_bytes=100, approval_id="apr-0123456789abcdef",
                 approval_wait_seconds=3)
    s.jobs.list(), s.jobs.read("job-1", offset=1, stderr_offset=1, wait_ms=10)
    s.jobs.write("job-1", "text", close=True), s.jobs.write("job-1", b"bytes"), s.jobs.close_stdin("job-1")
    s.jobs.kill("job-1", "KILL"), s.jobs.follow("job-1").run()
    s.delete(revision=3)
    sb.refresh(), sb.process("echo", timeout=5, cwd="/", env={"A": "1"})
    sb.read_file("/a"), sb.write_file("/a", "x", mode="0644")
    sb.speculate("touch a", ["/work"]), sb.changesets(), sb.changeset("c")
    sb.decide_changeset("c", "approve", reason="r"), sb.apply_changeset("c"), sb.delete()


def annotation_kind(t: Any) -> Optional[str]:
    """The JSON kind a Python annotation stands for (None: not a plain one)."""
    if typing.get_origin(t) is typing.Union:
        args = [a for a in typing.get_args(t) if a is not type(None)]
        inner = annotation_kind(args[0]) if len(args) == 1 else None
        return None if inner is None else inner + "|null"
    if typing.get_origin(t) in (list, List):
        return "array"
    return {str: "string", int: "integer", float: "number", bool: "boolean", dict: "object"}.get(t) or (
        "object" if isinstance(t, type) and issubclass(t, dict) else None)


def kinds_fit(have: str, want: str) -> bool:
    h, w = set(have.split("|")), set(want.split("|"))
    if "number" in w:
        w.add("integer")
    if "integer" in h and "number" in w:
        h = (h - {"integer"}) | {"number"}
    # The SDK may answer None for an absent optional field.
    return (h - {"null"}) <= w


class ModelsTest(unittest.TestCase):
    def test_requests_and_reads_follow_the_document(self):
        rec = Recorder()
        px = paddock.Paddock("http://127.0.0.1:1", "tok")
        px._t = rec
        with tempfile.TemporaryDirectory() as tmp:
            every_call(px, rec, tmp)
        errs: List[str] = []
        for route, body, raw in rec.sent:
            req = models.OPERATIONS[route][0]
            if body is None:
                continue
            if req is None:
                errs.append(f"{route}: the SDK sends a JSON body, the document has none")
                continue
            check_body(route, req, body, errs)
        for schema, key in set(rec.reads):
            if key not in models.FIELDS[schema]:
                errs.append(f"the SDK reads {key!r} from a {schema}, which has no such field")
        self.assertEqual(errs, [])
        offered = {r for r, how in COVERAGE.items() if not how.startswith("not offered")}
        self.assertEqual(sorted(offered - {r for r, _, _ in rec.sent}), [],
                         "offered routes every_call does not reach: call them there")

    def test_return_annotations_name_the_answer_schema(self):
        classes = {"Paddock": paddock.Paddock, "Session": paddock.Session, "Sandbox": paddock.Sandbox,
                   "Files": client.Files, "Jobs": client.Jobs, "Git": client.Git}
        errs: List[str] = []
        for route, how in COVERAGE.items():
            if how.startswith("not offered"):
                continue
            cls, _, meth = how.partition(".")
            ret = typing.get_type_hints(getattr(classes[cls], meth)).get("return")
            resp = models.OPERATIONS[route][1]
            if typing.get_origin(ret) in (list, List):
                item = typing.get_args(ret)[0]
                if getattr(item, "__module__", "") != models.__name__:
                    continue
                arrays = {sub for kind, sub, _ in models.FIELDS.get(resp or "", {}).values() if kind == "array"}
                if item.__name__ not in arrays:
                    errs.append(f"{how} ({route}) answers List[{item.__name__}], the answer {resp} has no such list")
            elif getattr(ret, "__module__", "") == models.__name__ and ret.__name__ != resp:
                errs.append(f"{how} ({route}) answers {ret.__name__}, the document's answer is {resp}")
        self.assertEqual(errs, [])

    def test_model_classes_follow_their_schema(self):
        found = [c for c in vars(client).values() if isinstance(c, type) and "_schema" in vars(c)]
        self.assertGreaterEqual(len(found), 3)
        errs: List[str] = []
        for cls in found:
            schema = cls._schema
            fields = models.FIELDS[schema]
            offered: Dict[str, Any] = {}
            for name, attr in vars(cls).items():
                if isinstance(attr, property):
                    offered[name] = typing.get_type_hints(attr.fget).get("return")
            for name, t in typing.get_type_hints(cls).items():
                if not name.startswith("_") and name != "info":
                    offered[name] = t
            for name, t in offered.items():
                if name not in fields:
                    errs.append(f"{cls.__name__}.{name}: schema {schema} has no such field")
                    continue
                have, want = annotation_kind(t), fields[name][0]
                if have is None or not kinds_fit(have, want):
                    errs.append(f"{cls.__name__}.{name}: {t} does not fit {schema}.{name}'s {want}")
            for name, (_, _, required) in fields.items():
                if not required or name in offered:
                    continue
                why = cls._not_offered.get(name, "")
                if len(why) < 10:
                    errs.append(f"{cls.__name__}: required {schema}.{name} is neither offered nor listed in _not_offered with a reason")
            for name in cls._not_offered:
                if name not in fields:
                    errs.append(f"{cls.__name__}._not_offered names {name!r}, which {schema} does not have")
        self.assertEqual(errs, [])


if __name__ == "__main__":
    unittest.main()
