#!/usr/bin/env bash
# Installs what Headroom's build and tests need, skipping what is already there at the right
# version: the wasm32 target (the core must build for it) and a Python venv with the pinned
# torch and transformers for the reference suite (tests/reference/requirements.txt).
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
if venv_ok; then
  log "python venv (.venv): torch $want_torch, transformers $want_tf present"
else
  py=${PYTHON:-python3}
  if ! "$py" -c 'import sys; assert sys.version_info >= (3, 10)' 2>/dev/null; then
    echo "[setup] python 3.10 or newer is needed for the reference suite" >&2
    exit 1
  fi
  if ! "$py" -m venv --help >/dev/null 2>&1; then
    log "installing python3-venv"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv
  fi
  log "creating .venv with torch $want_torch and transformers $want_tf (about 3 GB, a few minutes)"
  rm -rf .venv
  "$py" -m venv .venv
  .venv/bin/pip install -q --upgrade pip
  .venv/bin/pip install -q -r "$req"
  venv_ok || { echo "[setup] the venv does not import the pinned torch/transformers" >&2; exit 1; }
fi
log "done"
