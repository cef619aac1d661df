package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/BurntSushi/toml"
)

// This file merges our server entry into a client's configuration file and
// reads it back. Everything else in the file is kept: other keys and
// servers, their order and (for TOML) comments and layout. Only the entry
// named mcpServerName is replaced. A file that does not parse is refused.

// maxConfigFile bounds a configuration file read (~/.claude.json can hold
// a long history, so the bound is generous).
const maxConfigFile = 16 << 20

// mergeConfig returns old with our entry for l put in, and whether that
// changes anything. When it does not, out is old itself (byte for byte).
func mergeConfig(c mcpClient, old []byte, l mcpLaunch) (out []byte, changed bool, err error) {
	if c.toml {
		return mergeTOML(old, l)
	}
	if len(bytes.TrimSpace(old)) == 0 && c.seed != nil {
		old = c.seed
	}
	return mergeJSON(old, c.key, c.entry(l))
}

// jsonMember is one member of a JSON object, its value as written.
type jsonMember struct {
	key string
	val json.RawMessage
}

// parseJSONObject reads a JSON object keeping its members in order. Blank
// input is an empty object.
func parseJSONObject(b []byte) ([]jsonMember, error) {
	if len(bytes.TrimSpace(b)) == 0 {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if t, err := dec.Token(); err != nil {
		return nil, err
	} else if d, ok := t.(json.Delim); !ok || d != '{' {
		return nil, errors.New("it is not a JSON object")
	}
	var ms []jsonMember
	seen := map[string]bool{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, err
		}
		k, _ := t.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		if seen[k] {
			return nil, fmt.Errorf("the key %q appears twice", k)
		}
		seen[k] = true
		ms = append(ms, jsonMember{k, v})
	}
	if _, err := dec.Token(); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("there is more after the JSON object (comments are not supported here)")
	}
	return ms, nil
}

// encodeJSONObject writes members as one compact object.
func encodeJSONObject(ms []jsonMember) []byte {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, m := range ms {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(marshalNoEscape(m.key))
		b.WriteByte(':')
		b.Write(m.val)
	}
	b.WriteByte('}')
	return b.Bytes()
}

// marshalNoEscape is json.Marshal without turning <, > and & into \u
// escapes (a path may hold &).
func marshalNoEscape(v any) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic(err) // only our own strings, maps and structs come here
	}
	return bytes.TrimRight(b.Bytes(), "\n")
}

// jsonIndent is the indent the file already uses (its first indented
// line), two spaces for a new file.
func jsonIndent(b []byte) string {
	for _, line := range bytes.Split(b, []byte("\n"))[1:] {
		trimmed := bytes.TrimLeft(line, " \t")
		if len(trimmed) > 0 && len(trimmed) < len(line) {
			return string(line[:len(line)-len(trimmed)])
		}
	}
	return "  "
}

func sameJSON(a, b []byte) bool {
	var x, y bytes.Buffer
	return json.Compact(&x, a) == nil && json.Compact(&y, b) == nil && bytes.Equal(x.Bytes(), y.Bytes())
}

func mergeJSON(old []byte, key string, entry any) ([]byte, bool, error) {
	top, err := parseJSONObject(old)
	if err != nil {
		return nil, false, fmt.Errorf("it is not valid JSON: %w", err)
	}
	want := marshalNoEscape(entry)
	ti := -1
	var servers []jsonMember
	for i, m := range top {
		if m.key == key {
			ti = i
			if servers, err = parseJSONObject(m.val); err != nil {
				return nil, false, fmt.Errorf("its %q is not a JSON object: %w", key, err)
			}
		}
	}
	si := -1
	for i, m := range servers {
		if m.key == mcpServerName {
			si = i
		}
	}
	if si >= 0 && sameJSON(servers[si].val, want) {
		return old, false, nil
	}
	if si >= 0 {
		servers[si].val = want
	} else {
		servers = append(servers, jsonMember{mcpServerName, want})
	}
	if ti >= 0 {
		top[ti].val = encodeJSONObject(servers)
	} else {
		top = append(top, jsonMember{key, encodeJSONObject(servers)})
	}
	var out bytes.Buffer
	if err := json.Indent(&out, encodeJSONObject(top), "", jsonIndent(old)); err != nil {
		return nil, false, err
	}
	out.WriteByte('\n')
	return out.Bytes(), true, nil
}

