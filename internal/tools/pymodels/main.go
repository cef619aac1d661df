// Command pymodels writes sdk/python/paddock/models.py from
// docs/api/openapi.yaml: a TypedDict for every object schema of the
// document, and two tables the Python SDK's tests hold its code to (FIELDS:
// each schema's properties with their JSON type and whether they are
// required; OPERATIONS: each route's request and answer schema). The file
// is checked in; TestGenerated fails when it differs from a fresh
// generation, so the document stays the one source of the SDK's fields.
//
// Run from the repository's root: go run ./internal/tools/pymodels
package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Where the document is read from and the module written to, from the
// repository's root.
const (
	specPath = "docs/api/openapi.yaml"
	outPath  = "sdk/python/paddock/models.py"
)

func main() {
	root := "."
	if len(os.Args) > 1 {
		root = os.Args[1]
	}
	raw, err := os.ReadFile(filepath.Join(root, specPath))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	out, err := Generate(raw)
	if err != nil {
		fmt.Fprintln(os.Stderr, "pymodels:", err)
		os.Exit(1)
	}
	if err := os.WriteFile(filepath.Join(root, outPath), out, 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

type node = map[string]any

func asMap(v any) node { m, _ := v.(node); return m }

// normalize makes every mapping a map[string]any (a status written as 200
// is an int key in YAML).
func normalize(v any) any {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			v[k] = normalize(e)
		}
		return v
	case map[any]any:
		m := make(map[string]any, len(v))
		for k, e := range v {
			m[fmt.Sprint(k)] = normalize(e)
		}
		return m
	case []any:
		for i, e := range v {
			v[i] = normalize(e)
		}
	}
	return v
}

func sortedKeys(m node) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// refName is X for "#/components/schemas/X", else "".
func refName(n node) string {
	ref, _ := n["$ref"].(string)
	name, _ := strings.CutPrefix(ref, "#/components/schemas/")
	return name
}

type gen struct {
	schemas node
}

// isObject reports whether the schema name is an object with properties
// (it gets a TypedDict).
func (g *gen) isObject(name string) bool {
	props, _ := g.fields(asMap(g.schemas[name]), 0)
	return props != nil
}

// fields are a schema's properties and required names, with those of its
// allOf members (refs or inline) merged in; nil when it has none.
func (g *gen) fields(s node, depth int) (node, map[string]bool) {
	if s == nil || depth > 8 {
		return nil, nil
	}
	if name := refName(s); name != "" {
		return g.fields(asMap(g.schemas[name]), depth+1)
	}
	var props node
	req := map[string]bool{}
	add := func(p node, r map[string]bool) {
		if p == nil {
			return
		}
		if props == nil {
			props = node{}
		}
		for k, v := range p {
			props[k] = v
		}
		for k := range r {
			req[k] = true
		}
	}
	if all, ok := s["allOf"].([]any); ok {
		for _, m := range all {
			add(g.fields(asMap(m), depth+1))
		}
	}
	own := map[string]bool{}
	if rs, ok := s["required"].([]any); ok {
		for _, r := range rs {
			if str, ok := r.(string); ok {
				own[str] = true
			}
		}
	}
	add(asMap(s["properties"]), own)
	return props, req
}

// jsonTypes are a schema's JSON types without null, and whether null is
// allowed.
func jsonTypes(s node) ([]string, bool) {
	var out []string
	null := false
	switch t := s["type"].(type) {
	case string:
		out = []string{t}
	case []any:
		for _, e := range t {
			if e == "null" {
				null = true
			} else if str, ok := e.(string); ok {
				out = append(out, str)
			}
		}
	}
	return out, null
}

// kind is a field's entry in FIELDS: its JSON type ("string", "integer",
// "number", "boolean", "array", "object" or "any", with "|null" when null
// is allowed) and the schema of its value (or of its items for an array),
// "" when it has none.
func (g *gen) kind(s node, depth int) (string, string) {
	if depth > 8 {
		return "any", ""
	}
	if name := refName(s); name != "" {
		target := asMap(g.schemas[name])
		k, _ := g.kind(target, depth+1)
		if g.isObject(name) {
			return k, name
		}
		return k, ""
	}
	types, null := jsonTypes(s)
	k := "any"
	if len(types) == 1 {
		k = types[0]
	} else if len(types) == 0 && (asMap(s["properties"]) != nil || s["allOf"] != nil) {
		k = "object"
	}
	var sub string
	if k == "array" {
		if it := asMap(s["items"]); it != nil {
			sub = refName(it)
			if sub != "" && !g.isObject(sub) {
				sub = ""
			}
		}
	}
	if null {
		k += "|null"
	}
	return k, sub
}

