#!/usr/bin/env bash
# Installs the reference suite's Python venv (.venv): the pinned torch and transformers, and
# accelerate, peft, deepspeed and the rest of tests/reference/requirements.txt, skipping what is
# already there at the right version. scripts/setup.sh runs it last; scripts/test.sh runs it in
# the background from its start, so that its download (about 3 GB) overlaps the Rust steps.
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '[setup-venv] %s\n' "$*"; }

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
# The small packages (accelerate, peft, deepspeed, ...): every pin but torch and transformers,
# and those installed without their dependencies (requirements-nodeps.txt: torchtitan's).
nodeps=tests/reference/requirements-nodeps.txt
small_pins() { grep -E '^[A-Za-z0-9_.-]+==' "$req" | grep -v -E '^(torch|transformers)=='; }
nodeps_pins() { grep -E '^[A-Za-z0-9_.-]+==' "$nodeps"; }
# accelerate, peft and deepspeed are small: when torch and transformers are right, a missing or
# other version is installed into the venv on its own rather than by recreating it (3 GB).
small_ok() {
  .venv/bin/python - $(small_pins) $(nodeps_pins) <<'PY' 2>/dev/null
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
  .venv/bin/pip install -q --no-deps $(nodeps_pins)
}
if venv_ok; then
  log "python venv (.venv): torch $want_torch, transformers $want_tf present"
  if small_ok; then
    log "python venv (.venv): $(small_pins | tr '\n' ' ')$(nodeps_pins | tr '\n' ' ')present"
  else
    log "installing $(small_pins | tr '\n' ' ')$(nodeps_pins | tr '\n' ' ')into .venv"
    install_small
    { venv_ok && small_ok; } || { echo "[setup-venv] the venv does not import torch $want_torch, transformers $want_tf and $(small_pins | tr '\n' ' ')" >&2; exit 1; }
  fi
else
  py=${PYTHON:-python3}
  if ! "$py" -c 'import sys; assert sys.version_info >= (3, 11)' 2>/dev/null; then
    echo "[setup-venv] python 3.11 or newer is needed for the reference suite (tomllib reads tests/reference/published.toml)" >&2
    exit 1
  fi
  if ! "$py" -m venv --help >/dev/null 2>&1; then
    log "installing python3-venv"
    SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
    # The lock timeout: setup.sh may be installing Chromium at the same time (scripts/test.sh).
    $SUDO apt-get -o DPkg::Lock::Timeout=600 update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get -o DPkg::Lock::Timeout=600 install -y -qq python3-venv
  fi
  log "creating .venv with torch $want_torch, transformers $want_tf and $(small_pins | tr '\n' ' ')(about 3 GB, a few minutes)"
  rm -rf .venv
  "$py" -m venv .venv
  .venv/bin/pip install -q --upgrade pip
  .venv/bin/pip install -q -r <(grep -v '^deepspeed==' "$req")
  install_small
  { venv_ok && small_ok; } || { echo "[setup-venv] the venv does not import the pinned packages of $req" >&2; exit 1; }
fi
log "python venv (.venv): done"
