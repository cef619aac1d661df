package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	apiv1 "paddock.dev/paddock/api"
)

// otlpTrace builds an OTLP/HTTP JSON trace of a trajectory: one root span
// agent.session and one child span per step. The trace id is derived from
// the session id; an exec span covers its duration_ms, other steps are
// instants; a non-zero exit makes the span's status an error.
func otlpTrace(t apiv1.Trajectory) map[string]any {
	sum := sha256.Sum256([]byte(t.Session.ID))
	traceID := hex.EncodeToString(sum[:16])
	spanID := func() string {
		var b [8]byte
		rand.Read(b[:])
		return hex.EncodeToString(b[:])
	}
	ns := func(tm time.Time) string { return strconv.FormatInt(tm.UnixNano(), 10) }
	attr := func(k, v string) map[string]any {
		return map[string]any{"key": k, "value": map[string]any{"stringValue": v}}
	}
	root := spanID()
	end := t.Session.CreatedAt
	var spans []map[string]any
	for _, st := range t.Steps {
		var d struct {
			DurationMS int64  `json:"duration_ms"`
			ExitCode   *int   `json:"exit_code"`
			Command    string `json:"command"`
		}
		json.Unmarshal(st.Data, &d)
		start, stop := st.Time, st.Time
		if d.DurationMS > 0 {
			start = st.Time.Add(-time.Duration(d.DurationMS) * time.Millisecond)
		}
		if stop.After(end) {
			end = stop
		}
		status := map[string]any{"code": 1}
		if d.ExitCode != nil && *d.ExitCode != 0 {
			status = map[string]any{"code": 2, "message": fmt.Sprintf("exit code %d", *d.ExitCode)}
		}
		attrs := []map[string]any{attr("paddock.step", strconv.Itoa(st.Step)), attr("paddock.kind", st.Kind)}
		if d.Command != "" {
			attrs = append(attrs, attr("paddock.command", d.Command))
		}
		spans = append(spans, map[string]any{
			"traceId": traceID, "spanId": spanID(), "parentSpanId": root, "name": st.Kind, "kind": 1,
			"startTimeUnixNano": ns(start), "endTimeUnixNano": ns(stop), "attributes": attrs, "status": status,
		})
	}
	spans = append([]map[string]any{{
		"traceId": traceID, "spanId": root, "name": "agent.session", "kind": 1,
		"startTimeUnixNano": ns(t.Session.CreatedAt), "endTimeUnixNano": ns(end),
		"attributes": []map[string]any{attr("paddock.session", t.Session.ID), attr("paddock.agent", t.Session.Agent)},
	}}, spans...)
	return map[string]any{"resourceSpans": []map[string]any{{
		"resource":   map[string]any{"attributes": []map[string]any{attr("service.name", "paddock")}},
		"scopeSpans": []map[string]any{{"scope": map[string]any{"name": "paddock"}, "spans": spans}},
	}}}
}

// sendOTLP posts the trace to <endpoint>/v1/traces with extra headers.
func sendOTLP(ctx context.Context, endpoint string, headers []string, trace map[string]any) (int, error) {
	body, err := json.Marshal(trace)
	if err != nil {
		return 0, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(endpoint, "/")+"/v1/traces", bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	for _, h := range headers {
		k, v, ok := strings.Cut(h, "=")
		if !ok || k == "" {
			return 0, usageError{fmt.Errorf("--otlp-header %q: want KEY=VALUE", h)}
		}
		req.Header.Set(k, v)
	}
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode/100 != 2 {
		return 0, fmt.Errorf("the collector answered %s", resp.Status)
	}
	spans := trace["resourceSpans"].([]map[string]any)[0]["scopeSpans"].([]map[string]any)[0]["spans"].([]map[string]any)
	return len(spans), nil
}
