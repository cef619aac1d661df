package session

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path"
	"slices"
	"strings"

	"paddock.dev/paddock/guest/api"
	"paddock.dev/paddock/guest/client"
	"paddock.dev/paddock/hypervisor"
	"paddock.dev/paddock/hypervisor/image"
	"paddock.dev/paddock/policy"
)

// process.enforce "exec": the programs the allow and ask patterns name
// are the only ones the guest kernel lets start (Landlock's execute right,
// applied by `paddock-guest confine` to every exec, job and git call); the
// shell, true and the dynamic loader are added by the guest. Argument
// patterns stay string rules.

// binDirs are searched, in order, for a program named without a path.
var binDirs = []string{"/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"}

// firstWords are the programs a process policy's allow and ask patterns
// name: the first word of each, once each, in order.
func firstWords(r *policy.ProcessRules) []string {
	var out []string
	for _, p := range slices.Concat(r.Allow, r.Ask) {
		f := strings.Fields(p)
		if len(f) > 0 && !slices.Contains(out, f[0]) {
			out = append(out, f[0])
		}
	}
	return out
}

// checkEnforceable refuses, before a sandbox is made, what the execute
// list cannot hold: a program named with a wildcard or a relative path.
func checkEnforceable(r *policy.ProcessRules) error {
	if r == nil || r.Enforce == "" {
		return nil
	}
	if r.Enforce != "exec" {
		return bad("policy.process.enforce %q: the only value is \"exec\"", r.Enforce)
	}
	names := firstWords(r)
	if len(names) == 0 {
		return bad("policy.process.enforce \"exec\" needs allow or ask patterns: their first words are the programs that may run")
	}
	for _, n := range names {
		switch {
		case strings.ContainsAny(n, "*?[]{}"):
			return bad("policy.process: %q cannot be enforced: the first word of a pattern must be a program name or an absolute path, without wildcards", n)
		case strings.Contains(n, "/") && !path.IsAbs(n):
			return bad("policy.process: %q is a relative path: name a program (looked up in %s) or give its absolute path", n, strings.Join(binDirs, ":"))
		case path.IsAbs(n) && path.Clean(n) != n:
			return bad("policy.process: %q is not a clean absolute path", n)
		}
	}
	return nil
}

// resolvePrograms finds each program of an enforced policy in the guest:
// an absolute path must be a file there; a bare name is the first match in
// binDirs. A program the guest does not have refuses the session.
func resolvePrograms(ctx context.Context, c *client.Client, r *policy.ProcessRules) ([]string, error) {
	var out []string
	for _, n := range firstWords(r) {
		cands := []string{n}
		if !path.IsAbs(n) {
			cands = cands[:0]
			for _, d := range binDirs {
				cands = append(cands, d+"/"+n)
			}
		}
		found := ""
		for _, p := range cands {
			real, err := regularFile(ctx, c, p)
			if err != nil {
				return nil, fmt.Errorf("looking for %s in the sandbox: %w", n, err)
			}
			if real != "" {
				found = real
				break
			}
		}
		if found == "" {
			return nil, bad("policy.process: program %q is not in the sandbox's image (looked in %s)", n, strings.Join(cands, ", "))
		}
		if !slices.Contains(out, found) {
			out = append(out, found)
		}
	}
	return out, nil
}

// regularFile follows p's symbolic links in the guest (at most 8) and
// returns the regular file they end at, or "" when p does not exist or
// ends at something else: a link to a directory (/bin on merged-usr
// images) must never put a whole directory on the execute list.
func regularFile(ctx context.Context, c *client.Client, p string) (string, error) {
	for range 8 {
		fi, err := c.Stat(ctx, p)
		if err != nil {
			if ge := (*client.Error)(nil); errors.As(err, &ge) && (ge.Status == http.StatusNotFound || ge.Status == http.StatusBadRequest) {
				return "", nil
			}
			return "", err
		}
		switch fi.Type {
		case "file":
			return p, nil
		case "symlink":
			t := fi.Target
			if !path.IsAbs(t) {
				t = path.Join(path.Dir(p), t)
			}
			p = path.Clean(t)
		default:
			return "", nil
		}
	}
	return "", nil
}

// confinement is what every command of s runs under: the read-only
// workspace policy, the execute list of an enforced process policy, both,
// or nothing.
func confinement(s *Session) *api.Confinement {
	var c *api.Confinement
	if s.Workspace.Mode == ModeReadOnly {
		c = readOnlyConfinement(s.Workspace.Path)
	}
	if len(s.Policy.ExecPrograms) > 0 {
		if c == nil {
			c = writableConfinement(s.Workspace.Path)
		}
		c.Exec = slices.Clone(s.Policy.ExecPrograms)
	}
	return c
}

// writableConfinement is the default filesystem confinement an execute
// list comes with: the workspace, /tmp, /var/tmp and the guest user's
// home writable, the system read-only.
func writableConfinement(ws string) *api.Confinement {
	c := &api.Confinement{Enforcement: "strict"}
	for _, d := range []string{ws, "/tmp", "/var/tmp", image.GuestHome} {
		if !slices.ContainsFunc(c.ReadWrite, func(have string) bool { return pathWithin(d, have) }) {
			c.ReadWrite = append(c.ReadWrite, d)
		}
	}
	return c
}

// probeExecList runs a command under s's confinement and checks the guest
// enforced the execute list.
func probeExecList(ctx context.Context, c *client.Client, s *Session) error {
	res, err := c.Exec(ctx, api.ExecRequest{Command: api.Command{Shell: ":", Cwd: s.Workspace.Path, TimeoutSeconds: 30, Confine: confinement(s)}})
	if err != nil {
		return err
	}
	if res.ExitCode != 0 || res.Confinement == nil || !res.Confinement.ExecAllowlist {
		return fmt.Errorf("the sandbox did not enforce the execute list (exit %d, %s)", res.ExitCode, strings.TrimSpace(string(res.Stderr)))
	}
	return nil
}

// processChecker is what an engine offers beyond Decider to check a
// process policy at create (policy.Engine has it).
type processChecker interface {
	ValidateProcess(policy.ProcessRules) error
}

// checkProcess refuses a process policy that cannot be held: no engine,
// rules the engine refuses, an execute list the backend cannot enforce.
func (m *Manager) checkProcess(r *policy.ProcessRules, caps hypervisor.Capabilities) error {
	if r == nil {
		return nil
	}
	if m.policy == nil {
		return fmt.Errorf("%w: this daemon has no policy engine, so it cannot judge policy.process", ErrConflict)
	}
	if v, ok := m.policy.(processChecker); ok {
		if err := v.ValidateProcess(*r); err != nil {
			return bad("policy.process: %v", err)
		}
	}
	if err := checkEnforceable(r); err != nil {
		return err
	}
	if r.Enforce == "exec" && !caps.Confinement {
		return fmt.Errorf("%w: process.enforce \"exec\" needs Landlock in the sandbox, which this backend does not have", ErrConflict)
	}
	return nil
}
