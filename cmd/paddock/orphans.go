//go:build linux

package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"paddock.dev/paddock/hostd/session"
	"paddock.dev/paddock/hypervisor"
)

// emptyCgroupGrace is how old a procbox cgroup with no process must be to
// count as left over: a sandbox being made has one for a moment before
// its init joins it.
const emptyCgroupGrace = time.Minute

// orphanRow is one sandbox found on the host, as `sandbox orphans` shows it.
type orphanRow struct {
	hypervisor.HostSandbox
	Status string `json:"status"`
	Orphan bool   `json:"orphan"`
	// With --stop: whether it was stopped, or why not.
	Stopped bool   `json:"stopped,omitempty"`
	Error   string `json:"error,omitempty"`
}

// classifyHostSandbox says whether a sandbox found on the host is an
// orphan (nothing will ever stop it: its state dir or its record there is
// gone, or it is an empty cgroup left over) and why, or whose it is.
func classifyHostSandbox(h hypervisor.HostSandbox, now time.Time) (status string, orphan bool) {
	switch {
	case h.StateDir == "" && len(h.PIDs) == 0:
		if !h.Started.IsZero() && now.Sub(h.Started) > emptyCgroupGrace {
			return "orphan: an empty cgroup", true
		}
		return "an empty cgroup just made (a sandbox starting)", false
	case h.StateDir == "":
		return "state dir unknown (left alone)", false
	}
	if fi, err := os.Stat(h.StateDir); err != nil || !fi.IsDir() {
		return "orphan: its state dir is gone", true
	}
	switch {
	case !h.Record:
		return "orphan: its record in the state dir is gone", true
	case hypervisor.LockHeld(filepath.Join(h.StateDir, "serve.lock")):
		return "owned by a running daemon", false
	case h.Owned:
		return "owned by a running process", false
	case h.Adoptable:
		return "left for the next daemon on its state dir to adopt", false
	default:
		return "left by a process that ended; the next paddock on its state dir removes it", false
	}
}

func newOrphansCmd(g *globals) *cobra.Command {
	var stop, all bool
	c := &cobra.Command{
		Use:   "orphans [--stop] [ID...]",
		Short: "Find (and with --stop, stop) sandboxes whose state dir is gone",
		Long: `List the sandboxes running on this host that nothing will ever stop: their
state dir was removed (or their record in it), typically after a
` + "`paddock serve`" + ` stopped without --stop-sandboxes. procbox sandboxes are
found by their cgroups (/paddock/<id>) and the agent socket their processes
hold, qemu ones by the QEMU command line (its QMP socket in
<state>/qemu/run/). --all lists every sandbox found, with whose it is.

--stop kills the orphans (all of them, or the IDs given), removes their
cgroups and waits for them to go; their files went with the state dir.
Sandboxes whose state dir exists are never stopped: those of a running
daemon or process, and those left for the next daemon to adopt (start it,
then stop it with --stop-sandboxes). Needs root.`,
		Example: `  paddock sandbox orphans
  paddock sandbox orphans --all --json
  paddock sandbox orphans --stop
  paddock sandbox orphans --stop ses-3fe0226d8ae409be`,
		RunE: func(c *cobra.Command, ids []string) error {
			if os.Geteuid() != 0 {
				return errors.New("sandbox orphans needs root: it reads every process's descriptors and the sandbox cgroups")
			}
			if len(ids) > 256 {
				return usageError{fmt.Errorf("%d ids: at most 256", len(ids))}
			}
			found, err := hypervisor.ScanHost()
			if err != nil {
				fmt.Fprintln(c.ErrOrStderr(), "paddock: warning: scan:", err)
			}
			now := time.Now()
			rows := make([]orphanRow, 0, len(found))
			for _, h := range found {
				st, orphan := classifyHostSandbox(h, now)
				rows = append(rows, orphanRow{HostSandbox: h, Status: st, Orphan: orphan})
			}
			if len(ids) > 0 {
				var picked []orphanRow
				for _, id := range ids {
					i := slices.IndexFunc(rows, func(r orphanRow) bool { return r.ID == id })
					if i < 0 {
						return notFoundError{fmt.Errorf("no sandbox %s runs on this host", id)}
					}
					if stop && !rows[i].Orphan {
						return conflictError{fmt.Errorf("sandbox %s is not an orphan (%s): not stopped", id, rows[i].Status)}
					}
					picked = append(picked, rows[i])
				}
				rows = picked
			} else if !all || stop {
				rows = slices.DeleteFunc(rows, func(r orphanRow) bool { return !r.Orphan })
			}
			var failed int
			if stop {
				for i := range rows {
					if err := rows[i].Stop(); err != nil {
						rows[i].Error = err.Error()
						failed++
					} else {
						rows[i].Stopped = true
						g.logger().Info("stopped an orphaned sandbox", "backend", rows[i].Backend, "sandbox", rows[i].ID,
							"state_dir", rows[i].StateDir, "status", rows[i].Status)
					}
				}
			}
			if g.json {
				if err := json.NewEncoder(c.OutOrStdout()).Encode(rows); err != nil {
					return err
				}
			} else {
				printOrphans(c.OutOrStdout(), c.ErrOrStderr(), rows, stop, all || len(ids) > 0, len(found), now)
			}
			if failed > 0 {
				return fmt.Errorf("%d of %d orphans could not be stopped", failed, len(rows))
			}
			return nil
		},
	}
	c.Flags().BoolVar(&stop, "stop", false, "stop the orphans (all, or the IDs given); a sandbox that is not one is refused")
	c.Flags().BoolVar(&all, "all", false, "list every sandbox found on this host, not only the orphans")
	return c
}

