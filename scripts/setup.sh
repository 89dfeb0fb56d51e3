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
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium chromium-driver >/dev/null
fi
# torch.compile generates and compiles C++ kernels on CPU (tests/reference/test_compiled.py).
if command -v g++ >/dev/null 2>&1; then
  log "g++: present"
else
  log "installing g++ (torch.compile's CPU kernels in the reference suite)"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq g++ >/dev/null
fi
if have_version trunk "$TRUNK_VERSION"; then
  log "trunk $TRUNK_VERSION: present"
else
  log "installing trunk $TRUNK_VERSION (cargo install, a few minutes)"
  # trunk's own release profile links with fat LTO in one codegen unit, which made its build
  # most of a bare machine's set-up; it only drives the build's tools, so its speed does not
  # matter: built without them.
  CARGO_PROFILE_RELEASE_LTO=false CARGO_PROFILE_RELEASE_CODEGEN_UNITS=16 \
    cargo install --locked --quiet "trunk@$TRUNK_VERSION"
fi
if have_version wasm-bindgen "$WASM_BINDGEN_VERSION"; then
  log "wasm-bindgen-cli $WASM_BINDGEN_VERSION: present"
else
  log "installing wasm-bindgen-cli $WASM_BINDGEN_VERSION (cargo install, several minutes)"
  # Not --locked: its lockfile names a crate version this registry mirror lacks.
  cargo install --quiet wasm-bindgen-cli --version "$WASM_BINDGEN_VERSION"
fi
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

# The reference venv (skipped by the run command, which needs no Python).
if [ "${SKIP_VENV:-0}" = 1 ]; then
  log "done (python venv skipped)"
  exit 0
fi
# The reference venv: recreate it when the pinned versions are not the ones installed.
req=tests/reference/requirements.txt
want_torch=$(sed -n 's/^torch==//p' "$req")
want_tf=$(sed -n 's/^transformers==//p' "$req")
venv_ok() {
  [ -x .venv/bin/python ] && .venv/bin/python - "$want_torch" "$want_tf" <<'PY' 2>/dev/null
import sys, torch, transformers, pytest
assert torch.__version__.split("+")[0] == sys.argv[1], torch.__version__
assert transformers.__version__ == sys.argv[2], transformers.__version__
PY
}
# The small packages (accelerate, peft, deepspeed, ...): every pin but torch and transformers.
small_pins() { grep -E '^[A-Za-z0-9_.-]+==' "$req" | grep -v -E '^(torch|transformers)=='; }
# accelerate, peft and deepspeed are small: when torch and transformers are right, a missing or
# other version is installed into the venv on its own rather than by recreating it (3 GB).
small_ok() {
  .venv/bin/python - $(small_pins) <<'PY' 2>/dev/null
import sys
from importlib.metadata import version
for pin in sys.argv[1:]:
    name, want = pin.split("==")
    assert version(name) == want, (name, version(name), want)
PY
}
# deepspeed's setup.py imports torch: install it without build isolation, after torch, and
# without compiling its kernels (the suite only reads its config classes).
install_small() {
  .venv/bin/pip install -q $(small_pins | grep -v '^deepspeed==')
  DS_BUILD_OPS=0 .venv/bin/pip install -q --no-build-isolation $(small_pins | grep '^deepspeed==')
}
if venv_ok; then
  log "python venv (.venv): torch $want_torch, transformers $want_tf present"
  if small_ok; then
    log "python venv (.venv): $(small_pins | tr '\n' ' ')present"
  else
    log "installing $(small_pins | tr '\n' ' ')into .venv"
    install_small
    { venv_ok && small_ok; } || { echo "[setup] the venv does not import torch $want_torch, transformers $want_tf and $(small_pins | tr '\n' ' ')" >&2; exit 1; }
  fi
else
  py=${PYTHON:-python3}
  if ! "$py" -c 'import sys; assert sys.version_info >= (3, 11)' 2>/dev/null; then
    echo "[setup] python 3.11 or newer is needed for the reference suite (tomllib reads tests/reference/published.toml)" >&2
    exit 1
  fi
  if ! "$py" -m venv --help >/dev/null 2>&1; then
    log "installing python3-venv"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv
  fi
  log "creating .venv with torch $want_torch, transformers $want_tf and $(small_pins | tr '\n' ' ')(about 3 GB, a few minutes)"
  rm -rf .venv
  "$py" -m venv .venv
  .venv/bin/pip install -q --upgrade pip
  .venv/bin/pip install -q -r <(grep -v '^deepspeed==' "$req")
  install_small
  { venv_ok && small_ok; } || { echo "[setup] the venv does not import the pinned packages of $req" >&2; exit 1; }
fi
log "done"
