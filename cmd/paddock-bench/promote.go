package main

import (
	"context"
	"encoding/base64"
	"fmt"
	"time"

	apiv1 "paddock.dev/paddock/api"
	"paddock.dev/paddock/client"
)

// benchPromote measures a promotion of 100 new files from a fork child
// into its parent (the plan, the parent's checkpoint and the copies)
// beside what it is built on: the same 100 files written one by one
// through the files API.
func benchPromote(ctx context.Context, cl *client.Client, runs int) {
	n := max(runs/4, 3)
	parent, err := cl.CreateSession(ctx, apiv1.CreateRequest{})
	check(err)
	defer cl.DeleteSession(ctx, parent.ID)
	kids, err := cl.Fork(ctx, parent.ID, -1, 1)
	check(err)
	child := kids[0].ID
	defer cl.DeleteSession(ctx, child)
	i := 0
	promote := median(n, func() time.Duration {
		i++
		dir := fmt.Sprintf("p%d", i)
		_, err := cl.Exec(ctx, child, apiv1.ExecRequest{Command: fmt.Sprintf("cd /workspace && mkdir %s && for j in $(seq 100); do echo %d.$j > %s/$j; done", dir, i, dir)})
		check(err)
		t0 := time.Now()
		res, err := cl.Promote(ctx, child, apiv1.PromoteRequest{Paths: []string{dir}})
		check(err)
		d := time.Since(t0)
		if len(res.Applied) != 100 {
			check(fmt.Errorf("promote applied %d files, not 100", len(res.Applied)))
		}
		return d
	})
	writes := median(n, func() time.Duration {
		i++
		t0 := time.Now()
		for j := 1; j <= 100; j++ {
			body := apiv1.FileWrite{Path: fmt.Sprintf("/workspace/w%d/%d", i, j), ContentBase64: base64.StdEncoding.EncodeToString([]byte(fmt.Sprintf("%d.%d\n", i, j)))}
			check(cl.Call(ctx, "PUT", parent.ID, "/files/content", nil, body, nil))
		}
		return time.Since(t0)
	})
	row("API: promote of 100 files vs 100 file writes", promote, writes, "PUT .../files/content ×100")
}
