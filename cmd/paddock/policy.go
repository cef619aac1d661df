package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"paddock.dev/paddock/egress"
	"paddock.dev/paddock/egress/addr"
	"paddock.dev/paddock/egress/rules"
	"paddock.dev/paddock/policy"
)

// Exit codes of `paddock policy eval`: what the policy decided.
const (
	exitDenied = 5 // the policy refuses
	exitAsk    = 6 // the command waits for an operator's approval
)

// maxPolicyFile bounds a --policy file (a create body's policy).
const maxPolicyFile = 1 << 20

func newPolicyCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "policy",
		Short: "Test and try the Rego policy modules (built-in and an operator's)",
		Long: `The daemon decides with OPA: the built-in Rego modules (process, http,
approval) and, with ` + "`paddock serve --policy-ext DIR`" + `, an operator's
modules, which can only narrow what the built-in modules allow. These verbs
run the same engine locally. See docs/policy.md.`,
	}
	cmd.AddCommand(newPolicyTestCmd(g), newPolicyEvalCmd(g))
	return cmd
}

// bundleKey reads --ext-key / --policy-ext-key ("" is none).
func bundleKey(path string) (*policy.BundleKey, error) {
	if path == "" {
		return nil, nil
	}
	k, err := policy.LoadBundleKey(path)
	if err != nil {
		return nil, usageError{err}
	}
	return k, nil
}

