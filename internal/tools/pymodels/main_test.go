package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestGenerated holds sdk/python/paddock/models.py to a fresh generation
// from docs/api/openapi.yaml: a field, schema or route the document gains
// or changes fails here until the module is generated again.
func TestGenerated(t *testing.T) {
	root := filepath.Join("..", "..", "..")
	raw, err := os.ReadFile(filepath.Join(root, specPath))
	if err != nil {
		t.Fatal(err)
	}
	fresh, err := Generate(raw)
	if err != nil {
		t.Fatal(err)
	}
	old, err := os.ReadFile(filepath.Join(root, outPath))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(old, fresh) {
		t.Fatalf("%s is out of date with %s: run `go run ./internal/tools/pymodels` from the repository's root", outPath, specPath)
	}
}

// TestGenerateShapes checks the generator on a small document: required
// and optional keys, a key Python's class syntax cannot hold, nullable and
// enum types, refs to objects and to plain schemas, and the routes' table.
func TestGenerateShapes(t *testing.T) {
	doc := `openapi: 3.1.0
paths:
  /v1/things/{id}:
    post:
      requestBody:
        content:
          application/json:
            schema: {$ref: "#/components/schemas/ThingRequest"}
      responses:
        "201":
          content:
            application/json:
              schema: {$ref: "#/components/schemas/Thing"}
    delete:
      responses:
        "204": {description: gone}
components:
  schemas:
    Flag:
      type: string
      enum: ["true", "false"]
    Thing:
      description: A thing. More words.
      type: object
      required: [id, parts]
      properties:
        id: {type: string}
        parts: {type: array, items: {$ref: "#/components/schemas/Thing"}}
        note: {type: [string, "null"]}
        flag: {$ref: "#/components/schemas/Flag"}
        labels: {type: object, additionalProperties: {type: integer}}
    BigThing:
      allOf:
        - $ref: "#/components/schemas/Thing"
        - type: object
          required: [extra]
          properties:
            extra: {type: number}
    ThingRequest:
      type: object
      properties:
        from: {type: string}
        only: {type: boolean, enum: [true]}
`
	out, err := Generate([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	got := string(out)
	for _, want := range []string{
		"class _ThingRequired(TypedDict):\n    id: str\n    parts: List[\"Thing\"]\n",
		"class Thing(_ThingRequired, total=False):\n    \"\"\"A thing.\"\"\"\n\n    flag: Literal[\"true\", \"false\"]\n    labels: Dict[str, int]\n    note: Optional[str]\n",
		"ThingRequest = TypedDict(\"ThingRequest\", {\n    \"from\": str,\n    \"only\": Literal[True],\n}, total=False)\n",
		"\"id\": (\"string\", \"\", True),",
		"\"parts\": (\"array\", \"Thing\", True),",
		"\"note\": (\"string|null\", \"\", False),",
		"\"flag\": (\"string\", \"\", False),",
		"\"BigThing\": {\n        \"extra\": (\"number\", \"\", True),\n        \"flag\": (\"string\", \"\", False),\n        \"id\": (\"string\", \"\", True),",
		"\"POST /v1/things/{id}\": (\"ThingRequest\", \"Thing\"),",
		"\"DELETE /v1/things/{id}\": (None, None),",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("generated module lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "class Flag") || strings.Contains(got, "\"Flag\":") {
		t.Errorf("a plain schema got a TypedDict or FIELDS entry:\n%s", got)
	}
}
