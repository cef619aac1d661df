package egress_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"paddock.dev/paddock/egress/rules"
	"paddock.dev/paddock/hostd/ledger"
	"paddock.dev/paddock/hostd/session"
)

// floodScript sends n requests through the sandbox's proxy as fast as
// one connection (kept alive) allows: first to one denied host, then to
// distinct denied hosts, and prints how each was answered.
const floodScript = `
import http.client, json, os, sys, urllib.parse
same, distinct = int(sys.argv[1]), int(sys.argv[2])
p = urllib.parse.urlparse(os.environ['http_proxy'])
codes, c = {}, None
for i in range(same + distinct):
    host = 'flood.test' if i < same else 'd%d.flood.test' % i
    try:
        if c is None:
            c = http.client.HTTPConnection(p.hostname, p.port, timeout=20)
        c.request('GET', 'http://%s/%d' % (host, i), headers={'Host': host})
        r = c.getresponse(); r.read()
        k = str(r.status)
        if r.will_close:
            c.close(); c = None
    except Exception as e:
        k, c = type(e).__name__, None
    codes[k] = codes.get(k, 0) + 1
print(json.dumps(codes))
`

// TestAttackEgressFloodIsBounded runs the flood of issue 16 from a real
// sandbox: thousands of denied requests, to one host and to hundreds of
// distinct ones, as fast as the proxy answers. What the daemon writes
// stays bounded (a few hundred egress log rows and ledger entries, not a
// row per request), every refusal is still counted (the log's counts add
// up to the requests, and so do the ledger's itemised entries and its
// egress.summary counts), and the ledger verifies.
func TestAttackEgressFloodIsBounded(t *testing.T) {
	onBackends(t, procboxOnly, egressFloodIsBounded)
}

func egressFloodIsBounded(t *testing.T, backend string) {
	ctx := context.Background()
	tn := newTestNet(t, map[string]string{"allowed.test.": "10.99.0.10"}, nil)
	m, st, _ := daemonFor(t, backend, tn.egressConfig(), nil)
	s, err := m.Create(ctx, "", session.CreateRequest{Policy: &session.PolicyRequest{PolicyInput: rules.PolicyInput{
		Network: &rules.Network{Default: "deny", Allow: []rules.AllowEntry{{Host: "allowed.test"}}}}}})
	if err != nil {
		t.Fatal(err)
	}
	const same, distinct = 2500, 500
	const n = same + distinct
	res, err := m.Exec(ctx, "", s.ID, session.ExecRequest{
		Command:        fmt.Sprintf("python3 -c %s %d %d", shellQuote(floodScript), same, distinct),
		TimeoutSeconds: 300})
	if err != nil {
		t.Fatal(err)
	}
	var codes map[string]int
	if err := json.Unmarshal([]byte(strings.TrimSpace(res.Stdout)), &codes); err != nil || codes["403"] != n {
		t.Fatalf("the flood: %v %q %q, want %d answers 403", err, res.Stdout, res.Stderr, n)
	}
	t.Logf("%d requests refused in %d ms", n, res.DurationMS)

	// While the session runs: bounded already.
	led := ledger.New(st)
	es, err := led.List(ctx, s.ID, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := st.ListEgressLog(ctx, s.ID, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	// The first refusal of each host in the session is ledgered while the
	// refusals' budget (256 keys) lasts; past it, counts only.
	if len(es) > 320 || len(rows) > 400 {
		t.Errorf("after %d refusals: %d ledger entries, %d egress log rows", n, len(es), len(rows))
	}
	// Deleting the session closes its window: every refusal is counted.
	if err := m.Delete(ctx, "", s.ID); err != nil {
		t.Fatal(err)
	}
	rows, _ = st.ListEgressLog(ctx, s.ID, 0, 0)
	var logged int64
	hosts := map[string]bool{}
	for _, r := range rows {
		if r.Kind != "egress.deny" {
			t.Errorf("egress log row %+v", r)
		}
		logged += r.Count
		hosts[r.Host] = true
	}
	if logged != n || len(rows) > 400 || !hosts["flood.test"] {
		t.Errorf("egress log: %d rows counting %d refusals (want %d), hosts %d", len(rows), logged, n, len(hosts))
	}
	es, _ = led.List(ctx, s.ID, 0, 0)
	var itemised, notItemised, summaries int64
	for _, e := range es {
		switch e.Kind {
		case "egress.deny":
			itemised++
		case "egress.summary":
			summaries++
			var d struct {
				NotItemised int64 `json:"not_itemised"`
			}
			if err := json.Unmarshal(e.Data, &d); err != nil {
				t.Fatal(err)
			}
			notItemised += d.NotItemised
		case "egress.allow", "dns.deny", "egress.dropped":
			t.Errorf("unexpected %s: %s", e.Kind, e.Data)
		}
	}
	if itemised+notItemised != n || summaries == 0 || len(es) > 320 {
		t.Errorf("ledger: %d entries, %d egress.deny itemised + %d in %d summaries, want %d refusals", len(es), itemised, notItemised, summaries, n)
	}
	if v, err := led.Verify(ctx, s.ID); err != nil || !v.OK {
		t.Errorf("verify: %+v %v", v, err)
	}
	t.Logf("%d refusals: %d ledger entries (%d summaries), %d egress log rows", n, len(es), summaries, len(rows))
}

// shellQuote quotes s for sh.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
