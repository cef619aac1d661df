package main

import (
	"bytes"
	"encoding/json"
	"go/parser"
	"go/token"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode"

	apiv1 "paddock.dev/paddock/api"
	"paddock.dev/paddock/guest/api"
	"paddock.dev/paddock/hostd/approvals"
	"paddock.dev/paddock/hostd/auth"
	"paddock.dev/paddock/hostd/grants"
	"paddock.dev/paddock/hostd/ledger"
	"paddock.dev/paddock/hostd/previews"
	"paddock.dev/paddock/hostd/sandboxes"
	"paddock.dev/paddock/hostd/session"
	"paddock.dev/paddock/hostd/tokens"
)

func TestCellEscapes(t *testing.T) {
	for _, tc := range []struct{ in, cell, text string }{
		{"plain name.txt", "plain name.txt", "plain name.txt"},
		{"ünïcødé 名前 🙂", "ünïcødé 名前 🙂", "ünïcødé 名前 🙂"},
		{"a\x1b[2Jb", `a\x1b[2Jb`, `a\x1b[2Jb`},
		{"row\nforged", `row\nforged`, "row\nforged"},
		{"col\tforged", `col\tforged`, "col\tforged"},
		{"over\rwrite", `over\rwrite`, `over\rwrite`},
		{"bell\a\b\f\v\x00\x7f", `bell\a\b\f\v\x00\x7f`, `bell\a\b\f\v\x00\x7f`},
		{"c1 \u009b2J", `c1 \u009b2J`, `c1 \u009b2J`},
		{"bidi \u202egnp.exe", `bidi \u202egnp.exe`, `bidi \u202egnp.exe`},
		{"zero\u200bwidth", `zero\u200bwidth`, `zero\u200bwidth`},
		{"line\u2028sep", `line\u2028sep`, `line\u2028sep`},
		{"bad \xff\xfe utf8", `bad \xff\xfe utf8`, `bad \xff\xfe utf8`},
		{`back\slash`, `back\\slash`, `back\\slash`},
		{`looks\x1bescaped`, `looks\\x1bescaped`, `looks\\x1bescaped`},
	} {
		if got := cell(tc.in); got != tc.cell {
			t.Errorf("cell(%q) = %q, want %q", tc.in, got, tc.cell)
		}
		if got := text(tc.in); got != tc.text {
			t.Errorf("text(%q) = %q, want %q", tc.in, got, tc.text)
		}
	}
	// JSON keeps its own escapes; what JSON lets through raw (C1
	// controls, format characters) is escaped; invalid JSON is a cell.
	for _, tc := range []struct{ in, want string }{
		{`{ "a": "x\"y\u001b" }`, `{"a":"x\"y\u001b"}`},
		{"{\"a\":\"\u009b\u202e\"}", `{"a":"\u009b\u202e"}`},
		{"not json \x1b\\", `not json \x1b\\`},
	} {
		if got := string(newJSONCell([]byte(tc.in))); got != tc.want {
			t.Errorf("newJSONCell(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestEveryTableEscapes holds every table the CLI prints to cell: (1) no
// file of the package but table.go uses text/tabwriter, so a table can
// only be a table, whose rows escape each cell; (2) every command that
// prints a table (or a line) of what a daemon answered runs against a fake
// daemon whose every string field holds an escape sequence, a newline, a
// tab, a carriage return, a C1 control and a bidirectional override: its
// output holds none of them raw, no forged line, and the value escaped;
// with --json the exact value comes back.
func TestEveryTableEscapes(t *testing.T) {
	t.Run("tabwriter only in table.go", func(t *testing.T) {
		files, err := filepath.Glob("*.go")
		if err != nil || len(files) == 0 {
			t.Fatalf("glob: %v %v", files, err)
		}
		fset := token.NewFileSet()
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") || f == "table.go" {
				continue
			}
			file, err := parser.ParseFile(fset, f, nil, parser.ImportsOnly)
			if err != nil {
				t.Fatal(err)
			}
			for _, imp := range file.Imports {
				if imp.Path.Value == `"text/tabwriter"` {
					t.Errorf("%s imports text/tabwriter: print tables with newTable and row (table.go), which escape every cell", f)
				}
			}
		}
	})

	const hostile = "a\x1b[2J\nFORGED\tcol\rx\u202ey\u009bz\\w"
	const escaped = `a\x1b[2J\nFORGED\tcol\rx\u202ey\u009bz\\w`
	var (
		sess      session.Session
		artifacts session.Artifacts
		entry     ledger.Entry
		listing   api.Listing
		job       session.Job
		grant     grants.Grant
		tok       tokens.SessionToken
		appr      approvals.Approval
		prev      previews.Preview
		sbx       sandboxes.Sandbox
		who       auth.WhoAmI
		cs        apiv1.Changeset
	)
	for _, v := range []any{&sess, &artifacts, &entry, &listing, &job, &grant, &tok, &appr, &prev, &sbx, &who, &cs} {
		fill(reflect.ValueOf(v).Elem(), hostile)
	}
	// A changeset's file content is bytes, which fill leaves alone.
	cs.Files[0].Content = []byte(hostile)
	cs.Files[0].Op = "modified"
	entry.Data, _ = json.Marshal(map[string]string{"path": hostile})
	const sp = "/v1/agents/sessions/ses-1"
	answers := map[string]any{
		"/v1/agents/sessions":            map[string]any{"sessions": []*session.Session{&sess}},
		sp:                               &sess,
		sp + "/artifacts":                &artifacts,
		sp + "/events":                   map[string]any{"ledger": []ledger.Entry{entry}},
		sp + "/files":                    &listing,
		sp + "/jobs":                     map[string]any{"jobs": []session.Job{job}},
		sp + "/grants":                   map[string]any{"grants": []grants.Grant{grant}},
		sp + "/tokens":                   map[string]any{"tokens": []tokens.SessionToken{tok}},
		sp + "/approvals":                map[string]any{"approvals": []approvals.Approval{appr}},
		sp + "/previews":                 map[string]any{"previews": []previews.Preview{prev}},
		sp + "/approvals/ap-1/approve":   &appr,
		"/v1/sandboxes":                  map[string]any{"sandboxes": []*sandboxes.Sandbox{&sbx}},
		"/v1/sandboxes/sbx-1":            &sbx,
		"/v1/whoami":                     &who,
		sp + "/changesets":               apiv1.ChangesetList{Changesets: []apiv1.Changeset{cs}},
		sp + "/changesets/cs-1":          &cs,
		sp + "/changesets/cs-1/decide":   &cs,
		sp + "/speculate":                &cs,
		"/v1/sandboxes/sbx-1/changesets": apiv1.ChangesetList{Changesets: []apiv1.Changeset{cs}},
		"/v1/sandboxes/sbx-1/changesets/cs-1/apply": apiv1.ApplyResult{Changeset: cs, Applied: []string{hostile}},
	}
	daemon := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		v, ok := answers[r.URL.Path]
		if !ok {
			http.Error(w, `{"error":{"code":"not_found","message":"no such route in the fake"}}`, http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(v)
	}))
	defer daemon.Close()

	run := func(t *testing.T, args ...string) string {
		t.Helper()
		root := newRoot()
		var out, errOut bytes.Buffer
		root.SetOut(&out)
		root.SetErr(&errOut)
		// --url and --token belong to the session and sandboxes commands.
		args = append(args, "--url", daemon.URL, "--token", "pdk_fake")
		root.SetArgs(args)
		if err := root.Execute(); err != nil {
			t.Fatalf("%v: %v\n%s", args, err, errOut.String())
		}
		return out.String()
	}
	for _, args := range [][]string{
		{"session", "ls"},
		{"session", "get", "ses-1"},
		{"session", "artifacts", "ses-1"},
		{"session", "timeline", "ses-1"},
		{"session", "files", "ses-1", "/workspace"},
		{"session", "jobs", "ses-1"},
		{"session", "grants", "ses-1"},
		{"session", "tokens", "ses-1"},
		{"session", "approvals", "ses-1"},
		{"session", "approve", "ses-1", "ap-1"},
		{"session", "previews", "ses-1"},
		{"session", "whoami"},
		{"sandboxes", "ls"},
		{"sandboxes", "get", "sbx-1"},
		{"session", "changesets", "ses-1"},
		{"session", "changeset", "ses-1", "cs-1"},
		{"session", "changeset", "ses-1", "cs-1", "approve"},
		{"sandboxes", "changeset", "sbx-1", "cs-1", "apply"},
		{"session", "speculate", "ses-1", "--path", "/workspace", "true"},
		{"sandboxes", "changesets", "sbx-1"},
	} {
		t.Run(strings.Join(args[:2], " "), func(t *testing.T) {
			out := run(t, args...)
			for _, r := range out {
				if r != '\n' && (unicode.IsControl(r) || unicode.In(r, unicode.Cf)) {
					t.Errorf("raw %U in the output:\n%s", r, out)
					break
				}
			}
			for _, line := range strings.Split(out, "\n") {
				if strings.HasPrefix(strings.TrimSpace(line), "FORGED") {
					t.Errorf("a forged line: %q", line)
				}
			}
			if !strings.Contains(out, escaped) && !strings.Contains(out, strings.ReplaceAll(escaped, `\\`, `\\\\`)) {
				t.Errorf("the value is not shown escaped (%s):\n%s", escaped, out)
			}
		})
	}
	t.Run("json keeps the exact value", func(t *testing.T) {
		var l api.Listing
		if err := json.Unmarshal([]byte(run(t, "--json", "session", "files", "ses-1", "/workspace")), &l); err != nil || len(l.Entries) != 1 || l.Entries[0].Name != hostile {
			t.Errorf("files --json: %+v %v", l, err)
		}
		var jobs []session.Job
		if err := json.Unmarshal([]byte(run(t, "--json", "session", "jobs", "ses-1")), &jobs); err != nil || len(jobs) != 1 || jobs[0].Command != hostile {
			t.Errorf("jobs --json: %+v %v", jobs, err)
		}
	})
}

// fill sets every exported string in v (fields, slices, pointers to
// structs, one element per slice) to s; times and numbers stay.
func fill(v reflect.Value, s string) {
	switch v.Kind() {
	case reflect.String:
		v.SetString(s)
	case reflect.Pointer:
		if v.Type().Elem().Kind() == reflect.Struct && v.Type().Elem() != reflect.TypeOf(time.Time{}) {
			if v.IsNil() {
				v.Set(reflect.New(v.Type().Elem()))
			}
			fill(v.Elem(), s)
		}
	case reflect.Struct:
		if v.Type() == reflect.TypeOf(time.Time{}) {
			return
		}
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(v.Field(i), s)
			}
		}
	case reflect.Slice:
		if k := v.Type().Elem().Kind(); k == reflect.String || k == reflect.Struct || k == reflect.Pointer {
			v.Set(reflect.MakeSlice(v.Type(), 1, 1))
			fill(v.Index(0), s)
		}
	}
}
