package api_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	neturl "net/url"
	"strings"
	"testing"
	"time"

	"paddock.dev/paddock/client"
	"paddock.dev/paddock/hostd/api"
	"paddock.dev/paddock/hostd/session"
)

// openedStream is a stream asked for: held open when status is 200, or
// refused with the body's code and limit.
type openedStream struct {
	status int
	code   string
	limit  int
	resp   *http.Response
	close  func()
}

// openStream asks for a stream as tok and returns once the answer's head
// arrived; a 200's body stays open until close (or the test's end).
func openStream(t *testing.T, url, tok, method, path, body string) *openedStream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, _ := http.NewRequestWithContext(ctx, method, url+path, rd)
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	o := &openedStream{status: resp.StatusCode, resp: resp, close: func() { cancel(); resp.Body.Close() }}
	t.Cleanup(o.close)
	if resp.StatusCode != http.StatusOK {
		var b struct {
			Error string `json:"error"`
			Code  string `json:"code"`
			Limit int    `json:"limit"`
		}
		json.NewDecoder(resp.Body).Decode(&b)
		o.code, o.limit = b.Code, b.Limit
		t.Logf("%s %s: %d %s", method, path, resp.StatusCode, b.Error)
		o.close()
	}
	return o
}

// streamPaths opens exec/stream (a sleeping command) and events/stream.
func execStreamOf(t *testing.T, url, tok, id string) *openedStream {
	t.Helper()
	return openStream(t, url, tok, "POST", "/v1/agents/sessions/"+id+"/exec/stream", `{"command":"sleep 120"}`)
}

func eventStreamOf(t *testing.T, url, tok, id string) *openedStream {
	t.Helper()
	return openStream(t, url, tok, "GET", "/v1/agents/sessions/"+id+"/events/stream", "")
}

// wantRefused checks that o is the 429 of the cap code with limit.
func wantRefused(t *testing.T, what string, o *openedStream, code string, limit int) {
	t.Helper()
	if o.status != http.StatusTooManyRequests || o.code != code || o.limit != limit {
		t.Errorf("%s: %d code %q limit %d, want 429 %q %d", what, o.status, o.code, o.limit, code, limit)
	}
}

// wantOpen checks that o was let through.
func wantOpen(t *testing.T, what string, o *openedStream) {
	t.Helper()
	if o.status != http.StatusOK {
		t.Fatalf("%s: %d (code %q), want a stream", what, o.status, o.code)
	}
}

// eventually retries open until a stream is let through.
func eventually(t *testing.T, what string, open func() *openedStream) *openedStream {
	t.Helper()
	var o *openedStream
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if o = open(); o.status == http.StatusOK {
			return o
		}
	}
	t.Fatalf("%s: still refused after 10 s: %d %q", what, o.status, o.code)
	return nil
}

