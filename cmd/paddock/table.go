package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"unicode"
	"unicode/utf8"

	"golang.org/x/term"
)

// Much of what the CLI prints was made elsewhere: file names, commands,
// job output and labels come from a sandbox or another caller. A name
// holding an escape sequence could rewrite the terminal; one holding a
// newline or a tab could forge rows and columns. So every table goes
// through a table (its cells through cell), and other text from elsewhere
// through cell or text. TestEveryTableEscapes holds the package to it.

// A table is a tab-aligned table on the CLI's output.
type table struct{ tw *tabwriter.Writer }

// newTable starts a table on w with a header row (none when header is
// empty).
func newTable(w io.Writer, header ...string) *table {
	t := &table{tw: tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)}
	if len(header) > 0 {
		cells := make([]any, len(header))
		for i, h := range header {
			cells[i] = h
		}
		t.row(cells...)
	}
	return t
}

// row writes one row: each value as fmt.Sprint writes it, escaped by cell
// (a jsonCell is escaped already).
func (t *table) row(cells ...any) {
	var b strings.Builder
	for i, c := range cells {
		if i > 0 {
			b.WriteByte('\t')
		}
		if j, ok := c.(jsonCell); ok {
			b.WriteString(string(j))
			continue
		}
		b.WriteString(cell(fmt.Sprint(c)))
	}
	b.WriteByte('\n')
	io.WriteString(t.tw, b.String())
}

// flush writes the table out.
func (t *table) flush() error { return t.tw.Flush() }

// cell returns s fit for one cell of a table or one line of output. Every
// character a terminal would act on rather than show, and every one that
// would end the line or the column, is written as a Go escape: the C0
// controls (tab and newline among them) and DEL as \t, \n, \x1b…, the C1
// controls as \u0085…, Unicode's invisible format characters
// (bidirectional overrides, zero-width characters) and line separators as
// \u202e…, and bytes that are not UTF-8 as \xff. A backslash is written
// \\, so an escape in the output always stands for that character, never
// for a name that spelled it out.
func cell(s string) string { return escape(s, false, true) }

// text is cell for text of several lines (a command's error, git's
// output): newlines and tabs stay, every other character cell escapes is
// escaped.
func text(s string) string { return escape(s, true, true) }

// A jsonCell is a table cell holding compact JSON, escaped as cell
// escapes except for backslashes: JSON escapes its own, so none can stand
// for a raw character, and doubling them would only garble the text.
type jsonCell string

// newJSONCell makes a jsonCell of raw when it is valid JSON (compacted),
// and escapes it as cell otherwise.
func newJSONCell(raw []byte) jsonCell {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return jsonCell(cell(string(raw)))
	}
	return jsonCell(escape(b.String(), false, false))
}

// textFor is text when w is a terminal, and s unchanged otherwise: output
// that a program may read byte for byte (a diff to apply) is only escaped
// on its way to a screen.
func textFor(w io.Writer, s string) string {
	if f, ok := w.(interface{ Fd() uintptr }); ok && term.IsTerminal(int(f.Fd())) {
		return text(s)
	}
	return s
}

func escape(s string, lines, backslash bool) string {
	if !needsEscape(s, lines, backslash) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\\' && backslash:
			b.WriteString(`\\`)
		case lines && (r == '\n' || r == '\t'):
			b.WriteRune(r)
		case r == '\a':
			b.WriteString(`\a`)
		case r == '\b':
			b.WriteString(`\b`)
		case r == '\f':
			b.WriteString(`\f`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\v':
			b.WriteString(`\v`)
		case r < 0x80 && unsafeRune(r):
			fmt.Fprintf(&b, `\x%02x`, r)
		case unsafeRune(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// needsEscape reports whether escape would change s.
func needsEscape(s string, lines, backslash bool) bool {
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && size == 1) || (r == '\\' && backslash) || (unsafeRune(r) && !(lines && (r == '\n' || r == '\t'))) {
			return true
		}
		i += size
	}
	return false
}

// unsafeRune: controls (C0, DEL, C1), format characters and the line and
// paragraph separators.
func unsafeRune(r rune) bool {
	return unicode.IsControl(r) || unicode.In(r, unicode.Cf, unicode.Zl, unicode.Zp)
}
