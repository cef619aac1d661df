package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	apiv1 "paddock.dev/paddock/api"
)

// budgetHelp is the part of `session run --help` about --budget.
const budgetHelp = `Budget: --budget takes the session's limits as JSON, inline or from a
file (@FILE, or @- for stdin), every field optional:
  --budget '{"max_execs": 200, "max_exec_seconds": 1800, "max_jobs": 10,
             "max_concurrent_jobs": 2, "max_children": 8,
             "max_compute_seconds": 3600, "max_output_bytes": 1048576,
             "max_workspace_bytes": 1073741824}'
A command, job or fork past a limit is refused (403, exit code 5),
naming the limit and what was used; a command's timeout is lowered to the
seconds left. Fork children start with what is left of the budget.
paddock session get ID shows usage beside the limits.`

// budgetFromFlag reads --budget: JSON, @FILE or @- (stdin). Unknown
// fields are refused here, as the daemon would.
func budgetFromFlag(v string, stdin io.Reader) (*apiv1.Budget, error) {
	if v == "" {
		return nil, nil
	}
	raw := []byte(v)
	if name, ok := strings.CutPrefix(v, "@"); ok {
		var err error
		if name == "-" {
			raw, err = io.ReadAll(io.LimitReader(stdin, 1<<20))
		} else {
			raw, err = os.ReadFile(name)
		}
		if err != nil {
			return nil, usageError{fmt.Errorf("--budget %s: %w", v, err)}
		}
	}
	var b apiv1.Budget
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&b); err != nil {
		return nil, usageError{fmt.Errorf("--budget: want a JSON object such as {\"max_execs\": 100}: %w", err)}
	}
	if dec.More() {
		return nil, usageError{errors.New("--budget: one JSON object, nothing after it")}
	}
	return &b, nil
}

// usedOf is a count, "used/limit" when the budget limits it.
func usedOf(used int64, limit *int64) string {
	if limit == nil {
		return fmt.Sprint(used)
	}
	return fmt.Sprintf("%d/%d", used, *limit)
}

// printUsage shows what a session used beside its budget, and an
// interrupted lifecycle operation, under the session's table.
func printUsage(c *cobra.Command, s *apiv1.Session) {
	b := s.Budget
	if b == nil {
		b = &apiv1.Budget{}
	}
	u := s.Usage
	secs := func(ms int64) string { return (time.Duration(ms) * time.Millisecond).Round(time.Millisecond).String() }
	limitSecs := func(p *int64) string {
		if p == nil {
			return "-"
		}
		return (time.Duration(*p) * time.Second).String()
	}
	limitN := func(p *int64) string {
		if p == nil {
			return "-"
		}
		return fmt.Sprint(*p)
	}
	limitBytes := func(p *int64) string {
		if p == nil {
			return "-"
		}
		return humanSize(*p)
	}
	fmt.Fprintln(c.OutOrStdout())
	tw := newTable(c.OutOrStdout(), "USAGE", "USED", "LIMIT")
	tw.row("execs", u.Execs, limitN(b.MaxExecs))
	tw.row("exec time", secs(u.ExecMS), limitSecs(b.MaxExecSeconds))
	tw.row("jobs", u.Jobs, limitN(b.MaxJobs))
	tw.row("jobs at once", "", limitN(b.MaxConcurrentJobs))
	tw.row("compute (execs + jobs)", secs(u.ComputeMS), limitSecs(b.MaxComputeSeconds))
	tw.row("fork children", u.Children, limitN(b.MaxChildren))
	ws := "-"
	if u.WorkspaceBytes > 0 || b.MaxWorkspaceBytes != nil {
		ws = humanSize(u.WorkspaceBytes)
	}
	tw.row("workspace", ws, limitBytes(b.MaxWorkspaceBytes))
	tw.row("output per stream", "", limitBytes(b.MaxOutputBytes))
	tw.flush()
	if op := s.InterruptedOp; op != nil {
		fmt.Fprintf(c.OutOrStdout(), "\ninterrupted: a %s started %s did not finish (the daemon stopped mid-way); check the session before relying on it\n",
			cell(op.Op), op.StartedAt.Format(time.RFC3339))
	}
}

// humanSize is n bytes in the largest binary unit that keeps it ≥ 1.
func humanSize(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 4; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTP"[exp])
}
