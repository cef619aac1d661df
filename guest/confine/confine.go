// Package confine is the confinement `paddock-guest confine` applies to
// itself just before it execs a command: no_new_privs, resource limits, a
// Landlock filesystem ruleset (with an optional executable allow-list) and
// a seccomp deny-list filter. Whatever it sets up is inherited by the
// command and every process the command starts, and none of it can be
// undone from inside.
//
// The policy comes in as an api.Confinement and what was really enforced
// goes back as an api.ConfineReport, so the agent can tell the host.
//
//	paddock-guest confine --policy-fd 3 --report-fd 4 -- CMD ARGS...
//
// The protocol with the agent is the one guest/api documents: the policy
// arrives on one descriptor, the report leaves on another once the policy
// is in force, and the report descriptor reaches EOF when the command
// starts. When the command cannot be started (bad policy, a strict policy
// the kernel cannot enforce, a command that is missing or not executable
// under the policy) no report is written, the reason goes to stderr and
// the exit status is api.ConfineExitRefused (126).
package confine

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"paddock.dev/paddock/guest/api"
)

// Enforcement modes of api.Confinement.Enforcement.
const (
	Strict     = "strict"
	BestEffort = "best-effort"
)

// ExitRefused is Main's exit status when the command never ran.
const ExitRefused = api.ConfineExitRefused

// Sentinel errors; Apply wraps them with the details.
var (
	// ErrBadPolicy means the policy itself is malformed.
	ErrBadPolicy = errors.New("invalid confinement policy")
	// ErrNotEnforceable means the kernel cannot enforce what strict mode
	// requires (or what the exec allow-list requires in any mode).
	ErrNotEnforceable = errors.New("confinement cannot be enforced on this kernel")
	// ErrUnsupported means this build or OS has no confinement at all.
	ErrUnsupported = errors.New("confinement is not supported on this platform")
)

// maxPolicyBytes bounds the policy read from a descriptor or file.
const maxPolicyBytes = api.ConfineMaxPolicyBytes

// rlimitNames are the resource limits a policy may set, by wire name.
var rlimitNames = []string{"nofile", "nproc", "fsize", "core", "as", "cpu", "stack", "memlock"}

// Main runs `paddock-guest confine`. args are the arguments after the
// subcommand name. It returns only when the command could not be
// started; otherwise the process image is replaced by the command.
func Main(args []string) int {
	opts, err := parseArgs(args)
	if err != nil {
		return refuse(err)
	}
	policy, err := opts.readPolicy()
	if err != nil {
		return refuse(err)
	}
	// Resolve the command before confinement: the PATH walk needs to
	// see directories the policy may hide.
	path, err := lookPath(opts.argv[0])
	if err != nil {
		return refuse(err)
	}
	report, err := Apply(policy)
	if err != nil {
		return refuse(err)
	}
	// Ask the kernel whether the exec would be allowed before the report
	// says the command is starting.
	if err := execCheck(path); err != nil {
		return refuse(execError(path, err, report))
	}
	if err := opts.writeReport(report); err != nil {
		return refuse(err)
	}
	err = syscall.Exec(path, opts.argv, os.Environ())
	return refuse(execError(path, err, report))
}

func execError(path string, err error, r api.ConfineReport) error {
	if errors.Is(err, syscall.EACCES) && r.ExecAllowlist {
		return fmt.Errorf("exec %s: %w (not in the executable allow-list?)", path, err)
	}
	return fmt.Errorf("exec %s: %w", path, err)
}

func refuse(err error) int {
	fmt.Fprintf(os.Stderr, "paddock-guest confine: %v\n", err)
	return ExitRefused
}

// options are the parsed command line of Main.
type options struct {
	policyFD   int
	policyFile string
	policyJSON string
	reportFD   int
	argv       []string
}

