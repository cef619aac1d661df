package rules

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestPolicyInputJSON(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    PolicyInput
		wantErr string // substring; "" for success
	}{
		{
			name: "spec example",
			in:   `{"preset": "developer-safe", "network": {"default": "deny", "allow": ["example.com"]}}`,
			want: PolicyInput{Preset: "developer-safe", Network: &Network{Default: "deny", Allow: []AllowEntry{{Host: "example.com"}}}},
		},
		{
			name: "string and object entries",
			in: `{"network": {"allow": ["pypi.org", {"host": "github.com", "methods": ["GET", "HEAD"], "paths": ["/org/*"]}],
			      "enforcement": "strict"}}`,
			want: PolicyInput{Network: &Network{
				Allow: []AllowEntry{
					{Host: "pypi.org"},
					{Host: "github.com", Methods: []string{"GET", "HEAD"}, Paths: []string{"/org/*"}},
				},
				Enforcement: "strict",
			}},
		},
		{
			name: "object with host only",
			in:   `{"network": {"allow": [{"host": "a.example"}]}}`,
			want: PolicyInput{Network: &Network{Allow: []AllowEntry{{Host: "a.example"}}}},
		},
		{
			name: "empty lists kept apart from absent ones",
			in:   `{"network": {"allow": [{"host": "a.example", "methods": [], "paths": null}]}}`,
			want: PolicyInput{Network: &Network{Allow: []AllowEntry{{Host: "a.example", Methods: []string{}}}}},
		},
		{name: "empty object", in: `{}`, want: PolicyInput{}},
		{name: "null network", in: `{"network": null}`, want: PolicyInput{}},
		{name: "unknown top-level field", in: `{"presets": "open"}`, wantErr: `unknown field "presets"`},
		{name: "unknown network field", in: `{"network": {"deny": []}}`, wantErr: `unknown field "deny"`},
		{name: "unknown entry field", in: `{"network": {"allow": [{"host": "a.example", "ports": [22]}]}}`, wantErr: `unknown field "ports"`},
		{name: "field names are exact", in: `{"network": {"allow": [{"Host": "a.example"}]}}`, wantErr: `unknown field "Host"`},
		{name: "duplicate field", in: `{"network": {"allow": [{"host": "a.example", "host": "b.example"}]}}`, wantErr: `"host" given twice`},
		{name: "duplicate top-level field", in: `{"preset": "open", "preset": "offline"}`, wantErr: `"preset" given twice`},
		{name: "entry without host", in: `{"network": {"allow": [{"methods": ["GET"]}]}}`, wantErr: "host is missing"},
		{name: "entry of the wrong type", in: `{"network": {"allow": [42]}}`, wantErr: "must be an object"},
		{name: "network of the wrong type", in: `{"network": ["a.example"]}`, wantErr: "must be an object"},
		{name: "methods of the wrong type", in: `{"network": {"allow": [{"host": "a", "methods": "GET"}]}}`, wantErr: "allow entry.methods"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got PolicyInput
			err := json.Unmarshal([]byte(tt.in), &got)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error = %v; want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("decoded (-want +got):\n%s", diff)
			}
		})
	}
}

func TestAllowEntryRoundTrip(t *testing.T) {
	in := `{"preset":"developer-safe","network":{"default":"deny","allow":["pypi.org",{"host":"github.com","methods":["GET"],"paths":["/org/*"]}],"enforcement":"best-effort"}}`
	var p PolicyInput
	if err := json.Unmarshal([]byte(in), &p); err != nil {
		t.Fatal(err)
	}
	out, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != in {
		t.Errorf("round trip:\n got %s\nwant %s", out, in)
	}
}

// TestDisallowUnknownFieldsOutside: a strict outer decoder still reaches
// the entries.
func TestDisallowUnknownFieldsOutside(t *testing.T) {
	var body struct {
		Policy PolicyInput `json:"policy"`
	}
	dec := json.NewDecoder(strings.NewReader(`{"policy": {"network": {"allow": [{"host": "a.example", "extra": 1}]}}}`))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err == nil || !strings.Contains(err.Error(), `unknown field "extra"`) {
		t.Fatalf("error = %v; want unknown field", err)
	}
}