// TestStreamLimits reaches every cap of the admin's sessions with the
// default limits (the session's and the daemon's, for job and event
// streams), frees slots by closing a stream and by a session's end, and
// ends streams at their age limit with the limit set low.
func TestStreamLimits(t *testing.T) {
	d := newTestDaemon(t)
	ctx := context.Background()
	l := api.DefaultStreamLimits
	if l.JobStreams != 32 || l.EventStreams != 128 || l.JobStreamsPerTenant != 8 || l.EventStreamsPerTenant != 16 ||
		l.JobStreamsPerSession != 4 || l.EventStreamsPerSession != 8 || l.MaxAge != time.Hour || l.WriteTimeout != 30*time.Second {
		t.Fatalf("default limits %+v: the docs say 32 job and 128 event streams on the daemon, 8 and 16 per tenant, 4 and 8 per session, one hour each, 30 s per write", l)
	}
	// Two tenants at their caps must leave most of the daemon's slots.
	if l.JobStreams < 4*l.JobStreamsPerTenant || l.EventStreams < 4*l.EventStreamsPerTenant {
		t.Fatalf("default limits %+v: the daemon's caps must be at least four tenants' caps", l)
	}
	// Enough sessions to fill the daemon's event streams one session cap
	// at a time, and one more.
	n := l.EventStreams/l.EventStreamsPerSession + 1
	ids := make([]string, n)
	for i := range ids {
		// Small ones, so that many fit the backend's disk.
		s, err := d.c.CreateSession(ctx, session.CreateRequest{Runtime: session.Runtime{CPUs: 0.25, MemoryMB: 256, DiskMB: 256}})
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = s.ID
		defer d.c.DeleteSession(ctx, s.ID)
	}
	var jobs []*openedStream
	// The session's caps, both kinds. Every stream opened stays open
	// through what follows.
	for i := range l.JobStreamsPerSession {
		o := execStreamOf(t, d.url, token, ids[0])
		wantOpen(t, fmt.Sprintf("job stream %d of the session", i+1), o)
		jobs = append(jobs, o)
	}
	wantRefused(t, "exec/stream past the session's cap", execStreamOf(t, d.url, token, ids[0]), api.CodeJobStreamsSession, l.JobStreamsPerSession)
	// jobs/{job}/stream counts with exec/stream.
	var list struct{ Jobs []session.Job }
	if code := call(t, d.url, "GET", "/v1/agents/sessions/"+ids[0]+"/jobs", nil, &list); code != 200 || len(list.Jobs) != l.JobStreamsPerSession {
		t.Fatalf("jobs of the session: %d %d, want the %d streamed (a refused exec/stream starts nothing)", code, len(list.Jobs), l.JobStreamsPerSession)
	}
	wantRefused(t, "jobs/{job}/stream past the session's cap", openStream(t, d.url, token, "GET", "/v1/agents/sessions/"+ids[0]+"/jobs/"+list.Jobs[0].ID+"/stream", ""),
		api.CodeJobStreamsSession, l.JobStreamsPerSession)
	for i := range l.EventStreamsPerSession {
		wantOpen(t, fmt.Sprintf("event stream %d of the session", i+1), eventStreamOf(t, d.url, token, ids[0]))
	}
	wantRefused(t, "events/stream past the session's cap", eventStreamOf(t, d.url, token, ids[0]), api.CodeEventStreamsSession, l.EventStreamsPerSession)
	// The daemon's caps: the admin's sessions have no tenant cap.
	for i := 1; len(jobs) < l.JobStreams; i++ {
		for range l.JobStreamsPerSession {
			o := execStreamOf(t, d.url, token, ids[i])
			wantOpen(t, fmt.Sprintf("job stream %d of the daemon", len(jobs)+1), o)
			jobs = append(jobs, o)
		}
	}
	wantRefused(t, "exec/stream past the daemon's cap", execStreamOf(t, d.url, token, ids[n-1]), api.CodeJobStreamsDaemon, l.JobStreams)
	for i := 1; i < n-1; i++ {
		for range l.EventStreamsPerSession {
			wantOpen(t, "an event stream below the daemon's cap", eventStreamOf(t, d.url, token, ids[i]))
		}
	}
	wantRefused(t, "events/stream past the daemon's cap", eventStreamOf(t, d.url, token, ids[n-1]), api.CodeEventStreamsDaemon, l.EventStreams)
	// A client that goes away gives its job stream back.
	jobs[len(jobs)-1].close()
	jobs = append(jobs[:len(jobs)-1], eventually(t, "exec/stream after one was closed", func() *openedStream { return execStreamOf(t, d.url, token, ids[n-1]) }))
	wantRefused(t, "exec/stream once the freed slot is taken again", execStreamOf(t, d.url, token, ids[n-1]), api.CodeJobStreamsDaemon, l.JobStreams)
	// A session's end ends its event streams and gives their slots back.
	if err := d.c.DeleteSession(ctx, ids[n-2]); err != nil {
		t.Fatal(err)
	}
	eventually(t, "events/stream after a session's streams ended", func() *openedStream { return eventStreamOf(t, d.url, token, ids[n-1]) })
	// The age limit, set low.
	for _, o := range jobs {
		o.close()
	}
	short := l
	short.MaxAge = time.Second
	if err := d.api.SetStreamLimits(short); err != nil {
		t.Fatal(err)
	}
	defer d.api.SetStreamLimits(l)
	id := ids[n-1]
	job := eventually(t, "exec/stream with a one-second age", func() *openedStream { return execStreamOf(t, d.url, token, id) })
	ev := eventStreamOf(t, d.url, token, id)
	wantOpen(t, "events/stream with a one-second age", ev)
	var running struct{ Jobs []session.Job }
	call(t, d.url, "GET", "/v1/agents/sessions/"+id+"/jobs", nil, &running)
	if len(running.Jobs) == 0 {
		t.Fatal("no job under the exec/stream")
	}
	follow := openStream(t, d.url, token, "GET", "/v1/agents/sessions/"+id+"/jobs/"+running.Jobs[0].ID+"/stream", "")
	wantOpen(t, "jobs/{job}/stream with a one-second age", follow)
	for what, o := range map[string]*openedStream{"exec/stream": job, "events/stream": ev, "jobs/{job}/stream": follow} {
		start := time.Now()
		done := make(chan []sseEvent, 1)
		go func() { done <- readSSE(t, o.resp) }()
		select {
		case evs := <-done:
			if len(evs) == 0 || evs[len(evs)-1].name != "error" || !strings.Contains(evs[len(evs)-1].data, "time limit (1s)") ||
				!strings.Contains(evs[len(evs)-1].data, `"code":"stream_max_age"`) {
				t.Errorf("%s at its age limit ended with %+v, want an error event naming the limit, code stream_max_age", what, evs)
			}
			t.Logf("%s ended %v after the previous one", what, time.Since(start).Round(time.Millisecond))
		case <-time.After(15 * time.Second):
			t.Errorf("%s did not end at its one-second age limit (the command sleeps 120 s)", what)
		}
	}
}

