//go:build linux

package main

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"paddock.dev/paddock/hypervisor"
	_ "paddock.dev/paddock/hypervisor/all"
)

func newBackendsCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "backends",
		Short: "List the sandbox backends built in, and what each can do here",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			type row struct {
				Name string `json:"name"`
				hypervisor.Capabilities
			}
			var rows []row
			for _, n := range hypervisor.List() {
				ctor, _ := hypervisor.Lookup(n)
				b, err := ctor(hypervisor.Config{StateDir: g.stateDir, ImagesDir: g.imagesDir(), Logger: g.logger()})
				if err != nil {
					return err
				}
				rows = append(rows, row{n, b.Capabilities()})
			}
			if g.json {
				return json.NewEncoder(c.OutOrStdout()).Encode(rows)
			}
			tw := newTable(c.OutOrStdout(), "NAME", "ISOLATION", "AVAILABLE", "SNAPSHOT", "MEMORY", "FORK", "CONFINE", "ACCEL", "NOTE")
			for _, r := range rows {
				note := r.Reason
				if note == "" && !r.MemoryCheckpoint {
					note = "memory: " + r.MemoryCheckpointReason
				}
				accel, _, _ := strings.Cut(r.Accelerator, " ")
				if accel == "" {
					accel = "-"
				}
				tw.row(r.Name, r.Isolation, r.Available, r.Snapshot, r.MemoryCheckpoint, r.Fork, r.Confinement, accel, note)
			}
			if err := tw.flush(); err != nil {
				return err
			}
			// Which accelerator and why, in full (too long for the table).
			for _, r := range rows {
				if r.Accelerator != "" {
					fmt.Fprintf(c.OutOrStdout(), "%s accelerator: %s\n", cell(r.Name), cell(r.Accelerator))
				}
			}
			return nil
		},
	}
}
