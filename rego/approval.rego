# Decides who may act on a session's approval requests (commands held by
# a process.ask pattern), and how long a request lives.
#
# Input (policy.ApprovalInput):
#
#   {"action": "request" | "decide",
#    "actor": {"kind": "admin" | "tenant" | "session", "name", "tenant", "session"},
#    "session_tenant": "…",
#    "requester": {"kind", "name", "tenant", "session"}}
#
# Output: decision, {allow, rule, reason, ttl_seconds}.
#
#   "request": a new approval request may be opened and lives
#     ttl_seconds (600: ten minutes).
#   "decide": only an admin may approve or deny. A tenant is refused (its
#     own agents' commands are what the approval guards), and so is a
#     session token: an agent must never approve its own command.
package paddock.approval

# request_ttl_seconds is how long a new approval request lives.
request_ttl_seconds := 600

actor_kind := object.get(input, ["actor", "kind"], "")

decision := {
	"allow": true,
	"rule": "approval.request",
	"reason": "",
	"ttl_seconds": request_ttl_seconds,
} if {
	input.action == "request"
}

else := {
	"allow": true,
	"rule": "approval.admin",
	"reason": "",
	"ttl_seconds": 0,
} if {
	input.action == "decide"
	actor_kind == "admin"
}

else := {
	"allow": false,
	"rule": "approval.not_self",
	"reason": "a session token cannot approve or deny: an agent must not decide on its own command; ask an admin",
	"ttl_seconds": 0,
} if {
	input.action == "decide"
	actor_kind == "session"
}

else := {
	"allow": false,
	"rule": "approval.admin_only",
	"reason": sprintf("only an admin may approve or deny a held command, not a %s; ask an admin", [actor_text]),
	"ttl_seconds": 0,
} if {
	input.action == "decide"
}

else := {
	"allow": false,
	"rule": "approval.action",
	"reason": sprintf("approval action %q is unknown; use \"request\" or \"decide\"", [object.get(input, "action", "")]),
	"ttl_seconds": 0,
}

actor_text := "tenant" if actor_kind == "tenant"

else := sprintf("caller of kind %q", [actor_kind])
