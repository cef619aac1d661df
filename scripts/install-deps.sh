#!/usr/bin/env bash
# Installs the Debian packages Paddock needs to build, run and test.
# Idempotent: packages already present are not downloaded again.
set -euo pipefail
pkgs=(libseccomp-dev gcc make debootstrap bubblewrap util-linux iproute2 criu btrfs-progs curl qemu-system-x86 qemu-utils e2fsprogs xz-utils nodejs)
# The Python SDK's tests: python3, and venv for its install test.
pkgs+=(python3 python3-venv)
# The browser tests (the web console, the TypeScript SDK in a page): Chromium and a font.
pkgs+=(chromium fonts-dejavu-core)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  if [ "$(id -u)" -ne 0 ]; then
    echo "install-deps: need root to install: ${missing[*]}" >&2
    exit 1
  fi
  echo "install-deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
command -v go >/dev/null || { echo "install-deps: Go is required (expected at /usr/local/go/bin)" >&2; exit 1; }
# The official TypeScript MCP SDK and the MCP Inspector's CLI, the clients
# of cmd/paddock's TestMCPTypeScriptClient: installed once here (versions pinned by its
# package-lock.json), so the test does not download it.
if ! command -v npm >/dev/null; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "install-deps: need root to install: npm" >&2
    exit 1
  fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends npm >/dev/null
fi
ts="$(dirname "$0")/../mcp/testdata/tsclient"
if [ ! -d "$ts/node_modules/@modelcontextprotocol/sdk" ] || [ ! -d "$ts/node_modules/@modelcontextprotocol/inspector-cli" ]; then
  npm ci --prefix "$ts" --no-audit --no-fund --prefer-offline >/dev/null
fi
# The TypeScript SDK's dev dependencies (typescript, openapi-typescript),
# pinned by sdk/ts/package-lock.json, for cmd/paddock's TestTSSDK*.
sdk="$(dirname "$0")/../sdk/ts"
if [ ! -x "$sdk/node_modules/.bin/tsc" ]; then
  npm ci --prefix "$sdk" --no-audit --no-fund --prefer-offline >/dev/null
fi
