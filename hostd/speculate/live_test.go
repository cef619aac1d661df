package speculate_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	apiv1 "paddock.dev/paddock/api"
	"paddock.dev/paddock/hostd/daemon/daemontest"
)

// call sends a JSON request to the daemon as token and decodes a 2xx
// answer into out; it returns the status and, for an error, its code.
func call(t *testing.T, d *daemontest.Daemon, token, method, path string, in, out any) (int, string) {
	t.Helper()
	var body io.Reader
	if in != nil {
		b, _ := json.Marshal(in)
		body = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, d.URL+path, body)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	if res.StatusCode/100 != 2 {
		var e struct {
			Code  string `json:"code"`
			Error string `json:"error"`
		}
		json.Unmarshal(raw, &e)
		t.Logf("%s %s: %d %s %s", method, path, res.StatusCode, e.Code, e.Error)
		return res.StatusCode, e.Code
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatalf("%s %s: decode %s: %v", method, path, raw, err)
		}
	}
	return res.StatusCode, ""
}

// liveSession starts a daemon (procbox and the mini image unless opts
// say otherwise) and creates a session on it with req; base is the
// session's API path.
func liveSession(t *testing.T, req apiv1.CreateRequest, opts ...daemontest.Option) (d *daemontest.Daemon, s *apiv1.Session, base string) {
	t.Helper()
	d = daemontest.New(t, opts...)
	s, err := d.Client.CreateSession(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	return d, s, "/v1/agents/sessions/" + s.ID
}

func ops(cs *apiv1.Changeset) string {
	var out []string
	for _, f := range cs.Files {
		out = append(out, f.Op+":"+f.Path)
	}
	return strings.Join(out, ",")
}

// TestSpeculateSessionLive: a speculation on a session shows an added, a
// modified and a deleted file without making them (the session's files
// are unchanged and its running job keeps running); approve and apply
// make them; a second speculation whose file the session changes meanwhile
// is refused at apply with changeset_conflict and writes nothing; a
// rejected changeset is not applied.
func TestSpeculateSessionLive(t *testing.T) {
	d, s, base := liveSession(t, apiv1.CreateRequest{})
	c := d.Client
	ctx := context.Background()
	ws := s.Workspace.Path
	daemontest.Sh(t, c, s.ID, "cd "+ws+" && mkdir -p src && echo one > src/a.txt && echo gone > src/b.txt && echo keep > src/k.txt && chmod 0600 src/k.txt")
	var job apiv1.Job
	if st, _ := call(t, d, d.Token, "POST", base+"/jobs", apiv1.JobStart{Command: "i=0; while true; do i=$((i+1)); echo $i > " + ws + "/counter; sleep 0.1; done"}, &job); st/100 != 2 {
		t.Fatal("start a job")
	}

	var cs apiv1.Changeset
	if st, code := call(t, d, d.Token, "POST", base+"/speculate", apiv1.SpeculateRequest{
		Command: "printf '%s%s\\n' ON E > src/a.txt && rm src/b.txt && echo new > src/n.txt && chmod 0755 src/n.txt && echo out",
		Paths:   []string{"src"}}, &cs); st != 201 {
		t.Fatalf("speculate: %d %s", st, code)
	}
	if got, want := ops(&cs), "modified:"+ws+"/src/a.txt,deleted:"+ws+"/src/b.txt,added:"+ws+"/src/n.txt"; got != want {
		t.Errorf("files %s, want %s", got, want)
	}
	if cs.Status != apiv1.ChangesetPending || !cs.Complete || cs.ExitCode != 0 || cs.Stdout != "out\n" || cs.How != "fork" || cs.Target != s.ID || cs.TargetKind != "session" {
		t.Errorf("changeset %+v", cs)
	}
	if len(cs.Files) == 3 && (string(cs.Files[0].Content) != "ONE\n" || cs.Files[0].BaseSHA256 == "" || cs.Files[2].Mode != "0755") {
		t.Errorf("files %+v", cs.Files)
	}
	// The session is untouched and its job still counts.
	if out := daemontest.Sh(t, c, s.ID, "cd "+ws+"/src && cat a.txt b.txt && ls"); out != "one\ngone\na.txt\nb.txt\nk.txt\n" {
		t.Errorf("the session after a speculation: %q", out)
	}
	n1 := daemontest.Sh(t, c, s.ID, "cat "+ws+"/counter")
	daemontest.Sh(t, c, s.ID, "sleep 0.5")
	if n2 := daemontest.Sh(t, c, s.ID, "cat "+ws+"/counter"); n2 == n1 {
		t.Errorf("the job stopped counting: %s then %s", n1, n2)
	}
	var jobs []apiv1.Job
	var jl struct {
		Jobs []apiv1.Job `json:"jobs"`
	}
	call(t, d, d.Token, "GET", base+"/jobs", nil, &jl)
	jobs = jl.Jobs
	if len(jobs) != 1 || jobs[0].ID != job.ID || jobs[0].State != "running" {
		t.Errorf("the jobs after a speculation: %+v", jobs)
	}

	// A second speculation, whose file the session then changes.
	var cs2 apiv1.Changeset
	if st, _ := call(t, d, d.Token, "POST", base+"/speculate", apiv1.SpeculateRequest{
		Command: "echo two > src/k.txt && echo x > src/x.txt", Paths: []string{ws + "/src"}}, &cs2); st != 201 {
		t.Fatal("second speculation")
	}
	if st, code := call(t, d, d.Token, "POST", base+"/changesets/"+cs.ID+"/apply", nil, nil); st != 409 || code != "changeset_not_approved" {
		t.Errorf("apply of a pending changeset: %d %s", st, code)
	}
	var dec apiv1.Changeset
	if st, _ := call(t, d, d.Token, "POST", base+"/changesets/"+cs.ID+"/decide", apiv1.ChangesetDecision{Decision: "approve", Reason: "looks right"}, &dec); st != 200 || dec.Status != apiv1.ChangesetApproved || dec.DecidedBy != "admin" {
		t.Fatalf("approve: %d %+v", st, dec)
	}
	var ar apiv1.ApplyResult
	if st, _ := call(t, d, d.Token, "POST", base+"/changesets/"+cs.ID+"/apply", nil, &ar); st != 200 || len(ar.Applied) != 3 || ar.Changeset.Status != apiv1.ChangesetApplied {
		t.Fatalf("apply: %d %+v", st, ar)
	}
	if out := daemontest.Sh(t, c, s.ID, "cd "+ws+"/src && cat a.txt n.txt && stat -c %a n.txt && test ! -e b.txt && echo nob"); out != "ONE\nnew\n755\nnob\n" {
		t.Errorf("the session after apply: %q", out)
	}
	if st, code := call(t, d, d.Token, "POST", base+"/changesets/"+cs.ID+"/apply", nil, nil); st != 409 || code != "changeset_not_approved" {
		t.Errorf("a second apply: %d %s", st, code)
	}

	daemontest.Sh(t, c, s.ID, "echo mine > "+ws+"/src/k.txt")
	call(t, d, d.Token, "POST", base+"/changesets/"+cs2.ID+"/decide", apiv1.ChangesetDecision{Decision: "approve"}, nil)
	if st, code := call(t, d, d.Token, "POST", base+"/changesets/"+cs2.ID+"/apply", nil, nil); st != 409 || code != "changeset_conflict" {
		t.Errorf("apply over a changed file: %d %s", st, code)
	}
	if out := daemontest.Sh(t, c, s.ID, "cd "+ws+"/src && cat k.txt && test ! -e x.txt && echo nox"); out != "mine\nnox\n" {
		t.Errorf("a refused apply wrote: %q", out)
	}

	// Rejected: never applied.
	var cs3 apiv1.Changeset
	call(t, d, d.Token, "POST", base+"/speculate", apiv1.SpeculateRequest{Command: "echo r > src/r.txt", Paths: []string{"src"}}, &cs3)
	if st, _ := call(t, d, d.Token, "POST", base+"/changesets/"+cs3.ID+"/decide", apiv1.ChangesetDecision{Decision: "reject"}, nil); st != 200 {
		t.Fatal("reject")
	}
	if st, code := call(t, d, d.Token, "POST", base+"/changesets/"+cs3.ID+"/apply", nil, nil); st != 409 || code != "changeset_not_approved" {
		t.Errorf("apply of a rejected changeset: %d %s", st, code)
	}
	if st, code := call(t, d, d.Token, "POST", base+"/changesets/"+cs3.ID+"/decide", apiv1.ChangesetDecision{Decision: "approve"}, nil); st != 409 || code != "changeset_decided" {
		t.Errorf("a second decision: %d %s", st, code)
	}
	var list apiv1.ChangesetList
	if st, _ := call(t, d, d.Token, "GET", base+"/changesets", nil, &list); st != 200 || len(list.Changesets) != 3 {
		t.Fatalf("list: %d %d", st, len(list.Changesets))
	}
	for _, x := range list.Changesets {
		for _, f := range x.Files {
			if len(f.Content) != 0 {
				t.Errorf("the list carries content of %s", f.Path)
			}
		}
	}
	var full apiv1.Changeset
	if st, _ := call(t, d, d.Token, "GET", base+"/changesets/"+cs2.ID, nil, &full); st != 200 || len(full.Files) != 2 || string(full.Files[0].Content) != "two\n" {
		t.Errorf("get: %d %+v", st, full.Files)
	}
	// The ledger has the verbs and never the contents.
	evs, err := c.Events(ctx, s.ID)
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	for _, e := range evs {
		kinds[e.Kind]++
		if strings.Contains(string(e.Data), "ONE") && e.Kind != "exec" {
			t.Errorf("ledger entry %s carries content: %s", e.Kind, e.Data)
		}
	}
	if kinds["speculate"] != 3 || kinds["changeset.decide"] != 3 || kinds["changeset.apply"] != 2 {
		t.Errorf("ledger kinds %v", kinds)
	}
}

// TestSpeculateFilePathsLive: paths may name files, one that exists (its
// change is recorded) and one that does not yet (the command makes it);
// what the command does outside the paths is not recorded, and apply
// writes only what was.
func TestSpeculateFilePathsLive(t *testing.T) {
	d, s, base := liveSession(t, apiv1.CreateRequest{})
	c := d.Client
	ws := s.Workspace.Path
	daemontest.Sh(t, c, s.ID, "cd "+ws+" && echo 1 > conf && echo keep > other")
	var cs apiv1.Changeset
	if st, _ := call(t, d, d.Token, "POST", base+"/speculate", apiv1.SpeculateRequest{
		Command: "echo 2 > conf && echo made > fresh && echo changed > other", Paths: []string{"conf", ws + "/fresh"}}, &cs); st != 201 {
		t.Fatalf("speculate: %d", st)
	}
	if got, want := ops(&cs), "modified:"+ws+"/conf,added:"+ws+"/fresh"; got != want || !cs.Complete {
		t.Fatalf("files %s, want %s (complete %v)", got, want, cs.Complete)
	}
	call(t, d, d.Token, "POST", base+"/changesets/"+cs.ID+"/decide", apiv1.ChangesetDecision{Decision: "approve"}, nil)
	if st, _ := call(t, d, d.Token, "POST", base+"/changesets/"+cs.ID+"/apply", nil, nil); st != 200 {
		t.Fatalf("apply: %d", st)
	}
	if out := daemontest.Sh(t, c, s.ID, "cd "+ws+" && cat conf fresh other"); out != "2\nmade\nkeep\n" {
		t.Errorf("after apply: %q", out)
	}
}
