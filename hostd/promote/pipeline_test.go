package promote_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	apiv1 "paddock.dev/paddock/api"
	"paddock.dev/paddock/guest/api"
	"paddock.dev/paddock/hostd/promote"
	"paddock.dev/paddock/hostd/session"
	"paddock.dev/paddock/hostd/session/sessiontest"
)

// TestPromotePipelineSteps (fake backend, no root): a promotion's writes
// walk the parent's pipeline once, as a file change with verb promote
// (load, gate, admit, hooks, run, record), so the command hooks see it;
// a hook that refuses it stops it before anything is written or any
// checkpoint taken.
func TestPromotePipelineSteps(t *testing.T) {
	m := sessiontest.New(t)
	svc := promote.New(m)
	ctx := context.Background()
	var mu sync.Mutex
	var steps, seen []string
	m.TraceSteps(func(kind session.CommandKind, step string) {
		if kind == session.CommandFile {
			mu.Lock()
			steps = append(steps, step)
			mu.Unlock()
		}
	})
	refuse := false
	m.AddCommandHook("watch", func(_ context.Context, c *session.Command) error {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, string(c.Kind)+":"+c.Verb+":"+c.Text)
		if refuse {
			return errors.New("not today")
		}
		return nil
	})
	write := func(id, p, content string) {
		t.Helper()
		if _, err := session.Guest(m.Machine(id)).WriteFile(ctx, api.FileContent{Path: p, Content: []byte(content)}); err != nil {
			t.Fatal(err)
		}
	}
	s, err := m.Create(ctx, "", session.CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	ws := s.Workspace.Path
	write(s.ID, ws+"/a", "one")
	kids, err := m.Fork(ctx, "", s.ID, -1, session.ForkRequest{Count: 1})
	if err != nil {
		t.Fatal(err)
	}
	child := kids[0].ID
	write(child, ws+"/a", "ONE")

	refuse = true
	if _, err := svc.Promote(ctx, "", child, apiv1.PromoteRequest{}); err == nil || !strings.Contains(err.Error(), "not today") {
		t.Fatalf("a promotion a hook refuses: %v", err)
	}
	if got, _ := m.Load(ctx, "", s.ID); len(got.Checkpoints) != 0 {
		t.Errorf("a refused promotion took a checkpoint: %+v", got.Checkpoints)
	}
	if f, _ := session.Guest(m.Machine(s.ID)).ReadFile(ctx, ws+"/a"); string(f.Content) != "one" {
		t.Errorf("a refused promotion wrote a: %q", f.Content)
	}
	refuse = false
	mu.Lock()
	steps, seen = nil, nil
	mu.Unlock()
	res, err := svc.Promote(ctx, "", child, apiv1.PromoteRequest{})
	if err != nil || len(res.Applied) != 1 {
		t.Fatalf("promote: %v %+v", err, res)
	}
	mu.Lock()
	defer mu.Unlock()
	if got := strings.Join(steps, ","); got != "load,gate,admit,hooks,run,record" {
		t.Errorf("the promotion walked %s", got)
	}
	if got := strings.Join(seen, ","); got != "file:promote:"+ws {
		t.Errorf("the hooks saw %s", got)
	}
	if f, _ := session.Guest(m.Machine(s.ID)).ReadFile(ctx, ws+"/a"); string(f.Content) != "ONE" {
		t.Errorf("the parent's a after the promotion: %q", f.Content)
	}
}
