package rules

import (
	"fmt"
	"slices"
	"strings"
)

// Bounds on a limited entry.
const (
	MaxPaths        = 32  // path patterns per entry
	MaxPatternLen   = 256 // bytes per path pattern
	MaxAllowEntries = 256 // network.allow entries per policy
)

// Methods are the HTTP methods a limited entry may name, in the order
// they are written back. TRACE and CONNECT are refused: TRACE echoes
// requests (and their headers) back, and CONNECT is a tunnel, which
// Tunnel decides.
var Methods = []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"}

// Limits restrict the requests an entry (or a credential grant) covers to
// some methods and paths. The zero Limits has none: it covers every
// request.
type Limits struct {
	methods []string // canonical order, no duplicates; nil: any method
	paths   []string // canonical patterns, input order, no duplicates; nil: any path
}

// NewLimits checks and compiles method and path limits. Methods are
// upper-cased and must be in Methods; paths must start with '/', be
// canonical apart from '*' (which is a path character CanonicalPath
// keeps), at most MaxPatternLen bytes, and at most MaxPaths of them. A nil
// slice means no limit on that side; an empty, non-nil one is refused,
// since it could only mean "nothing", which is better said by leaving the
// host out.
func NewLimits(methods, paths []string) (Limits, error) {
	var l Limits
	if methods != nil {
		if len(methods) == 0 {
			return Limits{}, fmt.Errorf("methods is empty; leave it out to allow every method")
		}
		seen := map[string]bool{}
		for i, m := range methods {
			u := strings.ToUpper(m)
			switch {
			case u == "TRACE" || u == "CONNECT":
				return Limits{}, fmt.Errorf("methods[%d]: %s is never allowed", i, u)
			case !slices.Contains(Methods, u):
				return Limits{}, fmt.Errorf("methods[%d]: %q is not one of %s", i, m, strings.Join(Methods, ", "))
			}
			seen[u] = true
		}
		for _, m := range Methods {
			if seen[m] {
				l.methods = append(l.methods, m)
			}
		}
	}
	if paths != nil {
		if len(paths) == 0 {
			return Limits{}, fmt.Errorf("paths is empty; leave it out to allow every path")
		}
		if len(paths) > MaxPaths {
			return Limits{}, fmt.Errorf("%d paths, more than %d", len(paths), MaxPaths)
		}
		for i, p := range paths {
			if len(p) > MaxPatternLen {
				return Limits{}, fmt.Errorf("paths[%d]: %d bytes, more than %d", i, len(p), MaxPatternLen)
			}
			if !strings.HasPrefix(p, "/") {
				return Limits{}, fmt.Errorf("paths[%d]: %q must start with /", i, p)
			}
			c, err := CanonicalPath(p)
			if err != nil {
				return Limits{}, fmt.Errorf("paths[%d]: %q: %w", i, p, err)
			}
			if !slices.Contains(l.paths, c) {
				l.paths = append(l.paths, c)
			}
		}
	}
	return l, nil
}

// Unlimited reports whether l covers every request.
func (l Limits) Unlimited() bool { return l.methods == nil && l.paths == nil }

// MethodList returns the allowed methods (nil: any).
func (l Limits) MethodList() []string { return slices.Clone(l.methods) }

// PathList returns the path patterns (nil: any).
func (l Limits) PathList() []string { return slices.Clone(l.paths) }

// Allows reports whether a request with this method and path is within
// l. With limits (of either kind), a method outside the list (outside
// Methods when only paths are limited: an unknown method, TRACE or
// CONNECT never matches), or a path that is not canonical
// (CanonicalPath(path) != path) or matches no pattern, is not.
func (l Limits) Allows(method, path string) bool {
	_, ok := l.match(method, path)
	return ok
}

// match is Allows, also returning the index of the matching path pattern
// (0 when paths are unlimited).
func (l Limits) match(method, path string) (int, bool) {
	if l.Unlimited() {
		return 0, true
	}
	allowed := l.methods
	if allowed == nil {
		allowed = Methods // "*": any known method, never TRACE, CONNECT or an unknown one
	}
	if !slices.Contains(allowed, method) {
		return 0, false
	}
	if c, err := CanonicalPath(path); err != nil || c != path {
		return 0, false
	}
	if l.paths == nil {
		return 0, true
	}
	for i, p := range l.paths {
		if matchPath(p, path) {
			return i, true
		}
	}
	return 0, false
}

// equal reports whether two limits are the same.
func (l Limits) equal(o Limits) bool {
	return slices.Equal(l.methods, o.methods) && slices.Equal(l.paths, o.paths) &&
		(l.methods == nil) == (o.methods == nil) && (l.paths == nil) == (o.paths == nil)
}

// methodText is the methods as written in a rule: "GET,HEAD" or "*".
func (l Limits) methodText() string {
	if l.methods == nil {
		return "*"
	}
	return strings.Join(l.methods, ",")
}
