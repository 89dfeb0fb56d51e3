"""report.md: one section per test module, each written to its own file under report.d/ and
joined in a fixed order when the session ends (conftest.py), so that a module's section
survives the others whatever order they finish in, one process or several (pytest-xdist)."""
import pathlib
import re

HERE = pathlib.Path(__file__).parent
SECTIONS = HERE / "report.d"
# The order of the sections in report.md; a module not listed follows, by name.
ORDER = ["saved-bytes", "step-peak", "step-time", "published-measurements", "published-step-times",
         "gpu-measured", "posttrain-measured"]


def write_section(key, lines):
    """Writes one module's section (its heading among `lines`) as report.d/<key>.md."""
    SECTIONS.mkdir(exist_ok=True)
    (SECTIONS / f"{key}.md").write_text("\n".join(lines).strip("\n") + "\n")


def key_of(heading):
    """The file key of a section heading: "Published step times" -> "published-step-times"."""
    return re.sub(r"[^a-z0-9]+", "-", heading.lower()).strip("-")


def assemble():
    """report.md from every section file, in ORDER."""
    if not SECTIONS.is_dir():
        return
    files = {p.stem: p for p in SECTIONS.glob("*.md")}
    keys = [k for k in ORDER if k in files] + sorted(k for k in files if k not in ORDER)
    (HERE / "report.md").write_text("\n".join(files[k].read_text() for k in keys))
