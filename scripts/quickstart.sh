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
