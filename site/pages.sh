#!/bin/sh
# Trunk post-build hook: an index.html for every page of the site (guides, GPUs, models, named
# scenarios, worked examples), each with its own <title> and description, so a static host
# answers 200 with the right head for each address (search engines index these; the app then
# renders the page). Reads content/ next to site/; run by Trunk with TRUNK_STAGING_DIR and
# TRUNK_SOURCE_DIR set.
#
# Writes, besides the pages: content/claims.json from content/claims/*.toml (python3's
# tomllib), content/gpus.json from content/gpus.toml without its provenance,
# content/models.json from content/models/presets.toml (without the config URLs) and
# content/models/*.json, content/scenarios.json from content/scenarios/*.toml,
# content/calibrations.json from content/calibration/*.json with their rows emptied, and
# content/help.json from content/help.toml. index.html preloads the five the app fetches
# before its first page.
set -eu
stage="$TRUNK_STAGING_DIR"
content="$TRUNK_SOURCE_DIR/../content"

# Text for HTML (escaped), then for a sed replacement (its own specials escaped).
html() { printf '%s' "$1" | sed -e 's/&/\&amp;/g' -e 's/</\&lt;/g' -e 's/>/\&gt;/g' -e 's/"/\&quot;/g'; }
rep() { html "$1" | sed -e 's/[\\&|]/\\&/g'; }

# The documentation pages run the whole site's bundle (headroom-docs; Trunk.toml's loader picks
# it by the address): their copy of index.html preloads it in place of the calculator's.
docs_html=$(mktemp)
trap 'rm -f "$docs_html"' EXIT
python3 - "$stage/index.html" "$docs_html" <<'PY'
import re, sys
html = open(sys.argv[1]).read()
calc = r'<link rel="(?:modulepreload|preload)" href="([^"]*)headroom-site-[0-9a-f]+(?:\.js|_bg\.wasm)"[^>]*>'
found = re.findall(calc, html)
if len(found) != 2:
    sys.exit(f"pages.sh: expected the calculator's two preloads in index.html, found {len(found)}")
base = found[0]
docs = (f'<link rel="modulepreload" href="{base}headroom-docs.js" crossorigin="anonymous">'
        f'<link rel="preload" href="{base}headroom-docs_bg.wasm" crossorigin="anonymous" as="fetch" type="application/wasm">')
html = re.sub(calc, "", html)
html = html.replace("</head>", docs + "</head>", 1)
open(sys.argv[2], "w").write(html)
PY

# page PATH TITLE DESCRIPTION
page() {
  mkdir -p "$stage/$1"
  case "$1" in
    guides*|gpus*|models*|examples*|compare*|calibration*) from="$docs_html" ;;
    *) from="$stage/index.html" ;;
  esac
  sed -e "s|<title>[^<]*</title>|<title>$(rep "$2 · Headroom")</title>|" \
      -e "s|<meta name=\"description\" content=\"[^\"]*\">|<meta name=\"description\" content=\"$(rep "$3")\">|" \
      "$from" > "$stage/$1/index.html"
}

page guides "Guides" "Where the memory of a training step goes, and how to make a run fit: ten guides whose every number is computed live."
page gpus "GPUs" "Every GPU in Headroom's catalog, with what fits on each."
page models "Models" "Every model preset in Headroom, with the memory each training recipe needs."
page examples "Worked examples" "Five practitioners' memory guides, their claims checked against Headroom's model."
page compare "Compare two scenarios" "Two training setups side by side: what a change does to memory and speed."
page calibration "Calibration" "Constants measured on real GPUs: CUDA context, workspaces, matmul efficiency, bandwidths."

