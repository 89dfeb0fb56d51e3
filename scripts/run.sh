#!/usr/bin/env bash
# Sets up, builds and serves the web calculator locally, opening on the default scenario
# (Llama 3.1 8B on one H100): http://127.0.0.1:8080/ (PORT=... to change the port).
# `./scripts/run.sh cli [flags]` runs the headroom CLI instead, e.g. `./scripts/run.sh cli --batch 2`.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v cargo >/dev/null 2>&1; then
  echo "cargo is missing: install Rust 1.95 or newer (https://rustup.rs)" >&2
  exit 1
fi
if [ "${1:-}" = "cli" ]; then
  shift
  exec cargo run -q --release -p headroom-cli -- estimate "$@"
fi
SKIP_VENV=1 ./scripts/setup.sh
export PATH="$HOME/.cargo/bin:$HOME/.local/webtools/node_modules/.bin:$PATH"
export TRUNK_SKIP_VERSION_CHECK=true
# shellcheck source=scripts/wasm-env.sh
. scripts/wasm-env.sh
cargo fetch --locked
echo "Serving Headroom at http://127.0.0.1:${PORT:-8080}/ (Ctrl-C stops it)"
exec trunk serve --release --offline --address 127.0.0.1 --port "${PORT:-8080}"
