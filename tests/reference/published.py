"""Published measurements (published.toml) against the core, with the standard library only.

`python3 published.py` prints the table that test_published.py appends to report.md. Each row
that can be compared runs `headroom estimate ... --format json` with the source's settings
merged with the row's, and reads the peak at the level the source measured:

    allocated, active -> bytes.peak_allocated   (active_bytes.all.peak differs from
                                                 max_memory_allocated only by blocks freed
                                                 but still used by a stream)
    reserved          -> bytes.peak_reserved
    device, unknown   -> bytes.peak_device      (nvidia-smi; "unknown" takes the largest level,
                                                 and the source's tolerance says why)
    after_step        -> bytes.weights + gradients + optimizer_states (memory_allocated() read
                                                 after optimizer.step(), gradients not yet freed)
"""
import json
import os
import pathlib
import statistics
import subprocess
import tomllib

import report

HERE = pathlib.Path(__file__).parent
BIN = os.environ.get("HEADROOM_BIN", str(HERE.parent.parent / "target" / "debug" / "headroom"))

FLAGS = ("model", "gpu", "gpus", "batch", "seq", "method", "rank", "targets", "precision",
         "optimizer", "attention", "sdpa", "checkpointing", "dp", "loss", "save-embeddings",
         "offload-params", "accum", "base", "len-mean", "len-sd", "drop-long")
UNITS = {"GiB": 2**30, "GB": 10**9, "B": 1}
LEVELS = {"allocated": "peak_allocated", "active": "peak_allocated", "reserved": "peak_reserved",
          "device": "peak_device", "unknown": "peak_device",
          "after_step": ("weights", "gradients", "optimizer_states")}
SOURCE_KEYS = {"id", "title", "url", "commit", "stated", "unit", "level", "settings",
               "tolerance_pct", "tolerance_why", "cannot_express", "disagreements", "row"}
ROW_KEYS = {"id", "label", "measured", "unit", "level", "compare", "not_compared", "xfail",
            "cannot_express", *FLAGS}


def load():
    """The rows, each with its source's fields merged in (the row's own win)."""
    data = tomllib.loads((HERE / "published.toml").read_text())
    rows = []
    for src in data["source"]:
        bad = set(src) - SOURCE_KEYS
        assert not bad, f"source {src.get('id')}: unknown keys {sorted(bad)}"
        for r in src["row"]:
            bad = set(r) - ROW_KEYS
            assert not bad, f"row {r.get('id')}: unknown keys {sorted(bad)}"
            xfail = r.get("xfail", "")
            assert not xfail or xfail in src.get("disagreements", {}), \
                f"row {r['id']}: xfail {xfail!r} is not in its source's disagreements"
            assert r.get("compare", True) or r.get("not_compared"), \
                f"row {r['id']}: not compared without saying why"
            settings = dict(src.get("settings", {}))
            settings.update({k: r[k] for k in FLAGS if k in r})
            rows.append({
                "id": r["id"], "label": r.get("label", r["id"]), "source": src,
                "measured": r["measured"], "unit": r.get("unit", src["unit"]),
                "level": r.get("level", src["level"]), "settings": settings,
                "compare": r.get("compare", True), "not_compared": r.get("not_compared", ""),
                "xfail": src["disagreements"][xfail] if xfail else "",
                "xfail_name": xfail, "tolerance_pct": src["tolerance_pct"],
                "cannot_express": r.get("cannot_express", []),
            })
    return rows


def args_of(settings):
    args = []
    for k, v in settings.items():
        if isinstance(v, bool):
            # A switch: its flag alone when on.
            args += [f"--{k}"] if v else []
            continue
        if k == "model" and v.endswith(".json"):
            v = str(HERE / v)
        args += [f"--{k}", str(v)]
    return args


def estimate(row):
    out = subprocess.run([BIN, "estimate", *args_of(row["settings"]), "--format", "json"],
                         capture_output=True, text=True)
    assert out.returncode == 0, f"{row['id']}: headroom exited {out.returncode}: {out.stderr}"
    return json.loads(out.stdout)


def compare(row):
    """Runs the core for a comparable row: (predicted in the row's unit, error %, the JSON)."""
    d = estimate(row)
    level = LEVELS[row["level"]]
    got = (sum(d["bytes"][k] for k in level) if isinstance(level, tuple) else d["bytes"][level])
    got /= UNITS[row["unit"]]
    return got, 100 * (got - row["measured"]) / row["measured"], d


