package hypervisor_test

// Attacks from the security pass (issue 16) that a backend alone must hold,
// run against real sandboxes of every backend. Named TestAttack* so the
// count of attacks tried is visible (docs/STATUS.md, "Security: attacks
// tried").

import (
	"cmp"
	"fmt"
	"maps"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"paddock.dev/paddock/guest/api"
	"paddock.dev/paddock/hypervisor"
)

// TestAttackSocketFamilies: a command in a sandbox opens a socket of every
// address family and netlink protocol. vsock would share the host's port
// space (a namespace sandbox could bind ports the host's own services use)
// or reach the host's services (a VM); packet, XDP, KCM, ALG and the rest
// are kernel code a sandbox has no use for. Only unix, inet, inet6 and
// netlink (routing, socket diagnostics) may open; every other family fails
// with EAFNOSUPPORT and every other netlink protocol with EPROTONOSUPPORT,
// for a plain command and for a confined one alike. IPv4 and IPv6 sockets
// may name only TCP, UDP and ICMP: SCTP, SMC, MPTCP and the rest fail with
// EPROTONOSUPPORT (before, socket(AF_INET, …, IPPROTO_SCTP) from a
// procbox sandbox made the host's kernel load the module).
func TestAttackSocketFamilies(t *testing.T) {
	allowedAF := map[int]bool{1: true, 2: true, 10: true, 16: true} // unix, inet, inet6, netlink
	allowedNL := map[int]bool{0: true, 4: true}                     // route, sock_diag
	forEachBackend(t, func(t *testing.T, e backendEnv) {
		probe, _ := probes(t)

		// Control on the host (root, no filter): the kernel offers some
		// of the families and protocols the sandbox must not get, so the
		// check below proves the filter rather than a bare kernel.
		hostOut, err := exec.Command(filepath.Join(probesDir, "probe"), "families").Output()
		if err != nil {
			t.Fatalf("probe families on the host: %v", err)
		}
		var offered []string
		for k, v := range parseFamilies(t, string(hostOut)) {
			if v == "ok" && !(k.nl && allowedNL[k.n]) && !(!k.nl && allowedAF[k.n]) {
				offered = append(offered, k.String())
			}
		}
		slices.Sort(offered)
		if len(offered) == 0 {
			t.Fatalf("the host kernel opens none of the refused families or protocols; the test would prove nothing:\n%s", hostOut)
		}
		t.Logf("refused in the sandbox, offered by the host kernel: %s", strings.Join(offered, " "))

		_, c := e.create(t, hypervisor.MachineSpec{})
		install(t, c, "/tmp/probe", probe)
		confined := &api.Confinement{Enforcement: "strict", ReadWrite: []string{"/workspace", "/tmp"}}
		for _, tc := range []struct {
			name    string
			confine *api.Confinement
		}{{"plain command", nil}, {"confined command", confined}} {
			t.Run(tc.name, func(t *testing.T) {
				res := run(t, c, tc.confine, "/tmp/probe", "families")
				if res.ExitCode != 0 {
					t.Fatalf("probe families: exit %d signal %q stderr %q", res.ExitCode, res.Signal, res.Stderr)
				}
				got := parseFamilies(t, string(res.Stdout))
				if len(got) != 64+32 {
					t.Fatalf("probe printed %d results, want 96:\n%s", len(got), res.Stdout)
				}
				keys := slices.SortedFunc(maps.Keys(got), func(a, b familyKey) int {
					return cmp.Or(cmp.Compare(btoi(a.nl), btoi(b.nl)), cmp.Compare(a.n, b.n))
				})
				for _, k := range keys {
					v := got[k]
					want := "err=EAFNOSUPPORT"
					switch {
					case k.nl && allowedNL[k.n], !k.nl && allowedAF[k.n]:
						want = "ok"
					case k.nl:
						want = "err=EPROTONOSUPPORT"
					}
					if v != want {
						t.Errorf("%s in the sandbox: %s, want %s", k, v, want)
					}
				}
				// IPv4 and IPv6 protocols: naming one the kernel has not
				// loaded would load its module (in a namespace sandbox,
				// into the host's kernel). Only TCP, UDP and ICMP open.
				for _, pc := range []struct{ args, want string }{
					{"2 1 132", "err=EPROTONOSUPPORT"},  // inet SCTP
					{"10 5 132", "err=EPROTONOSUPPORT"}, // inet6 SCTP, seqpacket
					{"2 1 256", "err=EPROTONOSUPPORT"},  // SMC
					{"2 1 262", "err=EPROTONOSUPPORT"},  // MPTCP (the host kernel has it)
					{"2 1 6", "ok 0"},                   // TCP
					{"10 2 17", "ok 0"},                 // UDP
				} {
					res := run(t, c, tc.confine, append([]string{"/tmp/probe", "socket"}, strings.Fields(pc.args)...)...)
					if got := strings.TrimSpace(string(res.Stdout)); got != pc.want {
						t.Errorf("socket(%s) in the sandbox: %q (stderr %q), want %s", pc.args, got, res.Stderr, pc.want)
					}
				}
			})
		}
	})
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

type familyKey struct {
	nl bool // a netlink protocol, else an address family
	n  int
}

func (k familyKey) String() string {
	if k.nl {
		return fmt.Sprintf("netlink protocol %d", k.n)
	}
	return fmt.Sprintf("family %d", k.n)
}

// parseFamilies reads the probe's "af N result" and "nl N result" lines.
func parseFamilies(t *testing.T, out string) map[familyKey]string {
	t.Helper()
	m := map[familyKey]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var kind, result string
		var n int
		if _, err := fmt.Sscanf(line, "%s %d %s", &kind, &n, &result); err != nil || (kind != "af" && kind != "nl") {
			t.Fatalf("probe line %q: %v", line, err)
		}
		m[familyKey{kind == "nl", n}] = result
	}
	return m
}
