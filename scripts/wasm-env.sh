# Sourced by scripts/test.sh and scripts/run.sh before any wasm32 build: the site's bundle must
# not depend on where Cargo keeps its registry. Panic locations in dependencies carry their
# absolute source paths (`$CARGO_HOME/registry/src/index.crates.io-<hash>/yew-0.23.0/src/...`),
# so a machine with a longer CARGO_HOME built a larger bundle than the one the size budget was
# measured on. Remapping the prefix away makes the bundle the same bytes on every machine (and
# drops about fifty absolute paths from the first download). Every wasm32 build in the scripts
# gets the same flags, so none of them rebuilds another's artifacts.
registry_src="${CARGO_HOME:-$HOME/.cargo}/registry/src/"
export CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_RUSTFLAGS="--remap-path-prefix=${registry_src}="
unset registry_src