for f in "$content"/guides/*.md; do
  slug=$(basename "$f" .md)
  case "$slug" in *[!a-z0-9-]*) continue ;; esac
  title=$(sed -n '2,/^---$/s/^title: //p' "$f" | head -n 1)
  summary=$(sed -n '2,/^---$/s/^summary: //p' "$f" | head -n 1)
  page "guides/$slug" "$title" "$summary"
done

awk -F'"' '/^id = /{id=$2} /^name = /{print id "\t" $2}' "$content/gpus.toml" |
  while IFS="$(printf '\t')" read -r id name; do
    page "gpus/$id" "$name: what fits for training" \
      "Which models fit on one $name for full fine-tuning, LoRA and QLoRA, with the memory of each."
  done

awk -F'"' '/^id = /{id=$2} /^name = /{print id "\t" $2}' "$content/models/presets.toml" |
  while IFS="$(printf '\t')" read -r id name; do
    page "models/$id" "$name: GPU memory to train and fine-tune" \
      "How much GPU memory training $name takes: full fine-tuning, LoRA and QLoRA, and the smallest GPU each fits on."
  done

for f in "$content"/scenarios/*.toml; do
  id=$(basename "$f" .toml)
  title=$(sed -n 's/^title = "\(.*\)"$/\1/p' "$f" | head -n 1)
  page "s/$id" "$title" "A training scenario in Headroom: $title."
done

for n in 0 1 2 3 4; do
  title=$(sed -n 's/^title = "\(.*\)"$/\1/p' "$content/claims/ex$n.toml" | head -n 1)
  page "examples/$n" "$title" "A practitioner's memory guide, claim by claim, against Headroom's model."
done

# The worked examples' claims, which the app leaves out of its first download: one JSON file
# (file stem -> the file's TOML as JSON) that an examples page fetches when it opens. Python's
# tomllib reads the TOML as headroom-core's build.rs does for the CLI's embedded copy (the
# end-to-end test compares the two through the pages).
mkdir -p "$stage/content"
python3 - "$content/claims" "$stage/content/claims.json" <<'PY'
import json, pathlib, sys, tomllib
src, dest = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
files = {p.stem: tomllib.loads(p.read_text()) for p in sorted(src.glob("*.toml"))}
dest.write_text(json.dumps(files, separators=(",", ":")))
PY

# The GPU catalog, also left out of the first download: content/gpus.toml as JSON without the
# text that says where each figure comes from (`provenance`, `total_bytes_source`: the CLI prints
# it, no page shows it), installed into headroom-core before the first page and before the
# calibrations and scenarios that name GPUs (`catalog::install_gpus`; the CLI embeds the file).
python3 - "$content/gpus.toml" "$stage/content/gpus.json" <<'PY'
import json, pathlib, sys, tomllib
src, dest = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
catalog = tomllib.loads(src.read_text())
for gpu in catalog.get("gpu", []):
    gpu.pop("provenance", None)
    gpu.pop("total_bytes_source", None)
dest.write_text(json.dumps(catalog, separators=(",", ":")))
PY

# The presets, also left out of the first download: their index (presets.toml as JSON, without
# the config URLs the site does not show) and their config.json files (file stem -> the config),
# which the app fetches and installs into headroom-core before its first page (crates/
# headroom-core's `install_model_configs`; the CLI embeds the same files).
python3 - "$content/models" "$stage/content/models.json" <<'PY'
import json, pathlib, sys, tomllib
src, dest = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
index = tomllib.loads((src / "presets.toml").read_text())
for preset in index.get("preset", []):
    preset.pop("source", None)
configs = {p.stem: json.loads(p.read_text()) for p in sorted(src.glob("*.json"))}
dest.write_text(json.dumps({"index": index, "configs": configs}, separators=(",", ":")))
PY

# The named scenarios (content/scenarios/*.toml: the starting points, the worked examples' and
# the guides' scenarios), also left out of the first download: one JSON object (id -> the file
# as JSON) installed before the first page (`codec::install_named_scenarios`).
python3 - "$content/scenarios" "$stage/content/scenarios.json" <<'PY'
import json, pathlib, sys, tomllib
src, dest = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
files = {p.stem: tomllib.loads(p.read_text()) for p in sorted(src.glob("*.toml"))}
dest.write_text(json.dumps(files, separators=(",", ":")))
PY

# The published calibration files, also left out of the first download: one JSON object (file
# stem -> the file) that the app fetches and installs into headroom-core before its first page
# (`calibration::install_calibrations`; the CLI embeds the same files, cut down further). Each
# file's rows (its measured training steps, most of its bytes) are emptied: no estimate reads
# them, and the calibration page fetches the whole file from content/calibration/ to show them.
python3 - "$content/calibration" "$stage/content/calibrations.json" <<'PY'
import json, pathlib, sys
src, dest = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
files = {p.stem: json.loads(p.read_text()) for p in sorted(src.glob("*.json"))}
for f in files.values():
    f["rows"] = []
dest.write_text(json.dumps(files, separators=(",", ":")))
PY

# The form's help text (content/help.toml, one line per field key) and the other pages' prose
# (its [page] table), also left out of the first download: one JSON object (key -> text, and
# "page" -> key -> text) fetched beside the content above (site/src/help.rs). Every field of
# site/src/fields.rs must have a line and every line a field, every `help::page` key a [page]
# line and every such line a reader: the build fails naming the ones that do not.
python3 - "$content/help.toml" "$TRUNK_SOURCE_DIR/src/fields.rs" "$stage/content/help.json" "$content/sources.toml" <<'PY'
import json, pathlib, re, sys, tomllib
src, fields, dest, sources = (pathlib.Path(a) for a in sys.argv[1:])
help_text = tomllib.loads(src.read_text())
pages = help_text.pop("page", {})
keys = set(re.findall(r'key: "([^"]+)",\s*label:', fields.read_text()))
missing, unknown = sorted(keys - help_text.keys()), sorted(help_text.keys() - keys)
if missing or unknown:
    sys.exit(f"content/help.toml: fields without help {missing}, help for no field {unknown}")
# The [page] table: every key a page reads (`help::page("key")` in src/) and no other.
used = set()
for rs in fields.parent.rglob("*.rs"):
    used |= set(re.findall(r'help::page\("([^"]+)"\)', rs.read_text()))
missing, unknown = sorted(used - pages.keys()), sorted(pages.keys() - used)
if missing or unknown:
    sys.exit(f"content/help.toml [page]: read but missing {missing}, read nowhere {unknown}")
# The breakdown's sources (content/sources.toml) and the guides' summaries (their front matter),
# which the core leaves out of the site's build.
guides = {}
for md in sorted((sources.parent / "guides").glob("*.md")):
    if not re.fullmatch(r"[a-z0-9-]+", md.stem):
        continue  # README.md and the like: not guides (the core's build.rs skips them too)
    front = md.read_text().split("---")[1]
    summary = [l.split(":", 1)[1].strip() for l in front.splitlines() if l.startswith("summary:")]
    if not summary:
        sys.exit(f"{md}: no summary in its front matter")
    guides[md.stem] = summary[0]
dest.write_text(json.dumps({**help_text, "page": pages, "sources": tomllib.loads(sources.read_text()),
                            "guides": guides}, separators=(",", ":"), ensure_ascii=False))
PY
