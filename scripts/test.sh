#!/usr/bin/env bash
# Runs every test in the repository (the README's test command; CI runs exactly this):
# formatting and lints, the Rust tests, the core on wasm32 and its dependency rules, the
# benchmarks' build, and the reference suite against real PyTorch.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh

step() { printf '\n=== %s\n' "$*"; }

step "cargo fmt --check"
cargo fmt --all -- --check

step "cargo clippy -D warnings"
cargo clippy --workspace --all-targets --locked -- -D warnings

step "cargo test"
cargo test --workspace --locked

step "headroom-core builds for wasm32-unknown-unknown"
cargo build -p headroom-core --target wasm32-unknown-unknown --locked

step "headroom-core depends on no cudarc, web-sys or wasm-bindgen"
deps=$(cargo tree -p headroom-core -e normal,build --prefix none --target all --locked | sed 's/ .*//' | sort -u)
for banned in cudarc web-sys wasm-bindgen js-sys; do
  if grep -qx "$banned" <<<"$deps"; then
    echo "headroom-core must not depend on $banned" >&2
    exit 1
  fi
done
echo "ok"

step "benchmarks build"
cargo bench -p headroom-core --no-run --locked

step "reference suite: the core against real PyTorch (CPU)"
cargo build -p headroom-cli --locked
HEADROOM_BIN="$PWD/target/debug/headroom" .venv/bin/python -m pytest -q tests/reference -p no:cacheprovider