func parseArgs(args []string) (*options, error) {
	o := &options{}
	fs := flag.NewFlagSet("confine", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.IntVar(&o.policyFD, "policy-fd", -1, "read the policy JSON from this descriptor to EOF")
	fs.StringVar(&o.policyFile, "policy", "", "read the policy JSON from this file")
	fs.StringVar(&o.policyJSON, "policy-json", "", "the policy JSON itself")
	fs.IntVar(&o.reportFD, "report-fd", -1, "write the enforcement report JSON to this descriptor and close it")
	if err := fs.Parse(args); err != nil {
		return nil, fmt.Errorf("%w; usage: confine (--policy-fd N | --policy FILE | --policy-json JSON) [--report-fd N] -- CMD [ARGS...]", err)
	}
	sources := 0
	for _, set := range []bool{o.policyFD >= 0, o.policyFile != "", o.policyJSON != ""} {
		if set {
			sources++
		}
	}
	if sources != 1 {
		return nil, errors.New("give exactly one of --policy-fd, --policy and --policy-json")
	}
	o.argv = fs.Args()
	if len(o.argv) == 0 || o.argv[0] == "" {
		return nil, errors.New("no command given after --")
	}
	if o.reportFD >= 0 && o.reportFD <= 2 {
		return nil, fmt.Errorf("--report-fd %d would overwrite a standard stream; use 3 or higher", o.reportFD)
	}
	return o, nil
}

func (o *options) readPolicy() (api.Confinement, error) {
	var data []byte
	var err error
	switch {
	case o.policyJSON != "":
		data = []byte(o.policyJSON)
	case o.policyFile != "":
		data, err = readLimited(o.policyFile, nil)
	default:
		f := os.NewFile(uintptr(o.policyFD), "policy")
		if f == nil {
			return api.Confinement{}, fmt.Errorf("--policy-fd %d is not a descriptor", o.policyFD)
		}
		data, err = readLimited("", f)
		f.Close()
	}
	if err != nil {
		return api.Confinement{}, fmt.Errorf("read policy: %w", err)
	}
	return ParsePolicy(data)
}

func readLimited(name string, f *os.File) ([]byte, error) {
	if f == nil {
		var err error
		if f, err = os.Open(name); err != nil {
			return nil, err
		}
		defer f.Close()
	}
	data, err := io.ReadAll(io.LimitReader(f, maxPolicyBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxPolicyBytes {
		return nil, fmt.Errorf("policy is larger than %d bytes", maxPolicyBytes)
	}
	return data, nil
}

// ParsePolicy decodes a policy. Unknown fields are refused: a guest older
// than the host must not silently drop a restriction it does not know.
func ParsePolicy(data []byte) (api.Confinement, error) {
	var p api.Confinement
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return api.Confinement{}, fmt.Errorf("%w: %v", ErrBadPolicy, err)
	}
	if dec.More() {
		return api.Confinement{}, fmt.Errorf("%w: trailing data after the JSON object", ErrBadPolicy)
	}
	return p, nil
}

// writeReport writes the report and leaves the descriptor open but
// close-on-exec, so its reader sees EOF exactly when the command starts
// (or when confine exits without starting it).
func (o *options) writeReport(r api.ConfineReport) error {
	if o.reportFD < 0 {
		return nil
	}
	data, err := json.Marshal(r)
	if err != nil {
		return err
	}
	if len(data) > api.ConfineMaxReportBytes {
		return fmt.Errorf("report is %d bytes, more than %d", len(data), api.ConfineMaxReportBytes)
	}
	for len(data) > 0 {
		n, err := syscall.Write(o.reportFD, data)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return fmt.Errorf("write report to fd %d: %w", o.reportFD, err)
		}
		data = data[n:]
	}
	syscall.CloseOnExec(o.reportFD)
	return nil
}

func lookPath(name string) (string, error) {
	if strings.Contains(name, "/") {
		return name, nil
	}
	path, err := exec.LookPath(name)
	if err != nil {
		return "", fmt.Errorf("command %q not found in PATH", name)
	}
	return path, nil
}

// normalized is a validated policy: clean absolute paths, a known mode
// and known rlimit names.
type normalized struct {
	strict    bool
	readOnly  []string
	readWrite []string
	exec      []string
	seccomp   bool
	rlimits   []rlimit // sorted by name
}

type rlimit struct {
	name  string
	value uint64
}

func normalize(p api.Confinement) (normalized, error) {
	n := normalized{seccomp: p.Seccomp == nil || *p.Seccomp}
	switch p.Enforcement {
	case "", Strict:
		n.strict = true
	case BestEffort:
	default:
		return n, fmt.Errorf("%w: enforcement %q: use %q or %q", ErrBadPolicy, p.Enforcement, Strict, BestEffort)
	}
	var err error
	if n.readOnly, err = cleanPaths("read_only", p.ReadOnly); err != nil {
		return n, err
	}
	if n.readWrite, err = cleanPaths("read_write", p.ReadWrite); err != nil {
		return n, err
	}
	if n.exec, err = cleanPaths("exec", p.Exec); err != nil {
		return n, err
	}
	for name, v := range p.Rlimits {
		if !slices.Contains(rlimitNames, name) {
			return n, fmt.Errorf("%w: unknown rlimit %q (known: %s)", ErrBadPolicy, name, strings.Join(rlimitNames, ", "))
		}
		n.rlimits = append(n.rlimits, rlimit{name, v})
	}
	slices.SortFunc(n.rlimits, func(a, b rlimit) int { return strings.Compare(a.name, b.name) })
	return n, nil
}

// cleanPaths makes policy paths absolute and clean. A trailing "/**"
// means the directory itself: Landlock rules always cover a hierarchy.
func cleanPaths(field string, in []string) ([]string, error) {
	out := make([]string, 0, len(in))
	for _, p := range in {
		c := strings.TrimSuffix(p, "/**")
		if c == "" && p != "" {
			c = "/" // "/**" is the root
		}
		if !filepath.IsAbs(c) || strings.ContainsRune(c, 0) {
			return nil, fmt.Errorf("%w: %s path %q must be absolute", ErrBadPolicy, field, p)
		}
		if strings.Contains(c, "*") {
			return nil, fmt.Errorf("%w: %s path %q: the only pattern is a trailing /**", ErrBadPolicy, field, p)
		}
		c = filepath.Clean(c)
		if !slices.Contains(out, c) {
			out = append(out, c)
		}
	}
	return out, nil
}

// within reports whether path is dir or lies under it.
func within(path, dir string) bool {
	if dir == "/" {
		return true
	}
	return path == dir || strings.HasPrefix(path, dir+"/")
}
