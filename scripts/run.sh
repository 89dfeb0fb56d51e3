#!/usr/bin/env bash
# Sets up and runs Headroom locally on the default scenario (Llama 3.1 8B on one H100).
# The web calculator arrives with the site (issue 3); until then this runs the CLI.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v cargo >/dev/null 2>&1; then
  echo "cargo is missing: install Rust 1.95 or newer (https://rustup.rs)" >&2
  exit 1
fi
cargo run -q --release -p headroom-cli -- estimate "$@"
