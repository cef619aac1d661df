package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"text/tabwriter"

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
			tw := tabwriter.NewWriter(c.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tISOLATION\tAVAILABLE\tSNAPSHOT\tMEMORY\tFORK\tCONFINE\tACCEL\tNOTE")
			for _, r := range rows {
				note := r.Reason
				if note == "" && !r.MemoryCheckpoint {
					note = "memory: " + r.MemoryCheckpointReason
				}
				accel, _, _ := strings.Cut(r.Accelerator, " ")
				if accel == "" {
					accel = "-"
				}
				fmt.Fprintf(tw, "%s\t%s\t%v\t%v\t%v\t%v\t%v\t%s\t%s\n", r.Name, r.Isolation, r.Available, r.Snapshot, r.MemoryCheckpoint, r.Fork, r.Confinement, accel, note)
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			// Which accelerator and why, in full (too long for the table).
			for _, r := range rows {
				if r.Accelerator != "" {
					fmt.Fprintf(c.OutOrStdout(), "%s accelerator: %s\n", r.Name, r.Accelerator)
				}
			}
			return nil
		},
	}
}