func newPolicyTestCmd(g *globals) *cobra.Command {
	var ext, extKey string
	c := &cobra.Command{
		Use:   "test [--ext DIR|BUNDLE [--ext-key PEM]]",
		Short: "Run the Rego tests (built-in, and the operator's with --ext) with coverage",
		Long: `Run every test rule (test_…) of the built-in modules and, with --ext, of an
operator's modules (a directory of .rego files searched recursively, or an
OPA bundle .tar.gz), and print each test and the coverage of each module.

The daemon runs the same tests whenever it loads modules and refuses a set
whose tests fail, so run this before deploying a change.

Exit status: 0 when every test passes, 1 when one fails or the modules
cannot be read or compiled, 2 on bad flags.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			key, err := bundleKey(extKey)
			if err != nil {
				return err
			}
			rep, err := policy.RunTests(c.Context(), ext, key)
			if err != nil {
				return err
			}
			out := c.OutOrStdout()
			if g.json {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				if err := enc.Encode(rep); err != nil {
					return err
				}
			} else {
				printTestReport(out, rep)
			}
			if rep.Failed > 0 {
				return exitCodeError(exitError)
			}
			return nil
		},
	}
	c.Flags().StringVar(&ext, "ext", "", "the operator's modules: a directory of .rego files, or an OPA bundle (.tar.gz)")
	c.Flags().StringVar(&extKey, "ext-key", "", "a PEM public key (RSA, ECDSA P-256/P-384): --ext must be an OPA bundle signed with it, as paddock serve --policy-ext-key checks")
	return c
}

func printTestReport(w io.Writer, rep *policy.TestReport) {
	tw := newTable(w)
	for _, t := range rep.Tests {
		status := "ok"
		if !t.Pass {
			status = "FAIL"
		}
		tw.row(status, t.Package+"."+t.Name, t.Duration.Round(time.Microsecond))
		if !t.Pass {
			tw.row("", "  "+t.Error, "")
		}
	}
	tw.flush()
	fmt.Fprintln(w)
	fmt.Fprintln(w, "coverage (lines of each module the tests ran):")
	tw = newTable(w)
	for _, c := range rep.Coverage {
		cells := []any{"  " + c.File, fmt.Sprintf("%.1f%%", c.Percent), fmt.Sprintf("%d/%d lines", c.Covered, c.Covered+c.NotCovered)}
		if len(c.Missed) > 0 {
			cells = append(cells, "not run: "+strings.Join(c.Missed, ", "))
		}
		tw.row(cells...)
	}
	tw.flush()
	fmt.Fprintf(w, "  built-in %.1f%%, all modules %.1f%%\n\n", rep.Builtin, rep.Total)
	fmt.Fprintf(w, "%d tests: %d passed, %d failed\n", len(rep.Tests), rep.Passed, rep.Failed)
}

// evalFlags are `paddock policy eval`'s flags.
type evalFlags struct {
	command, request, policyFile, ext, extKey, enforce, kind string
	allow, deny, ask                                         []string
}

func newPolicyEvalCmd(g *globals) *cobra.Command {
	var f evalFlags
	c := &cobra.Command{
		Use:   "eval (--command CMD | --request 'METHOD URL') [flags]",
		Short: "Show what the policy decides for one command or one HTTP request",
		Long: `Decide one command (--command) with the process rules given by --allow,
--deny and --ask and/or the "process" section of --policy, or one HTTP
request (--request 'GET https://github.com/org/x') with the "preset" and
"network" sections of --policy. --policy FILE (or - for standard input) is
a JSON object like a session create body's "policy"; sections the
decision does not use are ignored. With --ext, an operator's modules
narrow the decision as they do in the daemon.

Without a network section (and without a preset) a session is offline, so
a request is refused.

Exit status: 0 allow, 5 deny, 6 ask (the command would wait for an
operator's approval), 1 when the policy cannot be read or evaluated, 2 on
bad flags or rules.`,
		Example: `  paddock policy eval --command 'git push origin main' --allow 'git *' --ask 'git push*'
  paddock policy eval --command 'curl x | sh' --policy policy.json --ext /etc/paddock/policy.d
  paddock policy eval --request 'POST https://api.github.com/repos/org/x/issues' --policy policy.json`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if (f.command == "") == (f.request == "") {
				return usageError{errors.New("give exactly one of --command and --request")}
			}
			key, err := bundleKey(f.extKey)
			if err != nil {
				return err
			}
			e, err := policy.New(policy.Options{ExtDir: f.ext, BundleKey: key})
			if err != nil {
				return err
			}
			p, err := readPolicyFile(f.policyFile, c.InOrStdin())
			if err != nil {
				return usageError{err}
			}
			if f.command != "" {
				return evalCommand(c, g, e, p, f)
			}
			return evalRequest(c, g, e, p, f.request)
		},
	}
	fl := c.Flags()
	fl.StringVar(&f.command, "command", "", "the command to judge, as the session would receive it")
	fl.StringVar(&f.request, "request", "", "the request to judge: 'METHOD URL'")
	fl.StringVar(&f.policyFile, "policy", "", "a session policy as JSON (the create body's \"policy\"); - reads standard input")
	fl.StringVar(&f.ext, "ext", "", "the operator's modules: a directory of .rego files, or an OPA bundle (.tar.gz)")
	fl.StringVar(&f.extKey, "ext-key", "", "a PEM public key: --ext must be an OPA bundle signed with it")
	fl.StringArrayVar(&f.allow, "allow", nil, "a process.allow pattern (repeatable; adds to --policy's)")
	fl.StringArrayVar(&f.deny, "deny", nil, "a process.deny pattern (repeatable)")
	fl.StringArrayVar(&f.ask, "ask", nil, "a process.ask pattern (repeatable)")
	fl.StringVar(&f.enforce, "enforce", "", `process.enforce: "exec" also limits the programs the guest may start`)
	fl.StringVar(&f.kind, "kind", policy.KindExec, "exec or job")
	return c
}

// policyFile is what --policy gives: the process section, and the network
// part as egress/rules reads it.
type policyFile struct {
	process *policy.ProcessRules
	network rules.PolicyInput
	hasNet  bool
}

// readPolicyFile reads a create body's policy object (or a whole create
// body, whose "policy" it takes).
func readPolicyFile(name string, stdin io.Reader) (policyFile, error) {
	var out policyFile
	if name == "" {
		return out, nil
	}
	var r io.Reader = stdin
	if name != "-" {
		fh, err := os.Open(name)
		if err != nil {
			return out, err
		}
		defer fh.Close()
		r = fh
	}
	b, err := io.ReadAll(io.LimitReader(r, maxPolicyFile+1))
	if err != nil {
		return out, err
	}
	if len(b) > maxPolicyFile {
		return out, fmt.Errorf("--policy: more than %d KiB", maxPolicyFile>>10)
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(b, &obj); err != nil {
		return out, fmt.Errorf("--policy: not a JSON object: %w", err)
	}
	if inner, ok := obj["policy"]; ok && obj["process"] == nil && obj["network"] == nil && obj["preset"] == nil {
		obj = nil // a whole create body
		if err := json.Unmarshal(inner, &obj); err != nil {
			return out, fmt.Errorf("--policy: .policy is not a JSON object: %w", err)
		}
	}
	if raw, ok := obj["process"]; ok && !bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		var pr policy.ProcessRules
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&pr); err != nil {
			return out, fmt.Errorf("--policy: process: %w (fields: allow, deny, ask, enforce)", err)
		}
		out.process = &pr
	}
	net := map[string]json.RawMessage{}
	for _, k := range []string{"preset", "network"} {
		if v, ok := obj[k]; ok {
			net[k] = v
		}
	}
	if len(net) > 0 {
		nb, _ := json.Marshal(net)
		if err := json.Unmarshal(nb, &out.network); err != nil {
			return out, fmt.Errorf("--policy: %w", err)
		}
		out.hasNet = out.network.Preset != "" || out.network.Network != nil
	}
	return out, nil
}

func evalCommand(c *cobra.Command, g *globals, e *policy.Engine, p policyFile, f evalFlags) error {
	var r policy.ProcessRules
	if p.process != nil {
		r = *p.process
	}
	r.Allow = append(r.Allow, f.allow...)
	r.Deny = append(r.Deny, f.deny...)
	r.Ask = append(r.Ask, f.ask...)
	if f.enforce != "" {
		r.Enforce = f.enforce
	}
	if err := e.ValidateProcess(r); err != nil {
		return usageError{err}
	}
	d, err := e.Process(c.Context(), policy.ProcessInput{Session: "eval", Kind: f.kind, Command: f.command, Rules: r})
	if errors.Is(err, policy.ErrInvalidInput) {
		return usageError{err}
	}
	if err != nil {
		return err
	}
	out := c.OutOrStdout()
	if g.json {
		json.NewEncoder(out).Encode(d)
	} else {
		tw := newTable(out)
		tw.row("result", d.Result)
		tw.row("rule", d.Rule)
		tw.row("pattern", dashIfEmpty(d.Pattern))
		tw.row("piece", dashIfEmpty(d.Piece))
		tw.row("reason", d.Reason)
		if r.Enforce == policy.EnforceExec {
			tw.row("exec list", strings.Join(e.ExecPrograms(r), " "))
		}
		tw.flush()
	}
	switch d.Result {
	case policy.Deny:
		return exitCodeError(exitDenied)
	case policy.Ask:
		return exitCodeError(exitAsk)
	}
	return nil
}

// requestDecision is `policy eval --request`'s answer.
type requestDecision struct {
	Result  string `json:"result"` // allow or deny
	Rule    string `json:"rule"`
	Reason  string `json:"reason,omitempty"`
	Inspect bool   `json:"inspect"`
	Host    string `json:"host"`
	Port    int    `json:"port"`
	Method  string `json:"method"`
	Path    string `json:"path"`
}

func evalRequest(c *cobra.Command, g *globals, e *policy.Engine, p policyFile, request string) error {
	r, err := parseRequest(request)
	if err != nil {
		return usageError{err}
	}
	in := p.network
	if !p.hasNet {
		in = rules.PolicyInput{Preset: rules.PresetOffline} // as a session: no network policy is offline
	}
	compiled, err := rules.Compile(in)
	if err != nil {
		return usageError{err}
	}
	d := e.Network("eval", compiled).Decide(r)
	res := requestDecision{Result: "deny", Rule: d.Rule, Reason: d.Reason, Inspect: d.Inspect, Host: r.Host, Port: r.Port, Method: r.Method, Path: r.Path}
	if d.Allow {
		res.Result = "allow"
	}
	out := c.OutOrStdout()
	if g.json {
		json.NewEncoder(out).Encode(res)
	} else {
		tw := newTable(out)
		tw.row("result", res.Result)
		tw.row("rule", res.Rule)
		tw.row("inspect", res.Inspect)
		tw.row("request", fmt.Sprintf("%s %s:%d%s", r.Method, r.Host, r.Port, r.Path))
		tw.row("reason", dashIfEmpty(res.Reason))
		tw.flush()
	}
	if !d.Allow {
		return exitCodeError(exitDenied)
	}
	return nil
}

// parseRequest reads 'METHOD URL' as the proxy would see the request:
// canonical host, the port (or the scheme's), the path as sent.
func parseRequest(s string) (egress.Request, error) {
	method, raw, ok := strings.Cut(strings.TrimSpace(s), " ")
	if !ok {
		return egress.Request{}, fmt.Errorf("--request %q: write 'METHOD URL', such as 'GET https://github.com/org/x'", s)
	}
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil {
		return egress.Request{}, fmt.Errorf("--request: %w", err)
	}
	port := 80
	switch u.Scheme {
	case "https":
		port = 443
	case "http":
	default:
		return egress.Request{}, fmt.Errorf("--request: the URL's scheme must be http or https, not %q", u.Scheme)
	}
	if p := u.Port(); p != "" {
		if port, err = strconv.Atoi(p); err != nil {
			return egress.Request{}, fmt.Errorf("--request: port %q: %w", p, err)
		}
	}
	h, err := addr.CanonicalHost(u.Hostname())
	if err != nil {
		return egress.Request{}, fmt.Errorf("--request: %w", err)
	}
	path := u.EscapedPath()
	if path == "" {
		path = "/"
	}
	if c, err := rules.CanonicalPath(path); err == nil {
		path = c
	}
	return egress.Request{Sandbox: "eval", Host: h.String(), Port: port, Scheme: u.Scheme, Method: strings.ToUpper(method), Path: path}, nil
}

func dashIfEmpty(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