// TestAttackOneTenantHoldsAllStreams: a tenant opens job and event
// streams over many sessions of its own, as many as it is let. It is
// stopped at its tenant cap, below the daemon's, and another tenant still
// gets both kinds of stream (before the tenant caps, the first tenant
// took all the daemon's job and event streams and the other got 409).
func TestAttackOneTenantHoldsAllStreams(t *testing.T) {
	d := newTestDaemon(t)
	ctx := context.Background()
	toks := withTenants(t, d, "hog", "other")
	hog, other := client.New(d.url, toks["hog"]), client.New(d.url, toks["other"])
	l := api.DefaultStreamLimits
	// Sessions enough to pass the tenant's caps through session caps
	// alone (the tenant cap, not a session cap, must be what stops it).
	n := max(l.JobStreamsPerTenant/l.JobStreamsPerSession, l.EventStreamsPerTenant/l.EventStreamsPerSession) + 1
	var ids []string
	for range n {
		// Small ones: the tenant's default limits on the sums of cpus
		// and memory (docs/tenants.md) are not what this test is about.
		s, err := hog.CreateSession(ctx, session.CreateRequest{Runtime: session.Runtime{CPUs: 0.25, MemoryMB: 256, DiskMB: 256}})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, s.ID)
		defer d.c.DeleteSession(ctx, s.ID)
	}
	theirs, err := other.CreateSession(ctx, session.CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.c.DeleteSession(ctx, theirs.ID)

	// Job streams, one session after another, until refused.
	var held int
	var refused *openedStream
	for i := 0; i <= l.JobStreams && refused == nil; i++ {
		if o := execStreamOf(t, d.url, toks["hog"], ids[i%n]); o.status == http.StatusOK {
			held++
		} else {
			refused = o
		}
	}
	if held != l.JobStreamsPerTenant || refused == nil {
		t.Fatalf("the tenant holds %d job streams, want its cap %d (the daemon's is %d)", held, l.JobStreamsPerTenant, l.JobStreams)
	}
	wantRefused(t, "the tenant's job stream past its cap", refused, api.CodeJobStreamsTenant, l.JobStreamsPerTenant)
	// The other tenant runs a streamed command to its end.
	var out strings.Builder
	if code, err := other.ExecStream(ctx, theirs.ID, session.ExecRequest{Command: "echo still here"}, &out, io.Discard); err != nil || code != 0 || out.String() != "still here\n" {
		t.Errorf("the other tenant's exec/stream while the first is at its cap: %d %q %v", code, out.String(), err)
	}

	// Event streams likewise.
	held, refused = 0, nil
	for i := 0; i <= l.EventStreams && refused == nil; i++ {
		if o := eventStreamOf(t, d.url, toks["hog"], ids[i%n]); o.status == http.StatusOK {
			held++
		} else {
			refused = o
		}
	}
	if held != l.EventStreamsPerTenant || refused == nil {
		t.Fatalf("the tenant holds %d event streams, want its cap %d (the daemon's is %d)", held, l.EventStreamsPerTenant, l.EventStreams)
	}
	wantRefused(t, "the tenant's event stream past its cap", refused, api.CodeEventStreamsTenant, l.EventStreamsPerTenant)
	ev := eventStreamOf(t, d.url, toks["other"], theirs.ID)
	wantOpen(t, "the other tenant's events/stream while the first is at its cap", ev)
	sc := make(chan []sseEvent, 1)
	go func() { sc <- readSSE(t, ev.resp) }()
	time.Sleep(700 * time.Millisecond) // the history is sent at once
	ev.close()
	if evs := <-sc; len(evs) == 0 || evs[0].name != "ledger" {
		t.Errorf("the other tenant's event stream carried %+v, want its ledger", evs)
	}
}