// pyType is the Python annotation of a schema.
func (g *gen) pyType(s node, depth int) string {
	if depth > 8 {
		return "Any"
	}
	if name := refName(s); name != "" {
		if g.isObject(name) {
			return strconv.Quote(name)
		}
		return g.pyType(asMap(g.schemas[name]), depth+1)
	}
	types, null := jsonTypes(s)
	t := "Any"
	if len(types) == 1 {
		switch types[0] {
		case "string":
			t = "str"
		case "integer":
			t = "int"
		case "number":
			t = "float"
		case "boolean":
			t = "bool"
		case "array":
			t = "List[Any]"
			if it := asMap(s["items"]); it != nil {
				t = "List[" + g.pyType(it, depth+1) + "]"
			}
		case "object":
			t = "Dict[str, Any]"
			if ap := asMap(s["additionalProperties"]); ap != nil {
				t = "Dict[str, " + g.pyType(ap, depth+1) + "]"
			}
		}
		if lit := literal(s["enum"], types[0]); lit != "" {
			t = lit
		}
	}
	if null && t != "Any" {
		t = "Optional[" + t + "]"
	}
	return t
}

// literal is Literal[...] of an enum of strings or booleans, else "".
func literal(v any, typ string) string {
	vals, ok := v.([]any)
	if !ok || len(vals) == 0 {
		return ""
	}
	var parts []string
	for _, e := range vals {
		switch e := e.(type) {
		case string:
			if typ != "string" {
				return ""
			}
			parts = append(parts, strconv.Quote(e))
		case bool:
			if typ != "boolean" {
				return ""
			}
			parts = append(parts, map[bool]string{true: "True", false: "False"}[e])
		default:
			return ""
		}
	}
	return "Literal[" + strings.Join(parts, ", ") + "]"
}

var ident = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// pyKeywords cannot be keys in TypedDict's class form.
var pyKeywords = map[string]bool{"False": true, "None": true, "True": true, "and": true, "as": true, "assert": true,
	"async": true, "await": true, "break": true, "class": true, "continue": true, "def": true, "del": true,
	"elif": true, "else": true, "except": true, "finally": true, "for": true, "from": true, "global": true,
	"if": true, "import": true, "in": true, "is": true, "lambda": true, "nonlocal": true, "not": true,
	"or": true, "pass": true, "raise": true, "return": true, "try": true, "while": true, "with": true, "yield": true}

