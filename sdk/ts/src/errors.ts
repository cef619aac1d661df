// Errors from the API's answers. Every non-2xx answer carries
// {"error": "...", "code": "..."} (docs/errors.md); the class is picked from
// the code first and the HTTP status second, so `instanceof Conflict` works
// for a finer code of the same kind (disk_exhausted is a Conflict).

/** The most of an error body kept on the error. */
export const MAX_ERROR_BODY = 64 << 10;

/** A refusal or failure answered by the daemon (or a proxy in front of it). */
export class PaddockError extends Error {
  /** The HTTP status; 0 for an SSE error event, which has none. */
  readonly status: number;
  /** The body's code: a kind's (conflict) or a finer one (disk_exhausted). */
  readonly code: string;
  /** The body as parsed JSON (an empty object when it was not JSON). */
  readonly body: Record<string, unknown>;
  constructor(status: number, code: string, message: string, body: Record<string, unknown> = {}) {
    super(message);
    this.name = new.target.name;
    this.status = status;
    this.code = code;
    this.body = body;
  }
}

export class InvalidArgument extends PaddockError {}
export class Unauthenticated extends PaddockError {}
export class Forbidden extends PaddockError {}
export class NotFound extends PaddockError {}
export class Conflict extends PaddockError {}
/** 412: the If-Match revision is stale. */
export class RevisionMismatch extends PaddockError {}
export class TooLarge extends PaddockError {}
/** 422: an Idempotency-Key was reused with another request. */
export class IdempotencyMismatch extends PaddockError {}
export class Internal extends PaddockError {}
export class NotImplemented extends PaddockError {}
export class BadGateway extends PaddockError {}
export class Unavailable extends PaddockError {}

/** 429: a stream cap or a rate; limit is the cap's value when given. */
export class TooManyRequests extends PaddockError {
  get limit(): number | undefined {
    return typeof this.body.limit === "number" ? this.body.limit : undefined;
  }
}

/** 428: the command waits for an operator's approval; run it again with approvalId once approved. */
export class ApprovalRequired extends PaddockError {
  get approvalId(): string {
    return String(this.body.approval_id ?? "");
  }
  get summary(): string {
    return String(this.body.summary ?? "");
  }
  /** The rule and pattern that asked, e.g. "process.ask: deploy *". */
  get matched(): string {
    return String(this.body.matched ?? "");
  }
  get expiresAt(): string {
    return String(this.body.expires_at ?? "");
  }
}

/** 403 policy_refused: the process policy refused the command. */
export class PolicyDenied extends Forbidden {
  /** The rule that decided: process.deny, process.not_allowed, process.empty or ext.<package>. */
  get rule(): string {
    return String(this.body.rule ?? "");
  }
  get pattern(): string {
    return String(this.body.pattern ?? "");
  }
  get piece(): string {
    return String(this.body.piece ?? "");
  }
}

/** 403 budget_exceeded: a budget of the session ran out. */
export class BudgetExceeded extends Forbidden {
  /** The Budget field, such as max_execs. */
  get budget(): string {
    return String(this.body.budget ?? "");
  }
  get limit(): number {
    return Number(this.body.limit ?? 0);
  }
  get used(): number {
    return Number(this.body.used ?? 0);
  }
}

type ErrorClass = new (status: number, code: string, message: string, body?: Record<string, unknown>) => PaddockError;

const byCode: Record<string, ErrorClass> = {
  invalid_argument: InvalidArgument,
  unauthenticated: Unauthenticated,
  forbidden: Forbidden,
  not_found: NotFound,
  conflict: Conflict,
  revision_mismatch: RevisionMismatch,
  too_large: TooLarge,
  idempotency_mismatch: IdempotencyMismatch,
  approval_required: ApprovalRequired,
  too_many_requests: TooManyRequests,
  internal: Internal,
  not_implemented: NotImplemented,
  bad_gateway: BadGateway,
  unavailable: Unavailable,
  policy_refused: PolicyDenied,
  budget_exceeded: BudgetExceeded,
};

const byStatus: Record<number, ErrorClass> = {
  400: InvalidArgument,
  401: Unauthenticated,
  403: Forbidden,
  404: NotFound,
  409: Conflict,
  412: RevisionMismatch,
  413: TooLarge,
  422: IdempotencyMismatch,
  428: ApprovalRequired,
  429: TooManyRequests,
  500: Internal,
  501: NotImplemented,
  502: BadGateway,
  503: Unavailable,
};

/**
 * The finer codes (docs/errors.md) with their status, so that an SSE error
 * event, which has no status, still gets its kind's class.
 * test/unit.test.mjs holds this table to docs/errors.md.
 */
export const FINER_CODES: Record<string, number> = {
  memory_above_host: 400, cpus_above_host: 400, fork_identity_unknown: 400,
  tenant_disk_limit: 403, tenant_memory_limit: 403, tenant_cpus_limit: 403,
  secret_ref_admin_only: 403, grant_needs_admin_or_tenant: 403, policy_refused: 403, budget_exceeded: 403,
  system_path: 403, exec_program: 403, permission_denied: 403, agent_process: 403,
  budgets_unavailable: 503,
  compute_budget_unmetered: 409, fork_identity_not_unique: 409, idempotency_in_flight: 409,
  not_fork_child: 409, no_baseline: 409, plan_changed: 409, promote_conflicts: 409, promote_too_large: 409,
  promote_incomplete: 502,
  changesets_full: 409, changeset_decided: 409, changeset_not_approved: 409, changeset_incomplete: 409, changeset_conflict: 409,
  disk_exhausted: 409, approval_command_too_long: 409,
  job_streams_session: 429, job_streams_tenant: 429, job_streams_daemon: 429,
  event_streams_session: 429, event_streams_tenant: 429, event_streams_daemon: 429,
};

/**
 * errorFrom builds the error for an answer's status and body text. A body
 * that is not the API's JSON (a proxy's page) becomes the message, and the
 * status alone picks the class.
 */
export function errorFrom(status: number, text: string): PaddockError {
  let body: Record<string, unknown> = {};
  try {
    const parsed: unknown = JSON.parse(text);
    if (parsed && typeof parsed === "object" && !Array.isArray(parsed)) body = parsed as Record<string, unknown>;
  } catch {
    // not JSON: the text is the message
  }
  const code = typeof body.code === "string" ? body.code : "";
  const message = typeof body.error === "string" && body.error !== "" ? body.error : text.trim().slice(0, 4096) || `HTTP ${status}`;
  const cls = byCode[code] ?? byStatus[status || FINER_CODES[code] || 0] ?? PaddockError;
  return new cls(status, code, message, body);
}
