#!/usr/bin/env bash
# Sets up and runs Paddock on a fresh Debian machine (Go installed, root):
# installs packages, builds both binaries, builds the mini image and runs a
# command in a real sandbox.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=$PATH:/usr/local/go/bin
./scripts/install-deps.sh
make build
state=${PADDOCK_STATE_DIR:-/var/lib/paddock}
bin/paddock --state-dir "$state" image ls | grep -q '^mini ' || bin/paddock --state-dir "$state" image build mini
bin/paddock --state-dir "$state" backends
echo
echo "== inside a sandbox =="
bin/paddock --state-dir "$state" sandbox run -- 'echo "hostname: $(hostname)"; echo "user: $(id)"; echo "interfaces:"; tail -n +3 /proc/net/dev | cut -d: -f1; echo "processes:"; ls /proc | grep -c "^[0-9]"'
echo
echo "== a confined command (Landlock: /home/agent is not writable) =="
bin/paddock --state-dir "$state" -v sandbox run --confine -- sh -c 'echo x > /home/agent/f' || echo "(refused, as it should be: exit $?)"

echo
echo "== the daemon: the 60-second walkthrough through paddock serve =="
export PADDOCK_ADMIN_TOKEN=${PADDOCK_ADMIN_TOKEN:-pdk_$(od -An -N24 -tx1 /dev/urandom | tr -d ' \n')}
export PADDOCK_TOKEN=$PADDOCK_ADMIN_TOKEN
export PADDOCK_URL=${PADDOCK_URL:-https://127.0.0.1:7788}
export PADDOCK_STATE_DIR=$state   # the CLI trusts the gateway's local CA from here
bin/paddock --state-dir "$state" serve --listen "${PADDOCK_URL#https://}" 2>"$state/serve.log" &
serve_pid=$!
trap 'kill -TERM $serve_pid 2>/dev/null; wait $serve_pid 2>/dev/null' EXIT
ca=$state/gateway/pki/authorities/local/root.crt
for _ in $(seq 100); do [ -f "$ca" ] && curl -fsS --cacert "$ca" "$PADDOCK_URL/healthz" >/dev/null 2>&1 && break; sleep 0.1; done
echo "(the API is HTTPS through the embedded Caddy gateway; its local CA is $ca)"
id=$(bin/paddock --json session run quickstart | sed -n 's/^  "id": "\(.*\)",$/\1/p')
echo "session $id"
bin/paddock session exec "$id" -- 'uname -a && mkdir -p /workspace/demo && echo hi > /workspace/demo/a.txt'
bin/paddock session checkpoint "$id" --tag before-change
bin/paddock session exec "$id" -- 'echo changed > /workspace/demo/a.txt'
bin/paddock session artifacts "$id"
bin/paddock session restore "$id" before-change
bin/paddock session exec "$id" -- 'cat /workspace/demo/a.txt'
bin/paddock session timeline "$id"
bin/paddock session rm "$id"

echo
echo "== a network policy: one host allowed, the rest refused by the host's egress proxy =="
id=$(bin/paddock --json session run --allow pypi.org | sed -n 's/^  "id": "\(.*\)",$/\1/p')
bin/paddock session exec "$id" -- "bash -c 'exec 3<>/dev/tcp/127.0.0.1/3128; printf \"GET http://example.com/ HTTP/1.0\\r\\n\\r\\n\" >&3; timeout 5 cat <&3 | tail -1'"
bin/paddock session timeline "$id" | grep egress || true
bin/paddock session rm "$id"

echo
echo "== a process policy (Rego): rm refused, a deploy held for an operator's approval =="
id=$(bin/paddock --json session run --cmd-deny 'rm *' --cmd-ask 'touch *' | sed -n 's/^  "id": "\(.*\)",$/\1/p')
bin/paddock session exec "$id" -- 'echo hi; rm -rf /workspace' || echo "(refused: exit $?)"
bin/paddock session exec "$id" -- 'touch /workspace/deployed' || echo "(held: exit $?)"
apr=$(bin/paddock session approvals "$id" | awk '/pending/ {print $1; exit}')
bin/paddock session approve "$id" "$apr" --note "quickstart"
bin/paddock session exec "$id" --approval-id "$apr" -- 'touch /workspace/deployed' && echo "(ran once, approved)"
bin/paddock session rm "$id"
echo "(the daemon stops when this script ends; run \`bin/paddock serve\` yourself to keep one)"
