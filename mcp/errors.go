package mcp

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"paddock.dev/paddock/client"
	"paddock.dev/paddock/errdefs"
)

// toolError turns an API error into the text an agent reads in a tool's
// error result: the stable code first, what happened, then what to do
// next. The refusals that carry more than a message (a command held for
// approval, a budget reached, a policy rule) say what they carry.
func toolError(err error) error {
	var e *client.Error
	if !errors.As(err, &e) {
		// An error of the SDK's own orchestration (evaluate, rollout) is of
		// an errdefs kind: lead with its code like the API's errors.
		if code := errdefs.Code(err); code != "" && code != "internal" {
			return fmt.Errorf("%s: %v", code, err)
		}
		return err
	}
	switch e.Code {
	case "approval_required":
		var h struct {
			ApprovalID string    `json:"approval_id"`
			Summary    string    `json:"summary"`
			Matched    string    `json:"matched"`
			ExpiresAt  time.Time `json:"expires_at"`
		}
		if json.Unmarshal(e.Body, &h) == nil && h.ApprovalID != "" {
			return fmt.Errorf("approval_required: the command did not run: %s matched the policy rule %q, so an operator must approve it. "+
				"Approval id: %s (valid until %s). Either call the same tool again with the same command and approval_wait_seconds "+
				"(at most 120): the call waits for the decision and runs the command once it is approved; or, after it is approved, "+
				"call again with the same command and approval_id %q. "+
				"An operator approves it with session_approve or `paddock session approve SESSION %s`",
				h.Summary, h.Matched, h.ApprovalID, h.ExpiresAt.UTC().Format(time.RFC3339), h.ApprovalID, h.ApprovalID)
		}
	case "budget_exceeded":
		var b struct {
			Budget string  `json:"budget"`
			Limit  int64   `json:"limit"`
			Used   float64 `json:"used"`
		}
		if json.Unmarshal(e.Body, &b) == nil && b.Budget != "" {
			left := float64(b.Limit) - b.Used
			if left < 0 {
				left = 0
			}
			return fmt.Errorf("budget_exceeded: the session's %s budget is spent: used %g of %d (%g left). "+
				"Do not retry this session's spending calls; create a session with a larger budget or finish with what you have",
				b.Budget, b.Used, b.Limit, left)
		}
	case "policy_refused":
		var p struct {
			Rule    string `json:"rule"`
			Pattern string `json:"pattern"`
			Piece   string `json:"piece"`
		}
		if json.Unmarshal(e.Body, &p) == nil {
			return fmt.Errorf("policy_refused: the session's process policy refuses this command (rule %q, pattern %q, the part %q). "+
				"Retrying will not help: run something the policy allows", p.Rule, p.Pattern, p.Piece)
		}
	}
	code := e.Code
	if code == "" {
		code = fmt.Sprintf("http_%d", e.Status)
	}
	msg := strings.TrimSpace(e.Message)
	if hint := hints[e.Status]; hint != "" {
		return fmt.Errorf("%s (%d): %s. %s", code, e.Status, msg, hint)
	}
	return fmt.Errorf("%s (%d): %s", code, e.Status, msg)
}

// hints say what to do about an error of a status (docs/errors.md).
var hints = map[int]string{
	400: "Fix the input the message names, then call again.",
	401: "The server's token is not valid (revoked or expired): the server must be restarted with a valid token.",
	403: "This token may not do that: do not retry as is.",
	404: "Check the id or the path: a session may have expired or been deleted (session_list shows the live ones).",
	409: "The session's state does not allow this now: read it (session_get), then retry or change the request.",
	412: "The session changed: read it again, then retry.",
	413: "Send less: the message says the limit.",
	429: "Too many open streams or requests: wait, then retry.",
	500: "The daemon failed: retry later.",
	502: "The sandbox did not answer: retry; check the session (session_get).",
	503: "The daemon is busy or missing a service: retry later.",
}
