#!/bin/sh
# Trunk post-build hook, run before the others (they copy index.html): minifies the app's
# wasm-bindgen glue, which Trunk leaves as written (55.9 KB raw and 9.0 KB gzip of the first
# download; esbuild makes it 24.8 and 7.0), and puts the minified file's hash in index.html's
# integrity attribute so that the browser still accepts it. The whole site's bundle
# (headroom-docs.js, which the documentation pages load without an integrity attribute) is
# minified the same way. Release builds only (a debug build
# keeps readable glue); esbuild comes from scripts/setup.sh.
set -eu
stage="$TRUNK_STAGING_DIR"
[ "${TRUNK_PROFILE:-release}" = release ] || exit 0
if ! command -v esbuild >/dev/null 2>&1; then
  echo "site/minify.sh: esbuild is missing (scripts/setup.sh installs it)" >&2
  exit 1
fi
for js in "$stage"/headroom-site-*.js "$stage"/headroom-docs.js; do
  esbuild "$js" --minify --format=esm --log-level=warning --outfile="$js.min"
  mv "$js.min" "$js"
done
python3 - "$stage" <<'PY'
import base64, hashlib, pathlib, re, sys

stage = pathlib.Path(sys.argv[1])
index = stage / "index.html"
html = index.read_text()
for js in stage.glob("headroom-site-*.js"):
    digest = base64.b64encode(hashlib.sha384(js.read_bytes()).digest()).decode()
    pattern = r'(href="[^"]*' + re.escape(js.name) + r'"[^>]*integrity=")sha384-[^"]*(")'
    html, n = re.subn(pattern, lambda m: m.group(1) + "sha384-" + digest + m.group(2), html)
    if n != 1:
        sys.exit(f"site/minify.sh: expected one integrity attribute for {js.name} in index.html, found {n}")
index.write_text(html)
PY