// jsonEntry finds our entry in a JSON file: its raw value, or nil.
func jsonEntry(b []byte, key string) (json.RawMessage, error) {
	top, err := parseJSONObject(b)
	if err != nil {
		return nil, err
	}
	for _, m := range top {
		if m.key != key {
			continue
		}
		servers, err := parseJSONObject(m.val)
		if err != nil {
			return nil, err
		}
		for _, s := range servers {
			if s.key == mcpServerName {
				return s.val, nil
			}
		}
	}
	return nil, nil
}

// tomlHeader matches a table header line, [a.b] or [[a.b]].
var tomlHeader = regexp.MustCompile(`^\s*(\[\[?)\s*([^\[\]#]+?)\s*\]\]?\s*(#.*)?$`)

// isOurTOMLTable says whether a header's key is mcp_servers.paddock or
// one of its sub-tables (such as mcp_servers.paddock.env).
func isOurTOMLTable(key string) bool {
	parts := strings.Split(key, ".")
	if len(parts) < 2 {
		return false
	}
	unq := func(s string) string { return strings.Trim(strings.TrimSpace(s), `"'`) }
	return unq(parts[0]) == "mcp_servers" && unq(parts[1]) == mcpServerName
}

// tomlString quotes s as a TOML basic string.
func tomlString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\u%04X`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

var bareTOMLKey = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// renderTOML is our [mcp_servers.paddock] table.
func renderTOML(l mcpLaunch) string {
	var b strings.Builder
	fmt.Fprintf(&b, "[mcp_servers.%s]\ncommand = %s\nargs = [", mcpServerName, tomlString(l.Command))
	for i, a := range l.Args {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(tomlString(a))
	}
	b.WriteString("]\n")
	if len(l.Env) > 0 {
		keys := make([]string, 0, len(l.Env))
		for k := range l.Env {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		b.WriteString("env = { ")
		for i, k := range keys {
			if i > 0 {
				b.WriteString(", ")
			}
			if bareTOMLKey.MatchString(k) {
				b.WriteString(k)
			} else {
				b.WriteString(tomlString(k))
			}
			b.WriteString(" = " + tomlString(l.Env[k]))
		}
		b.WriteString(" }\n")
	}
	return b.String()
}

// tomlLaunch is our entry as Codex reads it.
type tomlLaunch struct {
	Command string            `toml:"command"`
	Args    []string          `toml:"args"`
	Env     map[string]string `toml:"env"`
}

// decodeTOML reads a whole file and our entry in it (nil when absent).
func decodeTOML(b []byte) (map[string]any, *tomlLaunch, error) {
	doc := map[string]any{}
	if _, err := toml.Decode(string(b), &doc); err != nil {
		return nil, nil, err
	}
	var ours struct {
		Servers map[string]tomlLaunch `toml:"mcp_servers"`
	}
	if _, err := toml.Decode(string(b), &ours); err != nil {
		return nil, nil, fmt.Errorf("its mcp_servers table: %w", err)
	}
	if e, ok := ours.Servers[mcpServerName]; ok {
		return doc, &e, nil
	}
	return doc, nil, nil
}

// withoutOurs is a decoded document with our entry taken out.
func withoutOurs(doc map[string]any) map[string]any {
	if s, ok := doc["mcp_servers"].(map[string]any); ok {
		delete(s, mcpServerName)
		if len(s) == 0 {
			delete(doc, "mcp_servers")
		}
	}
	return doc
}

func sameLaunch(e *tomlLaunch, l mcpLaunch) bool {
	if e == nil || e.Command != l.Command || !slices.Equal(e.Args, l.Args) || len(e.Env) != len(l.Env) {
		return false
	}
	for k, v := range l.Env {
		if e.Env[k] != v {
			return false
		}
	}
	return true
}

// mergeTOML replaces the [mcp_servers.paddock] table (and any of its
// sub-tables) in place, or adds it at the end, leaving every other line as
// it was. The result is checked: decoded, it must equal the old file with
// only our entry changed, else the merge is refused.
func mergeTOML(old []byte, l mcpLaunch) ([]byte, bool, error) {
	oldDoc, cur, err := decodeTOML(old)
	if err != nil {
		return nil, false, fmt.Errorf("it is not valid TOML: %w", err)
	}
	if sameLaunch(cur, l) {
		return old, false, nil
	}
	lines := strings.SplitAfter(string(old), "\n")
	if len(lines) > 0 && lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	ours := strings.SplitAfter(strings.TrimSuffix(renderTOML(l), "\n"), "\n")
	ours[len(ours)-1] += "\n"
	var out []string
	placed := false
	for i := 0; i < len(lines); {
		m := tomlHeader.FindStringSubmatch(strings.TrimRight(lines[i], "\r\n"))
		if m == nil || !isOurTOMLTable(m[2]) {
			out = append(out, lines[i])
			i++
			continue
		}
		// Our table runs to the next header; blank lines at its end stay.
		end := i + 1
		for end < len(lines) && tomlHeader.FindStringSubmatch(strings.TrimRight(lines[end], "\r\n")) == nil {
			end++
		}
		last := end
		for last > i+1 && strings.TrimSpace(lines[last-1]) == "" {
			last--
		}
		if !placed {
			out = append(out, ours...)
			placed = true
			out = append(out, lines[last:end]...)
		} else if len(out) > 0 && strings.TrimSpace(out[len(out)-1]) != "" {
			// A later sub-table: its blank lines only where none are left.
			out = append(out, lines[last:end]...)
		}
		i = end
	}
	if !placed {
		if len(out) > 0 {
			if !strings.HasSuffix(out[len(out)-1], "\n") {
				out[len(out)-1] += "\n"
			}
			if strings.TrimSpace(out[len(out)-1]) != "" {
				out = append(out, "\n")
			}
		}
		out = append(out, ours...)
	}
	res := []byte(strings.Join(out, ""))
	newDoc, got, err := decodeTOML(res)
	if err != nil || !sameLaunch(got, l) || !reflect.DeepEqual(withoutOurs(oldDoc), withoutOurs(newDoc)) {
		return nil, false, errors.New("its paddock entry is not written as a [mcp_servers.paddock] table, so it cannot be replaced safely: remove that entry by hand and run this again")
	}
	return res, true, nil
}

// readLaunch reads our entry back from a client's file, as the client
// would start it: nil when there is none.
func readLaunch(c mcpClient, b []byte) (*mcpLaunch, error) {
	if c.toml {
		_, e, err := decodeTOML(b)
		if err != nil || e == nil {
			return nil, err
		}
		return &mcpLaunch{Command: e.Command, Args: e.Args, Env: e.Env}, nil
	}
	raw, err := jsonEntry(b, c.key)
	if err != nil || raw == nil {
		return nil, err
	}
	if c.name == "opencode" {
		var e opencodeEntry
		if err := json.Unmarshal(raw, &e); err != nil {
			return nil, err
		}
		if len(e.Command) == 0 {
			return &mcpLaunch{}, nil
		}
		return &mcpLaunch{Command: e.Command[0], Args: e.Command[1:], Env: e.Environment}, nil
	}
	var e stdioEntry
	if err := json.Unmarshal(raw, &e); err != nil {
		return nil, err
	}
	return &mcpLaunch{Command: e.Command, Args: e.Args, Env: e.Env}, nil
}
