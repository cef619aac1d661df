package main

import (
	"fmt"
	"io"
	"strings"
)

// maxDiffCells bounds the work of one diff: the product of the two
// files' line counts (the table the longest common subsequence fills).
// Past it unifiedDiff says the files are too large to compare.
const maxDiffCells = 4 << 20

// unifiedDiff writes the differences between a and b as a unified diff
// with three lines of context, headed by the two names. Equal texts write
// nothing. Lines are written as they are; the caller escapes them for a
// terminal if it must.
func unifiedDiff(w io.Writer, nameA, nameB, a, b string) error {
	if a == b {
		return nil
	}
	x, y := splitLines(a), splitLines(b)
	if len(x)*len(y) > maxDiffCells {
		return fmt.Errorf("%s: %d and %d lines, too many to compare here", nameB, len(x), len(y))
	}
	// lcs[i][j] is the length of the longest common subsequence of x[i:]
	// and y[j:].
	lcs := make([][]int32, len(x)+1)
	for i := range lcs {
		lcs[i] = make([]int32, len(y)+1)
	}
	for i := len(x) - 1; i >= 0; i-- {
		for j := len(y) - 1; j >= 0; j-- {
			if x[i] == y[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	// The edit script: one op per line, ' ' kept, '-' from a, '+' from b.
	type op struct {
		kind   byte
		line   string
		ai, bi int // the line's index in a and b after this op
	}
	var ops []op
	i, j := 0, 0
	for i < len(x) || j < len(y) {
		switch {
		case i < len(x) && j < len(y) && x[i] == y[j]:
			ops = append(ops, op{' ', x[i], i, j})
			i, j = i+1, j+1
		case i < len(x) && (j == len(y) || lcs[i+1][j] >= lcs[i][j+1]):
			// Removals before additions, as diff -u writes them.
			ops = append(ops, op{'-', x[i], i, j})
			i++
		default:
			ops = append(ops, op{'+', y[j], i, j})
			j++
		}
	}
	fmt.Fprintf(w, "--- %s\n+++ %s\n", nameA, nameB)
	const context = 3
	for k := 0; k < len(ops); {
		if ops[k].kind == ' ' {
			k++
			continue
		}
		// A hunk: from context lines before the first change to context
		// lines after the last change that is no more than 2*context
		// unchanged lines from the one before.
		start := max(k-context, 0)
		end := k
		for end < len(ops) {
			if ops[end].kind != ' ' {
				end++
				continue
			}
			run := end
			for run < len(ops) && ops[run].kind == ' ' {
				run++
			}
			if run == len(ops) || run-end > 2*context {
				end = min(end+context, len(ops))
				break
			}
			end = run
		}
		var na, nb int
		for _, o := range ops[start:end] {
			if o.kind != '+' {
				na++
			}
			if o.kind != '-' {
				nb++
			}
		}
		fmt.Fprintf(w, "@@ -%s +%s @@\n", hunkRange(ops[start].ai, na), hunkRange(ops[start].bi, nb))
		for _, o := range ops[start:end] {
			fmt.Fprintf(w, "%c%s\n", o.kind, o.line)
		}
		k = end
	}
	return nil
}

// hunkRange is a hunk header's start,count for n lines from index i (the
// start is 1-based, and the line before the hunk when it is empty).
func hunkRange(i, n int) string {
	if n == 0 {
		return fmt.Sprintf("%d,0", i)
	}
	return fmt.Sprintf("%d,%d", i+1, n)
}

// splitLines splits s into lines without their newlines; a last line
// without a newline is a line too.
func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
}
