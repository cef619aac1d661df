"""Writes paddock/aio.pyi, the types of the asyncio variant, from the
blocking classes in paddock/client.py: each public method of Paddock,
Session, Sandbox, Files, Jobs and Git, with the same parameters, answers
an awaitable of what the blocking method answers (a Session as an
AsyncSession, a stream as an AsyncStream). tests/test_aio_offline.py fails
when aio.pyi differs from a fresh generation.

Run from sdk/python: python3 _build/aio_stub.py
"""
import ast
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CLIENT = os.path.join(ROOT, "paddock", "client.py")
OUT = os.path.join(ROOT, "paddock", "aio.pyi")

# Blocking class -> its async class in the stub.
CLASSES = {"Paddock": "AsyncPaddock", "Session": "AsyncSession", "Sandbox": "AsyncSandbox",
           "Files": "AsyncFiles", "Jobs": "AsyncJobs", "Git": "AsyncGit"}
# Answers that change type on the async side.
RENAME = {"Session": "AsyncSession", "Sandbox": "AsyncSandbox", "JobFollow": "AsyncStream[Output]",
          "EventStream": "AsyncStream[Event]"}

HEADER = '''"""Types of paddock.aio (see aio.py). Generated from paddock/client.py by
_build/aio_stub.py; do not edit: tests/test_aio_offline.py fails when it
is stale."""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any, AsyncIterator, BinaryIO, Callable, Dict, Generator, Generic, List, Optional, TypeVar, Union

from . import client
from . import models as m
from ._http import Event
from .client import ExecResult, Output

DEFAULT_THREADS: int
_T = TypeVar("_T")


class _Runner:
    pool: ThreadPoolExecutor


class _Call(Generic[_T]):
    """An awaitable call; ``async with`` when it answers a session or sandbox."""

    def __await__(self) -> Generator[Any, None, _T]: ...
    async def __aenter__(self) -> _T: ...
    async def __aexit__(self, *exc: Any) -> None: ...


class AsyncStream(Generic[_T]):
    exit_code: Optional[int]
    state: Optional[str]
    signal: Optional[str]
    job: Optional[str]
    last_event_id: Any
    resumes: int

    def __aiter__(self) -> "AsyncStream[_T]": ...
    async def __anext__(self) -> _T: ...
    def drop(self) -> None: ...
    async def aclose(self) -> None: ...
    async def run(self) -> "AsyncStream[_T]": ...
'''


class _Rename(ast.NodeTransformer):
    def visit_Name(self, node: ast.Name) -> ast.AST:
        if node.id in RENAME:
            return ast.parse(RENAME[node.id], mode="eval").body
        return node

    def visit_Constant(self, node: ast.Constant) -> ast.AST:
        if isinstance(node.value, str) and node.value in RENAME:
            return ast.parse(RENAME[node.value], mode="eval").body
        return node


def _args(fn: ast.FunctionDef) -> str:
    """The parameters, with defaults written as ... (a stub's way)."""
    a = fn.args
    for i in range(len(a.defaults)):
        a.defaults[i] = ast.Constant(value=...)
    for i, d in enumerate(a.kw_defaults):
        if d is not None:
            a.kw_defaults[i] = ast.Constant(value=...)
    return ast.unparse(a)


def generate() -> str:
    with open(CLIENT) as f:
        tree = ast.parse(f.read())
    classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
    out = [HEADER]
    for name, aname in CLASSES.items():
        cls = classes[name]
        out.append(f"\n\nclass {aname}:")
        if name == "Paddock":
            out.append("    url: str")
            out.append("    _sync: client.Paddock")
            out.append("    _runner: _Runner")
            out.append("    def __init__(self, url: Optional[str] = ..., token: Optional[str] = ..., ca: Optional[str] = ...,"
                       " timeout: float = ..., max_threads: int = ...) -> None: ...")
            out.append("    async def __aenter__(self) -> \"AsyncPaddock\": ...")
            out.append("    async def __aexit__(self, *exc: Any) -> None: ...")
            out.append("    async def aclose(self) -> None: ...")
        elif name in ("Session", "Sandbox"):
            out.append("    id: str")
            out.append(f"    info: m.{name}")
            out.append(f"    _sync: client.{name}")
            out.append("    _runner: _Runner")
            if name == "Session":
                out.append("    files: AsyncFiles")
                out.append("    jobs: AsyncJobs")
                out.append("    git: AsyncGit")
            out.append(f"    def __init__(self, sync: client.{name}, runner: _Runner) -> None: ...")
            out.append(f"    async def __aenter__(self) -> \"{aname}\": ...")
            out.append("    async def __aexit__(self, *exc: Any) -> None: ...")
        for node in cls.body:
            if not isinstance(node, ast.FunctionDef) or node.name.startswith("_"):
                continue
            if any(isinstance(d, ast.Name) and d.id == "property" for d in node.decorator_list):
                ret = ast.unparse(_Rename().visit(node.returns)) if node.returns else "Any"
                out.append(f"    @property\n    def {node.name}(self) -> {ret}: ...")
                continue
            ret = ast.unparse(_Rename().visit(node.returns)) if node.returns else "Any"
            out.append(f"    def {node.name}({_args(node)}) -> _Call[{ret}]: ...")
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    text = generate()
    if "--check" in sys.argv:
        with open(OUT) as f:
            sys.exit(0 if f.read() == text else 1)
    with open(OUT, "w") as f:
        f.write(text)
