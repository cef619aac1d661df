package session

import (
	apiv1 "paddock.dev/paddock/api"
	"paddock.dev/paddock/errdefs"
	"paddock.dev/paddock/hypervisor"
)

// PolicyCompileRequest and PolicyCompile are the wire types of POST
// /v1/policy/compile.
type (
	PolicyCompileRequest = apiv1.PolicyCompileRequest
	PolicyCompile        = apiv1.PolicyCompile
)

// CompilePolicy runs the policy checks a create runs, in the same order
// and with the same code, and reports what the session's record would
// show and every refusal, creating nothing: the console's policy editor
// shows it before a create. Only a failure unrelated to the request is an
// error.
func (m *Manager) CompilePolicy(req PolicyCompileRequest) (*PolicyCompile, error) {
	out := &PolicyCompile{Refusals: []apiv1.PolicyRefusal{}}
	refuse := func(err error) {
		out.Refusals = append(out.Refusals, apiv1.PolicyRefusal{Status: errdefs.HTTPStatus(err), Code: errdefs.Code(err), Error: err.Error()})
	}
	var caps hypervisor.Capabilities
	backend, err := m.backendFor(req.Backend)
	if err != nil {
		refuse(err)
	} else {
		caps = m.capabilitiesOn(backend)
	}
	proc := policyProcess(req.Policy)
	if backend != nil {
		if err := m.checkProcess(proc, caps); err != nil {
			refuse(err)
		}
	}
	pol, err := m.compilePolicy(policyNetwork(req.Policy))
	if err != nil {
		refuse(err)
	} else {
		network, _, err := m.networkFor("", pol)
		switch {
		case err != nil:
			refuse(err)
		case network == hypervisor.NetworkOffline:
			out.Network = "offline"
		default:
			out.Network = "egress"
		}
		out.Policy = &Policy{NetworkSummary: pol.Summary(), Process: proc}
	}
	out.OK = len(out.Refusals) == 0
	return out, nil
}

// capabilitiesOn is what a session created on backend can do: the
// backend's own capabilities, with egress and HTTP rules as this daemon
// serves them. Create and CompilePolicy both use it.
func (m *Manager) capabilitiesOn(backend hypervisor.Backend) hypervisor.Capabilities {
	caps := backend.Capabilities()
	caps.Egress = m.egress != nil && m.egressRoot != "" && m.currentEgressLog() != nil
	caps.HTTPPolicy = caps.Egress && m.egress.Intercepts()
	return caps
}
