package api

import (
	"errors"
	"net/http"

	"paddock.dev/paddock/errdefs"
	"paddock.dev/paddock/hostd/session"
)

// budgetBody is the 403 of a budget limit reached: the message, and the
// field, its limit and what was used, for a client to act on without
// parsing the message.
type budgetBody struct {
	Error  string  `json:"error"`
	Code   string  `json:"code"` // budget_exceeded
	Budget string  `json:"budget"`
	Limit  int64   `json:"limit"`
	Used   float64 `json:"used"`
}

// budgetError writes a session.BudgetError's answer; false for any other
// error.
func budgetError(w http.ResponseWriter, err error) bool {
	var be *session.BudgetError
	if !errors.As(err, &be) {
		return false
	}
	writeJSON(w, http.StatusForbidden, budgetBody{Error: err.Error(), Code: errdefs.Code(err), Budget: be.Budget, Limit: be.Limit, Used: be.Used})
	return true
}