// oneLine is a schema's description cut to its first sentence, for a
// docstring.
func oneLine(s node) string {
	d, _ := s["description"].(string)
	d = strings.Join(strings.Fields(d), " ")
	if i := strings.Index(d, ". "); i >= 0 {
		d = d[:i+1]
	}
	d = strings.ReplaceAll(d, `\`, `\\`)
	d = strings.ReplaceAll(d, `"""`, `'''`)
	return d
}

// Generate is the module for the document raw.
func Generate(raw []byte) ([]byte, error) {
	var v any
	if err := yaml.Unmarshal(raw, &v); err != nil {
		return nil, fmt.Errorf("openapi.yaml does not parse: %w", err)
	}
	root := asMap(normalize(v))
	g := &gen{schemas: asMap(asMap(root["components"])["schemas"])}
	if g.schemas == nil {
		return nil, fmt.Errorf("openapi.yaml has no components/schemas")
	}
	var b bytes.Buffer
	b.WriteString(`"""Types of the API's bodies, one TypedDict for every object schema of
docs/api/openapi.yaml. Generated by internal/tools/pymodels (run
` + "`go run ./internal/tools/pymodels`" + ` from the repository's root); do not edit:
internal/tools/pymodels.TestGenerated fails when this file and the
document differ.

FIELDS lists each schema's properties as (JSON type, schema of the value
or of an array's items, required); OPERATIONS names each route's request
and answer schema (None when the body is not JSON or not a named schema).
tests/test_models.py holds the SDK's requests, reads and model classes to
both."""
from typing import Any, Dict, List, Literal, Optional, Tuple, TypedDict
`)
	names := sortedKeys(g.schemas)
	for _, name := range names {
		s := asMap(g.schemas[name])
		props, req := g.fields(s, 0)
		if props == nil {
			continue
		}
		keys := sortedKeys(props)
		classForm := true
		for _, k := range keys {
			if !ident.MatchString(k) || pyKeywords[k] {
				classForm = false
			}
		}
		doc := oneLine(s)
		b.WriteString("\n\n")
		if classForm {
			var reqKeys, optKeys []string
			for _, k := range keys {
				if req[k] {
					reqKeys = append(reqKeys, k)
				} else {
					optKeys = append(optKeys, k)
				}
			}
			base := "TypedDict"
			if len(reqKeys) > 0 && len(optKeys) > 0 {
				fmt.Fprintf(&b, "class _%sRequired(TypedDict):\n", name)
				for _, k := range reqKeys {
					fmt.Fprintf(&b, "    %s: %s\n", k, g.pyType(asMap(props[k]), 0))
				}
				b.WriteString("\n\n")
				base = "_" + name + "Required"
				reqKeys = nil
			}
			if len(reqKeys) > 0 {
				fmt.Fprintf(&b, "class %s(%s):\n", name, base)
			} else {
				fmt.Fprintf(&b, "class %s(%s, total=False):\n", name, base)
			}
			if doc != "" {
				fmt.Fprintf(&b, "    \"\"\"%s\"\"\"\n\n", doc)
			}
			for _, k := range append(reqKeys, optKeys...) {
				fmt.Fprintf(&b, "    %s: %s\n", k, g.pyType(asMap(props[k]), 0))
			}
			if len(reqKeys)+len(optKeys) == 0 {
				b.WriteString("    pass\n")
			}
		} else {
			// A key Python's class syntax cannot hold: the functional
			// form, every key optional (FIELDS still says which are
			// required).
			if doc != "" {
				fmt.Fprintf(&b, "# %s\n", doc)
			}
			fmt.Fprintf(&b, "%s = TypedDict(%q, {\n", name, name)
			for _, k := range keys {
				fmt.Fprintf(&b, "    %q: %s,\n", k, g.pyType(asMap(props[k]), 0))
			}
			b.WriteString("}, total=False)\n")
		}
	}

	b.WriteString("\n\nFIELDS: Dict[str, Dict[str, Tuple[str, str, bool]]] = {\n")
	for _, name := range names {
		s := asMap(g.schemas[name])
		props, req := g.fields(s, 0)
		if props == nil {
			continue
		}
		fmt.Fprintf(&b, "    %q: {\n", name)
		for _, k := range sortedKeys(props) {
			kind, sub := g.kind(asMap(props[k]), 0)
			fmt.Fprintf(&b, "        %q: (%q, %q, %s),\n", k, kind, sub, map[bool]string{true: "True", false: "False"}[req[k]])
		}
		b.WriteString("    },\n")
	}
	b.WriteString("}\n")

	b.WriteString("\nOPERATIONS: Dict[str, Tuple[Optional[str], Optional[str]]] = {\n")
	paths := asMap(root["paths"])
	for _, p := range sortedKeys(paths) {
		item := asMap(paths[p])
		for _, m := range []string{"get", "put", "post", "delete", "patch"} {
			op := asMap(item[m])
			if op == nil {
				continue
			}
			reqName := jsonSchemaName(asMap(op["requestBody"]))
			var respName string
			resps := asMap(op["responses"])
			for _, code := range []string{"200", "201", "202"} {
				if r := asMap(resps[code]); r != nil {
					respName = jsonSchemaName(r)
					break
				}
			}
			fmt.Fprintf(&b, "    %q: (%s, %s),\n", strings.ToUpper(m)+" "+p, pyStr(reqName), pyStr(respName))
		}
	}
	b.WriteString("}\n")
	return b.Bytes(), nil
}

// jsonSchemaName is the named schema of a request body's or answer's
// application/json content, "" when there is none.
func jsonSchemaName(body node) string {
	c := asMap(asMap(asMap(body["content"])["application/json"])["schema"])
	if c == nil {
		return ""
	}
	return refName(c)
}

func pyStr(s string) string {
	if s == "" {
		return "None"
	}
	return strconv.Quote(s)
}
