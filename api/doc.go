// Package api is Paddock's public wire vocabulary: the request and answer
// bodies of the daemon's HTTP API (/v1/agents/sessions, /v1/sandboxes,
// /v1/whoami, /v1/backends), the records and events it returns, the ledger
// entry as it travels, and the limits and prefixes a client needs to build
// a valid request.
//
// It holds types and the few pure functions that go with them (strict JSON
// decoding of a policy, the error text of a Hold), never behaviour of the
// daemon. It imports the standard library, errdefs and guest/api (the
// guest agent's wire types, which some answers carry as they are) and
// nothing else of Paddock, so a program that only talks to a daemon (the
// Go SDK in client/, the CLI's client verbs) does not pull the daemon's
// dependencies in. docs/api/openapi.yaml describes the same shapes; a test
// in hostd/api holds the two together.
//
// Inside hostd this package is imported as apiv1 (hostd/api, the HTTP
// server, already has the name api). The server packages keep aliases
// (session.CreateRequest = api.CreateRequest) so their code reads as before.
package api
