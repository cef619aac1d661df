"""Paddock's Python SDK: sessions, exec, files, jobs, fork and promote,
approvals and events over the daemon's public HTTP API, with the standard
library only."""
from ._http import Event
from .client import ExecResult, JobFollow, EventStream, Output, Paddock, Sandbox, Session
from .errors import (ApprovalRequired, BadGateway, BudgetExceeded, Conflict, Forbidden, IdempotencyMismatch, Internal,
                     InvalidArgument, NotFound, NotImplementedByServer, PaddockError, PolicyDenied, RevisionMismatch,
                     TooLarge, TooManyRequests, Unauthenticated, Unavailable, error_from)

__all__ = [
    "Paddock", "Session", "Sandbox", "ExecResult", "Output", "JobFollow", "EventStream", "Event", "error_from",
    "PaddockError", "InvalidArgument", "Unauthenticated", "Forbidden", "PolicyDenied", "BudgetExceeded", "NotFound",
    "Conflict", "RevisionMismatch", "TooLarge", "IdempotencyMismatch", "ApprovalRequired", "TooManyRequests",
    "Internal", "NotImplementedByServer", "BadGateway", "Unavailable",
]
__version__ = "0.1.0"
