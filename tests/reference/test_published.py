"""Published peak-memory measurements of real fine-tuning runs as external checks (issue 12, §5).

Every row of published.toml that Headroom can express runs `headroom estimate` and must agree
with the published figure, at the level the source measured, within its source's tolerance
(published.toml says what each tolerance is made of). A row that is a known disagreement is
an expected failure, strictly: once it agrees, the test fails so that its note is revisited.
The table of all rows, compared or not, is report.md's section "Published measurements"
(report.py joins the modules' sections when the session ends). A copy with the analysis is published_report.md. Run by scripts/test.sh
with HEADROOM_BIN pointing at the CLI; `python3 published.py` prints the table alone.
"""
import pathlib
import re

import pytest

import published

# Its section of report.md is written when the module ends: all its tests in one worker
# (scripts/test.sh distributes the others test by test).
pytestmark = pytest.mark.xdist_group("published")

HERE = pathlib.Path(__file__).parent
ROWS = published.load()
COMPARED = [r for r in ROWS if r["compare"]]
RESULTS = {}


def params():
    for r in COMPARED:
        marks = [pytest.mark.xfail(strict=True, reason=f"{r['xfail_name']}: {r['xfail']}")] if r["xfail"] else []
        yield pytest.param(r, id=r["id"], marks=marks)


@pytest.mark.parametrize("row", params())
def test_published_row(row):
    got, err, d = published.compare(row)
    within = abs(err) <= row["tolerance_pct"]
    RESULTS[row["id"]] = (got, err, ("xfail" if not within else "XPASS") if row["xfail"]
                          else ("ok" if within else "FAIL"))
    level = published.LEVELS[row["level"]]
    if isinstance(level, str):  # the peak the row reads is the one the JSON's peak reports
        assert d["peak"][level.removeprefix("peak_")] == d["bytes"][level]
    assert within, (f"{row['id']}: Headroom {published.fmt(got, row['unit'])} against "
                    f"{published.fmt(row['measured'], row['unit'])} measured ({row['level']}), "
                    f"{err:+.1f}% (tolerance {row['tolerance_pct']}%)")


def test_rows_are_documented():
    """Every row cites its source and unit; every source says what its tolerance is made of."""
    ids = [r["id"] for r in ROWS]
    assert len(ids) == len(set(ids)), "duplicate row ids"
    for r in ROWS:
        s = r["source"]
        assert re.match(r"https://github\.com/", s["url"]), r["id"]
        assert s["commit"] and s["stated"] and s["tolerance_why"], r["id"]
        assert r["unit"] in published.UNITS and r["level"] in published.LEVELS, r["id"]
        assert r["measured"] > 0, r["id"]
        if r["compare"]:
            for k in ("model", "gpu", "batch", "seq"):
                assert k in r["settings"], f"{r['id']}: compared without {k}"
            model = r["settings"]["model"]
            if model.endswith(".json"):
                assert (HERE / model).is_file(), f"{r['id']}: {model} missing"


@pytest.fixture(scope="session", autouse=True)
def report():
    """Appends the section at the end of the session, replacing that of an earlier run."""
    yield
    if not RESULTS:
        return
    published.replace_section("Published measurements", published.table(RESULTS))
