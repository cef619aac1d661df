package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"paddock.dev/paddock/errdefs"
	"paddock.dev/paddock/hostd/api"
	"paddock.dev/paddock/hostd/session"
	"paddock.dev/paddock/hostd/tokens"
)

// idemAnswer is one answer to a request with an Idempotency-Key.
type idemAnswer struct {
	code     int
	body     string
	replayed bool
}

// idemPost sends a POST with an Idempotency-Key and headers.
func idemPost(t *testing.T, url, key, body string, hdr map[string]string) idemAnswer {
	t.Helper()
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Idempotency-Key", key)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Error(err)
		return idemAnswer{}
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return idemAnswer{resp.StatusCode, string(b), resp.Header.Get("Idempotent-Replayed") == "true"}
}

// idemAll sends n requests at once and gives their answers.
func idemAll(t *testing.T, n int, send func() idemAnswer) []idemAnswer {
	out := make([]idemAnswer, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			out[i] = send()
		}()
	}
	close(start)
	wg.Wait()
	return out
}

// TestIdempotencyConcurrent sends requests with one Idempotency-Key at
// the same time, on the fake backend. Of eight execs the command runs
// once and every request answers 200 with the first one's body (the
// others waited for it and replay it). Of eight checkpoints with a stale
// If-Match, each answers the route's own 412: none is a 404 (the key
// read back after the first failed and gave it back) or a 409 (the first
// still running), since a retry waits and, when the first failed, runs
// itself. A retry whose first request runs longer than the wait is 409
// idempotency_in_flight, and replays the answer once the first is done.
func TestIdempotencyConcurrent(t *testing.T) {
	d := fakeDaemon(t)
	ctx := context.Background()
	s, err := d.c.CreateSession(ctx, session.CreateRequest{TTLSeconds: 600})
	if err != nil {
		t.Fatal(err)
	}
	exec := d.url + "/v1/agents/sessions/" + s.ID + "/exec"
	got := idemAll(t, 8, func() idemAnswer {
		return idemPost(t, exec, "race-exec", `{"command":"sleep 0.3; echo x >> count; echo $$"}`, nil)
	})
	replays := 0
	for i, a := range got {
		if a.code != 200 || a.body != got[0].body {
			t.Errorf("exec %d: %d %q, want 200 %q", i, a.code, a.body, got[0].body)
		}
		if a.replayed {
			replays++
		}
	}
	if replays != len(got)-1 {
		t.Errorf("%d of %d answers were replays, want all but one", replays, len(got))
	}
	if r, err := d.c.Exec(ctx, s.ID, session.ExecRequest{Command: "wc -l < count"}); err != nil || strings.TrimSpace(r.Stdout) != "1" {
		t.Errorf("the command ran %q times, want once (%v)", r.Stdout, err)
	}

	cur, err := d.c.GetSession(ctx, s.ID)
	if err != nil {
		t.Fatal(err)
	}
	stale := map[string]string{"If-Match": strconv.FormatInt(cur.Revision+5, 10)}
	for round := range 5 {
		key := fmt.Sprintf("race-fail-%d", round)
		for i, a := range idemAll(t, 8, func() idemAnswer {
			return idemPost(t, d.url+"/v1/agents/sessions/"+s.ID+"/checkpoint", key, `{"tag":"never"}`, stale)
		}) {
			if a.code != http.StatusPreconditionFailed {
				t.Errorf("round %d, checkpoint %d with a stale If-Match: %d %s, want 412", round, i, a.code, a.body)
			}
		}
	}

	defer api.SetIdempotencyWait(300 * time.Millisecond)()
	slow := `{"command":"sleep 1.5; echo slow"}`
	first := make(chan idemAnswer)
	go func() { first <- idemPost(t, exec, "race-slow", slow, nil) }()
	time.Sleep(200 * time.Millisecond) // the first has the key
	a := idemPost(t, exec, "race-slow", slow, nil)
	var body struct {
		Code string `json:"code"`
	}
	json.Unmarshal([]byte(a.body), &body)
	if a.code != 409 || body.Code != errdefs.CodeIdempotencyInFlight {
		t.Errorf("a retry while the first runs past the wait: %d %s, want 409 %s", a.code, a.body, errdefs.CodeIdempotencyInFlight)
	}
	f := <-first
	if f.code != 200 {
		t.Fatalf("the slow first request: %d %s", f.code, f.body)
	}
	if a := idemPost(t, exec, "race-slow", slow, nil); a.code != 200 || !a.replayed || a.body != f.body {
		t.Errorf("a retry after the first ended: %d replayed=%v %q, want the first's %q", a.code, a.replayed, a.body, f.body)
	}
}

