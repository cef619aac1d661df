package main

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	apiv1 "paddock.dev/paddock/api"
	"paddock.dev/paddock/client"
)

// compilePolicyCommand is `session compile-policy`: what a create with a
// policy would record, and why it would be refused, creating nothing.
func compilePolicyCommand(g *globals, cl func() (*client.Client, error)) *cobra.Command {
	var preset, policyFile, backend string
	var allow []string
	cmd := &cobra.Command{
		Use:   "compile-policy [--policy FILE | --preset P --allow HOST...] [--backend B]",
		Short: "Show what a policy compiles to and why a create would refuse it, creating nothing",
		Long: `Show what a session created with this policy would record (the compiled
network policy and the process rules), whether its sandbox would be offline
or go out through the egress proxy, and every refusal a create would answer.
Nothing is created. The policy flags are run's.

Exit status: 0 when no refusal, 5 when a create would be refused.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			p, err := policyFromFlags(preset, allow, policyFile, c.InOrStdin())
			if err != nil {
				return err
			}
			k, err := cl()
			if err != nil {
				return err
			}
			out, err := k.CompilePolicy(c.Context(), apiv1.PolicyCompileRequest{Policy: p, Backend: backend})
			if err != nil {
				return err
			}
			w := c.OutOrStdout()
			if g.json {
				enc := json.NewEncoder(w)
				enc.SetIndent("", "  ")
				if err := enc.Encode(out); err != nil {
					return err
				}
			} else {
				if out.Policy != nil {
					fmt.Fprintf(w, "network: %s (mode %s, enforcement %s)\n", cell(orDash(out.Network)), cell(out.Policy.Mode), cell(out.Policy.Enforcement))
					if len(out.Policy.AllowHosts) > 0 {
						fmt.Fprintf(w, "hosts: %s\n", cell(strings.Join(out.Policy.AllowHosts, ", ")))
					}
					for _, u := range out.Policy.Unenforced {
						fmt.Fprintf(w, "unenforced: %s\n", cell(u))
					}
					if pr := out.Policy.Process; pr != nil {
						fmt.Fprintf(w, "process: allow %d, ask %d, deny %d, enforce %s\n", len(pr.Allow), len(pr.Ask), len(pr.Deny), cell(orDash(pr.Enforce)))
					}
				}
				for _, r := range out.Refusals {
					fmt.Fprintf(w, "refused (%d %s): %s\n", r.Status, cell(r.Code), cell(r.Error))
				}
				if out.OK {
					fmt.Fprintln(w, "ok: a create would accept this policy")
				}
			}
			if !out.OK {
				return exitCodeError(exitDenied)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&preset, "preset", "", "network preset (offline, dev, open…), as run's")
	cmd.Flags().StringSliceVar(&allow, "allow", nil, "a host the sandbox may reach (repeat), as run's")
	cmd.Flags().StringVar(&policyFile, "policy", "", "the policy as JSON from a file, or - for stdin")
	cmd.Flags().StringVar(&backend, "backend", "", "the backend a create would name (default: the daemon's)")
	return cmd
}

// tenantsCommand is `session tenants`: the running daemon's tenants with
// their limits and session counts (the admin token only). `paddock tenant
// ls` reads the file itself; this is what the daemon has in force.
func tenantsCommand(g *globals, cl func() (*client.Client, error)) *cobra.Command {
	return &cobra.Command{
		Use:   "tenants",
		Short: "The daemon's tenants in force, their limits and session counts (admin token)",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			k, err := cl()
			if err != nil {
				return err
			}
			out, err := k.Tenants(c.Context())
			if err != nil {
				return err
			}
			if g.json {
				enc := json.NewEncoder(c.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(out)
			}
			tw := newTable(c.OutOrStdout(), "NAME", "SESSIONS", "DISK_MB", "MEMORY_MB", "CPUS")
			limit := func(v float64) string {
				if v == 0 {
					return "default"
				}
				return fmt.Sprint(v)
			}
			for _, t := range out.Tenants {
				tw.row(t.Name, t.Sessions, limit(float64(t.Limits.DiskMB)), limit(float64(t.Limits.MemoryMB)), limit(t.Limits.CPUs))
			}
			return tw.flush()
		},
	}
}