// printOrphans is the table for people.
func printOrphans(out, errw io.Writer, rows []orphanRow, stop, all bool, found int, now time.Time) {
	if len(rows) == 0 {
		if all {
			fmt.Fprintln(errw, "paddock: no sandbox runs on this host")
		} else {
			fmt.Fprintf(errw, "paddock: no orphaned sandbox on this host (%d running, each with its state dir; --all lists them)\n", found)
		}
		return
	}
	head := []string{"BACKEND", "ID", "STATE DIR", "PIDS", "AGE", "STATUS"}
	if stop {
		head = append(head, "RESULT")
	}
	tw := newTable(out, head...)
	orphans := 0
	for _, r := range rows {
		if r.Orphan {
			orphans++
		}
		dir, age := r.StateDir, "-"
		if dir == "" {
			dir = "-"
		}
		if !r.Started.IsZero() {
			age = now.Sub(r.Started).Round(time.Second).String()
		}
		pids := make([]string, 0, 3)
		for i, p := range r.PIDs {
			if i == 3 {
				pids = append(pids, fmt.Sprintf("+%d", len(r.PIDs)-3))
				break
			}
			pids = append(pids, fmt.Sprint(p))
		}
		cells := []any{r.Backend, r.ID, dir, strings.Join(pids, ","), age, r.Status}
		if stop {
			res := "stopped"
			if !r.Stopped {
				res = "failed: " + r.Error
			}
			cells = append(cells, res)
		}
		tw.row(cells...)
	}
	tw.flush()
	if !stop && orphans > 0 {
		fmt.Fprintln(errw, "paddock: stop them with `paddock sandbox orphans --stop` (or name the ones to stop)")
	}
}

// maxLeftListed caps how many sandboxes the exit message names.
const maxLeftListed = 20

// reportLeftRunning says, in the log and on stderr, what a daemon that
// stopped without --stop-sandboxes left running, and how to stop it.
func reportLeftRunning(errw io.Writer, log *slog.Logger, stateDir string, left []session.LeftRunning) {
	if len(left) == 0 {
		return
	}
	names := make([]string, 0, min(len(left), maxLeftListed)+1)
	ids := make([]string, 0, len(names))
	backends := map[string]int{}
	for i, l := range left {
		b := l.Backend
		if b == "" {
			b = "unknown backend"
		}
		backends[b]++
		if i < maxLeftListed {
			names = append(names, fmt.Sprintf("%s (%s)", l.Sandbox, b))
			ids = append(ids, l.Sandbox)
		}
	}
	if len(left) > maxLeftListed {
		names = append(names, fmt.Sprintf("and %d more", len(left)-maxLeftListed))
	}
	log.Info("left sandboxes running for the next start on this state dir to adopt", "count", len(left),
		"sandboxes", ids, "backends", backends, "state_dir", stateDir)
	fmt.Fprintf(errw, "paddock: left %d sandbox(es) running for the next `paddock serve` on %s to adopt: %s\n",
		len(left), stateDir, strings.Join(names, ", "))
	fmt.Fprintf(errw, "paddock: to stop them, start the daemon again and stop it with --stop-sandboxes (paddock --state-dir %s serve --stop-sandboxes);\n", stateDir)
	fmt.Fprintln(errw, "paddock: if the state dir is removed first, `paddock sandbox orphans --stop` (as root) finds and stops them")
}
