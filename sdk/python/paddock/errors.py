"""Errors of the Paddock API as Python classes.

Every error answer has a stable ``code`` (docs/errors.md). ``error_from``
picks the class from the code (a finer code such as ``disk_exhausted`` maps
to its kind's class), and from the HTTP status when the code is missing or
unknown, as from a proxy's own page. Branch on the class or on ``.code``,
never on the message.
"""
from typing import Any, Dict, Optional, Type


class PaddockError(Exception):
    """A non-2xx answer (or an SSE error event) from the daemon."""

    kind = ""  # the code of this class's kind

    def __init__(self, status: int, code: str, message: str, body: Optional[Dict[str, Any]] = None):
        super().__init__(f"{status} {message}" if status else message)
        self.status = status
        self.code = code
        self.message = message
        self.body: Dict[str, Any] = body or {}


class InvalidArgument(PaddockError):
    kind = "invalid_argument"


class Unauthenticated(PaddockError):
    kind = "unauthenticated"


class Forbidden(PaddockError):
    kind = "forbidden"


class PolicyDenied(Forbidden):
    """The process policy refused the command: ``rule``, ``pattern``, ``piece``."""

    @property
    def rule(self) -> str:
        return str(self.body.get("rule", ""))

    @property
    def pattern(self) -> str:
        return str(self.body.get("pattern", ""))

    @property
    def piece(self) -> str:
        return str(self.body.get("piece", ""))


class BudgetExceeded(Forbidden):
    """A budget limit was reached: ``budget`` (the field), ``limit``, ``used``."""

    @property
    def budget(self) -> str:
        return str(self.body.get("budget", ""))

    @property
    def limit(self) -> int:
        return int(self.body.get("limit", 0))

    @property
    def used(self) -> float:
        return float(self.body.get("used", 0))


class NotFound(PaddockError):
    kind = "not_found"


class Conflict(PaddockError):
    kind = "conflict"


class RevisionMismatch(PaddockError):
    kind = "revision_mismatch"


class TooLarge(PaddockError):
    kind = "too_large"


class IdempotencyMismatch(PaddockError):
    kind = "idempotency_mismatch"


class ApprovalRequired(PaddockError):
    """The command waits for an operator: approve ``approval_id``, then repeat
    the call with ``approval_id=``."""

    kind = "approval_required"

    @property
    def approval_id(self) -> str:
        return str(self.body.get("approval_id", ""))

    @property
    def summary(self) -> str:
        return str(self.body.get("summary", ""))

    @property
    def matched(self) -> str:
        return str(self.body.get("matched", ""))


class TooManyRequests(PaddockError):
    """A stream cap is reached; ``limit`` is its value."""

    kind = "too_many_requests"

    @property
    def limit(self) -> int:
        return int(self.body.get("limit", 0))


class Internal(PaddockError):
    kind = "internal"


class NotImplementedByServer(PaddockError):
    kind = "not_implemented"


class BadGateway(PaddockError):
    kind = "bad_gateway"


class Unavailable(PaddockError):
    kind = "unavailable"


_KINDS: Dict[str, Type[PaddockError]] = {
    c.kind: c
    for c in (InvalidArgument, Unauthenticated, Forbidden, NotFound, Conflict, RevisionMismatch,
              TooLarge, IdempotencyMismatch, ApprovalRequired, TooManyRequests, Internal,
              NotImplementedByServer, BadGateway, Unavailable)
}

_STATUS: Dict[int, Type[PaddockError]] = {
    400: InvalidArgument, 401: Unauthenticated, 403: Forbidden, 404: NotFound, 409: Conflict,
    412: RevisionMismatch, 413: TooLarge, 422: IdempotencyMismatch, 428: ApprovalRequired,
    429: TooManyRequests, 500: Internal, 501: NotImplementedByServer, 502: BadGateway,
    503: Unavailable,
}

# Finer codes (docs/errors.md) that have a class of their own; the others
# take their status's class.
_FINER: Dict[str, Type[PaddockError]] = {
    "policy_refused": PolicyDenied,
    "budget_exceeded": BudgetExceeded,
    "stream_max_age": Unavailable,
    "session_ended": Conflict,
    "budgets_unavailable": Unavailable,
    "promote_incomplete": BadGateway,
}


def error_from(status: int, code: str, message: str, body: Optional[Dict[str, Any]] = None) -> PaddockError:
    """The error of an answer with this status, code and body."""
    cls = _FINER.get(code) or _KINDS.get(code)
    if cls is None:
        cls = _STATUS.get(status)
    if cls is None:
        cls = Internal if status >= 500 else PaddockError
    return cls(status, code or (cls.kind if cls is not PaddockError else ""), message, body)