// stalledStream starts a job stream over a raw connection whose client
// never reads: the command writes far more than the socket buffers hold,
// so the daemon's writes block.
func stalledStream(t *testing.T, url, id, command string) net.Conn {
	t.Helper()
	u, err := neturl.Parse(url)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	conn.(*net.TCPConn).SetReadBuffer(4096)
	body := fmt.Sprintf(`{"command":%q}`, command)
	fmt.Fprintf(conn, "POST /v1/agents/sessions/%s/exec/stream HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
		id, u.Host, token, len(body), body)
	// Read up to the start event, so the stream holds its slot, and no
	// further.
	conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	br := bufio.NewReaderSize(conn, 16)
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("the stalled stream's head: %v", err)
		}
		if strings.HasPrefix(line, "HTTP/1.1 ") && !strings.HasPrefix(line, "HTTP/1.1 200") {
			t.Fatalf("the stalled stream was refused: %s", line)
		}
		if line == "event: start\n" {
			return conn
		}
	}
}

// TestAttackStalledStreamReader: a client starts a streamed command that
// writes without end and then reads nothing. Before the write deadlines,
// the daemon's write blocked for ever, the age limit (checked between
// writes) was never reached and the stream kept its slot: with one job
// stream per session, a second stream was refused for as long as the
// client held on. Now the stream ends at its age (MaxAge 2 s) and, with
// a long age, once one write waited WriteTimeout (1 s); each time a
// second stream goes through within a few seconds.
func TestAttackStalledStreamReader(t *testing.T) {
	d := newTestDaemon(t)
	ctx := context.Background()
	s, err := d.c.CreateSession(ctx, session.CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.c.DeleteSession(ctx, s.ID)
	l := api.DefaultStreamLimits
	defer d.api.SetStreamLimits(l)
	flood := "yes paddock-stalled-reader-paddock-stalled-reader | head -c 100000000"
	for _, c := range []struct {
		what  string
		age   time.Duration
		write time.Duration
	}{
		{"the age limit", 2 * time.Second, 0},
		{"the write limit", time.Hour, time.Second},
	} {
		lim := l
		lim.JobStreamsPerSession, lim.MaxAge, lim.WriteTimeout = 1, c.age, c.write
		if err := d.api.SetStreamLimits(lim); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		conn := stalledStream(t, d.url, s.ID, flood)
		// The stalled stream holds the session's one slot.
		var held bool
		for until := time.Now().Add(5 * time.Second); !held && time.Now().Before(until); time.Sleep(100 * time.Millisecond) {
			o := execStreamOf(t, d.url, token, s.ID)
			if o.status == http.StatusOK {
				o.close()
				continue
			}
			wantRefused(t, c.what+": a second stream", o, api.CodeJobStreamsSession, 1)
			held = true
		}
		if !held {
			t.Fatalf("%s: the stalled stream never took the session's slot", c.what)
		}
		// Within the limit and a few seconds, the slot is free again.
		limit := c.age
		if c.write > 0 {
			limit = c.write
		}
		wait := limit + 5*time.Second
		var freed time.Duration
		for until := start.Add(wait); time.Now().Before(until); time.Sleep(200 * time.Millisecond) {
			o := openStream(t, d.url, token, "POST", "/v1/agents/sessions/"+s.ID+"/exec/stream", `{"command":"echo ok"}`)
			if o.status == http.StatusOK {
				freed = time.Since(start)
				evs := readSSE(t, o.resp)
				if len(evs) == 0 || evs[len(evs)-1].name != "exit" {
					t.Errorf("%s: the second stream carried %+v, want its command to its exit", c.what, evs)
				}
				break
			}
			if o.code != api.CodeJobStreamsSession {
				t.Fatalf("%s: a second stream: %d %q, want 429 %q or a stream", c.what, o.status, o.code, api.CodeJobStreamsSession)
			}
		}
		if freed == 0 {
			t.Fatalf("%s (%s): a client that reads nothing still holds its stream slot after %s", c.what, limit, wait)
		}
		t.Logf("%s (%s): the stalled stream's slot was free again %s after it started", c.what, limit, freed.Round(time.Millisecond))
		conn.Close()
	}
}

// streamedExecs returns the exec entries of session id's ledger that
// came from exec/stream. Events does not settle jobs, so it sees only
// what was recorded without a reader's help.
func streamedExecs(t *testing.T, d *testDaemon, id string) []map[string]any {
	t.Helper()
	es, err := d.c.Events(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for _, e := range es {
		var data map[string]any
		json.Unmarshal(e.Data, &data)
		if e.Kind == "exec" && data["streamed"] == true {
			out = append(out, data)
		}
	}
	return out
}

// TestExecStreamRecordedOnce: a streamed command's exec entry (and its
// job time) is the core's to make when the command ends. A client that
// hangs up while it runs leaves it recorded all the same, with its exit
// code, and its job settled; a client that stays to the end gets exactly
// one entry too (the handler records nothing of its own).
func TestExecStreamRecordedOnce(t *testing.T) {
	d := fakeDaemon(t)
	ctx := context.Background()
	s, err := d.c.CreateSession(ctx, session.CreateRequest{TTLSeconds: 600})
	if err != nil {
		t.Fatal(err)
	}
	defer d.c.DeleteSession(ctx, s.ID)

	// The client leaves after the start event, before the command ends.
	o := openStream(t, d.url, token, "POST", sp(s.ID)+"/exec/stream", `{"command":"sleep 1; exit 7"}`)
	if o.status != 200 {
		t.Fatalf("exec/stream: %d %s", o.status, o.code)
	}
	line, err := bufio.NewReader(o.resp.Body).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "id: ") {
		t.Fatalf("first line of the stream: %q %v", line, err)
	}
	o.close()
	var got []map[string]any
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if got = streamedExecs(t, d, s.ID); len(got) > 0 {
			break
		}
	}
	time.Sleep(time.Second) // room for a second entry, if one were coming
	if got = streamedExecs(t, d, s.ID); len(got) != 1 || got[0]["exit_code"] != float64(7) || got[0]["command"] != "sleep 1; exit 7" {
		t.Fatalf("after the client left: streamed exec entries %v, want one with exit code 7", got)
	}
	if ms, _ := got[0]["duration_ms"].(float64); ms < 900 {
		t.Errorf("duration_ms %v, want about a second", got[0]["duration_ms"])
	}
	if rows, err := d.st.ListJobs(ctx, s.ID); err != nil || len(rows) != 0 {
		t.Errorf("the job is not settled into usage: %d rows left, %v", len(rows), err)
	}

	// The client stays to the exit event.
	code, evs := streamExec(t, d.url, s.ID, "sleep 0.2; echo hi; exit 3")
	if code != 200 || len(evs) == 0 || evs[len(evs)-1].name != "exit" {
		t.Fatalf("exec/stream that stays: %d %+v", code, evs)
	}
	time.Sleep(time.Second)
	got = streamedExecs(t, d, s.ID)
	if len(got) != 2 || got[1]["exit_code"] != float64(3) {
		t.Errorf("after a client stayed: streamed exec entries %v, want a second one with exit code 3", got)
	}
	u, err := d.c.GetSession(ctx, s.ID)
	if err != nil || u.Usage.Execs != 2 || u.Usage.Jobs != 2 {
		t.Errorf("usage %+v %v, want 2 execs and 2 jobs", u.Usage, err)
	}
}
