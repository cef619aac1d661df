#!/usr/bin/env bash
# Sets up what the tests need and runs every test (README's test command).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=$PATH:/usr/local/go/bin
./scripts/install-deps.sh
make build
make vet
make test