def short_settings(s):
    model = s.get("model", "?")
    if model.endswith(".json"):
        model = pathlib.Path(model).stem
    parts = [model, s.get("gpu", ""), f"b{s.get('batch', '?')}", f"s{s.get('seq', '?')}"]
    method = s.get("method", "full")
    if method in ("lora", "qlora"):
        method += f" r{s.get('rank', 16)} {s.get('targets', 'all')}"
        if s.get("save-embeddings"):
            method += " + modules_to_save"
        if "adapter" in s:
            method += f", {s['adapter']} adapters"
        if s.get("lora-dropout"):
            method += ", lora_dropout"
    parts.append(method)
    parts += [s.get("precision", ""), s.get("optimizer", ""), f"ckpt {s.get('checkpointing', 'none')}"]
    attn = s.get("attention", "sdpa")
    parts.append(attn + (f" ({s['sdpa']})" if attn == "sdpa" and "sdpa" in s else ""))
    if "gpus" in s:
        parts.append(f"{s['gpus']} GPUs")
    return ", ".join(p for p in parts if p)


def fmt(x, unit):
    return f"{x / 2**30:.2f} GiB" if unit == "B" else f"{x:.2f} {unit}"


def table(results):
    """Markdown lines for every row. `results` maps a compared row's id to (got, err, status)."""
    rows = load()
    lines = ["", "## Published measurements", "",
             "Peaks that other projects published for real runs (tests/reference/published.toml; "
             "sources below), against the core at the level each source measured. Status: `ok` "
             "within the source's tolerance, `xfail` a known disagreement (strict; its name is "
             "explained under the source), `FAIL` outside the tolerance, `-` not compared (why in "
             "the last column). The last column also lists what of the row Headroom cannot "
             "express beyond what its source shares (listed under the source).", "",
             "| source | row | Headroom flags | measured | Headroom | error | tol. | status | not compared / cannot express |",
             "|---|---|---|---|---|---|---|---|---|"]
    errs = []
    for r in rows:
        meas = f"{fmt(r['measured'], r['unit'])} ({r['level']})"
        notes = "; ".join(r["cannot_express"])
        if r["id"] in results:
            got, err, status = results[r["id"]]
            errs.append(abs(err))
            if r["xfail_name"]:
                status += f" ({r['xfail_name']})"
            cells = [short_settings(r["settings"]), meas, fmt(got, r["unit"]), f"{err:+.1f}%",
                     f"{r['tolerance_pct']}%", status]
        elif r["compare"]:
            cells = [short_settings(r["settings"]), meas, "-", "-", f"{r['tolerance_pct']}%", "not run"]
        else:
            cells = ["-", meas, "-", "-", "-", "-"]
            notes = f"**{r['not_compared']}**" + (f"; {notes}" if notes else "")
        lines.append(f"| {r['source']['id']} | {r['label']} | " + " | ".join(cells) + f" | {notes} |")
    if errs:
        ok = sum(1 for v in results.values() if v[2] == "ok")
        xf = sum(1 for v in results.values() if v[2] == "xfail")
        lines += ["", f"Compared: {len(errs)} of {len(rows)} rows; within tolerance {ok}, known "
                  f"disagreements {xf}, other {len(errs) - ok - xf}. Absolute error: median "
                  f"{statistics.median(errs):.1f}%, largest {max(errs):.1f}%."]
    lines += ["", "### Sources", ""]
    seen = set()
    for r in rows:
        s = r["source"]
        if s["id"] in seen:
            continue
        seen.add(s["id"])
        lines.append(f"- **{s['id']}**: {s['title']}, <{s['url']}> ({s['commit']}). Stated: "
                     f"{s['stated']}. Unit {s['unit']}, level {s['level']}. Tolerance "
                     f"{s['tolerance_pct']}%: {s['tolerance_why']}")
        if s.get("cannot_express"):
            lines.append(f"  Headroom cannot express: {'; '.join(s['cannot_express'])}.")
        for name, text in s.get("disagreements", {}).items():
            lines.append(f"  Known disagreement `{name}`: {text}.")
    return lines


def run_all():
    results = {}
    for r in load():
        if not r["compare"]:
            continue
        got, err, _ = compare(r)
        within = abs(err) <= r["tolerance_pct"]
        results[r["id"]] = (got, err, ("xfail" if not within else "XPASS") if r["xfail"]
                            else ("ok" if within else "FAIL"))
    return results



def replace_section(heading, lines):
    """Writes `lines` (a section starting with "## heading") as report.md's section of that
    heading (report.py)."""
    report.write_section(report.key_of(heading), lines)


if __name__ == "__main__":
    print("\n".join(table(run_all())))
