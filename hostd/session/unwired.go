package session

// Unwired names the seams a sibling fills that are still empty on this
// Manager: "approvals" (SetApprovals), "budgets" (SetBudgets), "egress
// log" (SetEgressLog) and "sandbox hooks" (SetSandboxHooks). Each one
// fails closed when empty (a command that needs it is refused), so a
// missing one does not let anything through, but it does turn a feature
// off without a word; hostd/daemon refuses to start with any of them
// empty, so a wiring line lost in a refactor fails every daemon test.
func (m *Manager) Unwired() []string {
	var out []string
	if m.approvalsService() == nil {
		out = append(out, "approvals")
	}
	if m.budgetsService() == nil {
		out = append(out, "budgets")
	}
	if m.currentEgressLog() == nil {
		out = append(out, "egress log")
	}
	if m.sandboxHooks() == nil {
		out = append(out, "sandbox hooks")
	}
	return out
}
