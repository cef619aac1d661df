# Tests for approval.rego: an allow and a deny case for every rule.
package paddock.approval_test

import data.paddock.approval

admin := {"kind": "admin", "name": "admin"}

tenant := {"kind": "tenant", "name": "acme", "tenant": "acme"}

agent := {"kind": "session", "name": "tok-1", "tenant": "acme", "session": "ses-1"}

decide_as(actor) := d if {
	d := approval.decision with input as {"action": "decide", "actor": actor, "session_tenant": "acme", "requester": agent}
}

# approval.request

test_request_lives_ten_minutes if {
	d := approval.decision with input as {"action": "request", "actor": agent, "requester": agent}
	d.allow
	d.rule == "approval.request"
	d.ttl_seconds == 600
}

test_request_is_not_a_decision if {
	d := approval.decision with input as {"action": "request", "actor": tenant}
	d.rule != "approval.admin"
}

# approval.admin

test_admin_may_decide if {
	d := decide_as(admin)
	d.allow
	d.rule == "approval.admin"
}

test_admin_rule_needs_an_admin if {
	d := decide_as({"kind": "Admin"})
	not d.allow
	d.rule == "approval.admin_only"
}

# approval.admin_only

test_tenant_may_not_decide if {
	d := decide_as(tenant)
	not d.allow
	d.rule == "approval.admin_only"
	contains(d.reason, "not a tenant")
}

test_unknown_actor_may_not_decide if {
	d := decide_as({"kind": "robot"})
	not d.allow
	d.rule == "approval.admin_only"
	contains(d.reason, `"robot"`)
}

test_missing_actor_may_not_decide if {
	d := approval.decision with input as {"action": "decide"}
	not d.allow
}

# approval.not_self

test_session_token_may_not_decide if {
	d := decide_as(agent)
	not d.allow
	d.rule == "approval.not_self"
}

test_session_token_of_another_session_may_not_decide_either if {
	d := decide_as({"kind": "session", "name": "tok-2", "session": "ses-2"})
	not d.allow
	d.rule == "approval.not_self"
}

# approval.action

test_unknown_action_is_refused if {
	d := approval.decision with input as {"action": "delete", "actor": admin}
	not d.allow
	d.rule == "approval.action"
}

test_missing_action_is_refused if {
	d := approval.decision with input as {"actor": admin}
	not d.allow
	d.rule == "approval.action"
}