// TestIdempotencyWaitersCapped: a client that sends many copies of a slow
// request with one Idempotency-Key cannot have them all wait on the
// daemon. While the first runs, MaxIdemWaitersPerCaller retries wait for
// it and replay its answer; the ones past that answer 409
// idempotency_in_flight at once, without waiting.
func TestIdempotencyWaitersCapped(t *testing.T) {
	d := fakeDaemon(t)
	ctx := context.Background()
	s, err := d.c.CreateSession(ctx, session.CreateRequest{TTLSeconds: 600})
	if err != nil {
		t.Fatal(err)
	}
	defer api.SetIdempotencyWait(20 * time.Second)()
	exec := d.url + "/v1/agents/sessions/" + s.ID + "/exec"
	slow := `{"command":"sleep 3; echo slow"}`
	first := make(chan idemAnswer)
	go func() { first <- idemPost(t, exec, "pin", slow, nil) }()
	time.Sleep(500 * time.Millisecond) // the first has the key
	const extra = 4
	type timed struct {
		idemAnswer
		took time.Duration
	}
	got := make([]timed, api.MaxIdemWaitersPerCaller+extra)
	var wg sync.WaitGroup
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			a := idemPost(t, exec, "pin", slow, nil)
			got[i] = timed{a, time.Since(start)}
		}()
	}
	wg.Wait()
	f := <-first
	if f.code != 200 {
		t.Fatalf("the first request: %d %s", f.code, f.body)
	}
	fast, replays := 0, 0
	for i, a := range got {
		var body struct {
			Code string `json:"code"`
		}
		json.Unmarshal([]byte(a.body), &body)
		switch {
		case a.code == 409 && body.Code == errdefs.CodeIdempotencyInFlight && a.took < 2*time.Second: // the first runs 3 s
			fast++
		case a.code == 200 && a.replayed && a.body == f.body:
			replays++
		default:
			t.Errorf("retry %d: %d %s after %v", i, a.code, a.body, a.took)
		}
	}
	if fast != extra || replays != api.MaxIdemWaitersPerCaller {
		t.Errorf("%d retries refused at once and %d replays, want %d and %d", fast, replays, extra, api.MaxIdemWaitersPerCaller)
	}
}

// TestIdempotencyKeysPerCaller: one Idempotency-Key on one session's exec
// from the admin and from two session tokens of that session is three
// keys: each runs its own command (none replays another caller's
// answer, which would hand one caller what another ran), and a retry by
// the same token replays its own.
func TestIdempotencyKeysPerCaller(t *testing.T) {
	d := fakeDaemon(t)
	ctx := context.Background()
	s, err := d.c.CreateSession(ctx, session.CreateRequest{TTLSeconds: 600})
	if err != nil {
		t.Fatal(err)
	}
	exec := d.url + "/v1/agents/sessions/" + s.ID + "/exec"
	body := `{"command":"echo run >> runs; wc -l < runs"}`
	var toks []string
	for range 2 {
		tk, err := d.c.MintToken(ctx, s.ID, tokens.TokenRequest{Ops: []string{"exec"}})
		if err != nil {
			t.Fatal(err)
		}
		toks = append(toks, tk.Token)
	}
	admin := idemPost(t, exec, "shared", body, nil)
	t1 := idemPost(t, exec, "shared", body, map[string]string{"Authorization": "Bearer " + toks[0]})
	t2 := idemPost(t, exec, "shared", body, map[string]string{"Authorization": "Bearer " + toks[1]})
	again := idemPost(t, exec, "shared", body, map[string]string{"Authorization": "Bearer " + toks[0]})
	for name, a := range map[string]idemAnswer{"admin": admin, "token 1": t1, "token 2": t2} {
		if a.code != 200 || a.replayed {
			t.Errorf("%s: %d replayed=%v %s, want its own run", name, a.code, a.replayed, a.body)
		}
	}
	if admin.body == t1.body || t1.body == t2.body || admin.body == t2.body {
		t.Errorf("two callers got the same answer: %s / %s / %s", admin.body, t1.body, t2.body)
	}
	if again.code != 200 || !again.replayed || again.body != t1.body {
		t.Errorf("token 1's retry: %d replayed=%v %s, want its first answer %s", again.code, again.replayed, again.body, t1.body)
	}
}
