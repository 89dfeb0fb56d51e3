#!/usr/bin/env bash
# Installs what Headroom's build and tests need, skipping what is already there at the right
# version: the wasm32 target; the web toolchain (trunk, wasm-bindgen-cli, binaryen's wasm-opt, esbuild,
# Chromium and chromedriver); and a Python venv with the pinned torch, transformers and
# accelerate, peft and deepspeed for the reference suite (tests/reference/requirements.txt).
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '[setup] %s\n' "$*"; }

if ! command -v cargo >/dev/null 2>&1; then
  echo "[setup] cargo is missing: install Rust 1.95 or newer (https://rustup.rs)" >&2
  exit 1
fi

if command -v rustup >/dev/null 2>&1; then
  if rustup target list --installed | grep -qx wasm32-unknown-unknown; then
    log "wasm32-unknown-unknown target: present"
  else
    log "adding the wasm32-unknown-unknown target"
    rustup target add wasm32-unknown-unknown
  fi
fi

# The site's build hook (site/pages.sh) writes content/claims.json with python3's tomllib.
if ! python3 -c 'import tomllib' 2>/dev/null; then
  echo "[setup] python3 3.11 or newer is needed to build the site (site/pages.sh reads content/claims/*.toml with tomllib)" >&2
  exit 1
fi

# The web toolchain (site build and browser tests), at the versions Trunk.toml and Cargo.lock
# pin. Each is skipped when already there at the right version.
export PATH="$HOME/.cargo/bin:$HOME/.local/webtools/node_modules/.bin:$PATH"
TRUNK_VERSION=0.21.14
WASM_BINDGEN_VERSION=$(sed -n '/^name = "wasm-bindgen"$/{n;s/^version = "\(.*\)"/\1/p;q}' Cargo.lock)
BINARYEN_VERSION=132.0.0
ESBUILD_VERSION=0.25.0
have_version() { command -v "$1" >/dev/null 2>&1 && "$1" --version 2>/dev/null | grep -q "$2"; }

if command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1; then
  log "chromium and chromedriver: present"
else
  log "installing chromium and chromium-driver (Debian packages)"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get -o DPkg::Lock::Timeout=600 update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get -o DPkg::Lock::Timeout=600 install -y -qq chromium chromium-driver >/dev/null
fi
# torch.compile generates and compiles C++ kernels on CPU (tests/reference/test_compiled.py).
if command -v g++ >/dev/null 2>&1; then
  log "g++: present"
else
  log "installing g++ (torch.compile's CPU kernels in the reference suite)"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get -o DPkg::Lock::Timeout=600 update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get -o DPkg::Lock::Timeout=600 install -y -qq g++ >/dev/null
fi
# trunk and wasm-bindgen-cli build side by side: each install leaves one core idle for long
# stretches (its serial crates and its link), which the other fills.
installs=()
if have_version trunk "$TRUNK_VERSION"; then
  log "trunk $TRUNK_VERSION: present"
else
  log "installing trunk $TRUNK_VERSION (cargo install, a few minutes)"
  # In the dev profile: trunk only drives the build's tools (cargo, wasm-bindgen, wasm-opt, the
  # hooks), so its own speed does not show. Measured on 2 cores: the install took 370 s, where
  # its release profile without fat LTO took 709 s; a release build of the site took 46 s with
  # either binary, and wrote the same files.
  cargo install --debug --locked --quiet "trunk@$TRUNK_VERSION" &
  installs+=($!)
fi
if have_version wasm-bindgen "$WASM_BINDGEN_VERSION"; then
  log "wasm-bindgen-cli $WASM_BINDGEN_VERSION: present"
else
  log "installing wasm-bindgen-cli $WASM_BINDGEN_VERSION (cargo install, several minutes)"
  # Not --locked: its lockfile names a crate version this registry mirror lacks. In the dev
  # profile, as trunk: measured here, the install took 177 s against 445 s in release (each
  # beside other work on 2 cores), the site's release build wrote byte-identical files in the
  # same time (42 and 46 s), and the component tests' runner took 33 s against 13 s.
  cargo install --debug --quiet wasm-bindgen-cli --version "$WASM_BINDGEN_VERSION" &
  installs+=($!)
fi
for pid in "${installs[@]}"; do
  wait "$pid"
done
if have_version wasm-opt "version ${BINARYEN_VERSION%%.*}"; then
  log "wasm-opt (binaryen $BINARYEN_VERSION): present"
else
  # Debian's binaryen is too old for what wasm-bindgen emits; npm's package ships the binary.
  log "installing binaryen $BINARYEN_VERSION from npm into ~/.local/webtools"
  npm install --silent --prefix "$HOME/.local/webtools" --no-audit --no-fund "binaryen@$BINARYEN_VERSION"
fi
if have_version esbuild "$ESBUILD_VERSION"; then
  log "esbuild $ESBUILD_VERSION: present"
else
  # Minifies the app's JS glue after each release build (site/minify.sh). Installed with
  # binaryen in one command so that npm keeps both.
  log "installing esbuild $ESBUILD_VERSION from npm into ~/.local/webtools"
  npm install --silent --prefix "$HOME/.local/webtools" --no-audit --no-fund \
    "binaryen@$BINARYEN_VERSION" "esbuild@$ESBUILD_VERSION"
fi

# The reference venv (skipped by the run command, which needs no Python; scripts/test.sh installs
# it with scripts/setup-venv.sh in the background while the Rust steps run).
if [ "${SKIP_VENV:-0}" = 1 ]; then
  log "done (python venv skipped)"
  exit 0
fi
./scripts/setup-venv.sh
log "done"
