#!/usr/bin/env bash
# Runs every test in the repository (the README's test command; CI runs exactly this):
# formatting and lints, the Rust tests, the core on wasm32 and its dependency rules, the
# benchmarks' build, the site's release build, its component tests in headless Chromium, the
# end-to-end browser tests and budgets, and the reference suite against real PyTorch.
set -euo pipefail
cd "$(dirname "$0")/.."
# The reference suite's venv (a download of about 3 GB) installs in the background while the
# Rust steps use the CPU; the suite waits for it at the end.
mkdir -p target
venv_log=target/setup-venv.log
./scripts/setup-venv.sh >"$venv_log" 2>&1 &
venv_pid=$!
# A failed step ends the command; the venv's install then stops too (the next run redoes it).
trap 'kill "$venv_pid" 2>/dev/null || true' EXIT
SKIP_VENV=1 ./scripts/setup.sh
export PATH="$HOME/.cargo/bin:$HOME/.local/webtools/node_modules/.bin:$PATH"
export TRUNK_SKIP_VERSION_CHECK=true
# A run from a clean checkout rebuilds nothing incrementally; the incremental caches would only
# take disk (several GB).
export CARGO_INCREMENTAL=${CARGO_INCREMENTAL:-0}
export CHROMEDRIVER=${CHROMEDRIVER:-/usr/bin/chromedriver}
# shellcheck source=scripts/wasm-env.sh
. scripts/wasm-env.sh

# Each step prints the seconds since the command started, so CI's log shows where its time goes.
step() { printf '\n=== [%ss] %s\n' "$SECONDS" "$*"; }

step "cargo fmt --check"
cargo fmt --all -- --check

step "cargo clippy -D warnings (native, and the site for wasm32)"
cargo clippy --workspace --all-targets --locked -- -D warnings
cargo clippy -p headroom-site --target wasm32-unknown-unknown --all-targets --locked -- -D warnings
# The calculator's bundle is the site without its docs feature (site/src/route.rs).
cargo clippy -p headroom-site --target wasm32-unknown-unknown --no-default-features --lib --bins --locked -- -D warnings

step "cargo test (all crates but the browser tests, which need the site's build)"
cargo test --workspace --exclude headroom-e2e --locked

step "headroom-core without its default features (toml, provenance, claims, calibrations, time text and replay), as the site builds it, with the GPU catalog, preset configs and named scenarios the site fetches (the calibration tests install the files as the site does)"
cargo test -p headroom-core --no-default-features --features embedded-gpus,embedded-configs,embedded-scenarios --locked --lib --tests

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

# In the dev profile the tests already built (a bench build's optimized profile took 70 s of
# the command's time to prove the same: that the benchmarks compile and link).
step "benchmarks build"
cargo build -p headroom-core --benches --locked

step "site: release build (trunk, wasm-opt), at the root and for a sub-path"
cargo fetch --locked
trunk build --release --offline
trunk build --release --offline --public-url /headroom/ --dist target/dist-sub

step "site: component tests in headless Chromium (wasm-bindgen-test)"
(cd site && cargo test --target wasm32-unknown-unknown --features test-configs --locked)

step "site: end-to-end tests in headless Chromium (WebDriver) against the release build"
# The CLI the browser tests and the reference suite compare with, thousands of runs: in the
# `reference` profile (opt-level 1, debug assertions kept) an estimate takes about a fifth of
# the dev build's time (0.12 s against 0.55 s for Llama 3.1 8B here), for a build of about a
# minute.
cargo build --profile reference -p headroom-cli --locked
export HEADROOM_BIN="$PWD/target/reference/headroom"
cargo test -p headroom-e2e --locked

step "site: budgets (bundle size is checked; times are reported)"
cargo run -q -p headroom-e2e --bin budgets --locked

# One worker per core (pytest-xdist): the measurements pin one intra-op thread each. Tests go
# to workers one by one, except the files that write a section of report.md when they end,
# each whole in one worker (their `xdist_group` mark).
step "reference suite: the core against real PyTorch (CPU), one worker per core"
venv_ok=0
wait "$venv_pid" || venv_ok=$?
cat "$venv_log"
if [ "$venv_ok" -ne 0 ]; then
  echo "the reference venv's install failed (scripts/setup-venv.sh, exit $venv_ok)" >&2
  exit 1
fi
.venv/bin/python -m pytest -q tests/reference -p no:cacheprovider -n auto --dist loadgroup --durations=20
