// Package rules compiles a session's network policy (a preset plus
// network.default and network.allow entries) into a Compiled value that
// implements egress.Policy, and gives the path canonicalisation that
// method and path limits depend on.
//
// Matching, in short:
//
//   - "example.com" matches that name only; "*.example.com" matches every
//     name below it (a.example.com, a.b.example.com) and not example.com
//     itself, so list both to cover both.
//   - Host patterns are lower-cased and lose one trailing dot when compiled;
//     hosts handed to AllowsName, Tunnel and Decide are expected canonical
//     already (egress/addr), and are only lower-cased and stripped of one
//     trailing dot here.
//   - An entry with methods or paths (a limited entry) allows a request
//     only when its method is one of the methods and its path, which must
//     be canonical (CanonicalPath), matches one of the path patterns, where
//     '*' matches any run of characters, '/' included. Paths are compared
//     case-sensitively. An entry limiting paths only still takes only the
//     methods in Methods: TRACE, CONNECT and unknown methods never match
//     a limited entry.
//   - Entries are a union: a request is allowed when any entry whose host
//     pattern matches allows it. An entry without limits therefore opens
//     its whole host even if a limited entry names the same host.
//
// Compile is run once per session; the Compiled value is then read by the
// resolver and the proxy concurrently.
package rules
