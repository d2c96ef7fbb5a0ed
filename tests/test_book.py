"""The book: a strict build, every syllabus topic where the map says, real outputs, no CDN.

Builds the book once per session with MEASURE_FIRST_SIZE=small (tests/book_support.py),
exactly as ``make book`` does; the execution cache in _build/.jupyter_cache keeps
repeat builds fast. Every other test reads the built HTML.
"""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path

import pytest
import yaml
from bs4 import BeautifulSoup

from book_support import (EXECUTED, HTML, ROOT, build_book, claim_statuses, figure_problems,
                          images_without_alt, plumbing_in_view, standing_paragraphs,
                          stray_outputs)

pytestmark = pytest.mark.slow

SYLLABUS = ROOT.parent / "shared" / "SYLLABUS.md"
MAPS = sorted((ROOT / "tests").glob("syllabus_map_*.yml"))
WEEK_FILES = {
    1: "book/week1_workload.md",
    2: "book/week2_timing.md",
    3: "book/week3_algorithms.md",
    4: "book/week4_profilers.md",
    5: "book/week5_memory.md",
    6: "book/week6_compilation.md",
    7: "book/week7_parallelism.md",
    8: "book/week8_practice.md",
}
# Chapters whose text states the size they ran at (every chapter with code).
SIZED_CHAPTERS = ["book/index.md", "book/chip.md", *WEEK_FILES.values()]
# Tags and attributes through which a page makes the browser fetch something.
LOADING = {"script": ["src"], "link": ["href"], "img": ["src", "srcset"], "iframe": ["src"],
           "source": ["src", "srcset"], "video": ["src", "poster"], "audio": ["src"],
           "embed": ["src"], "object": ["data"], "track": ["src"], "input": ["src"]}
EXTERNAL = re.compile(r"^\s*(https?:)?//", re.IGNORECASE)


@pytest.fixture(scope="session")
def book():
    result = build_book()
    assert result.returncode == 0, (
        "the book did not build cleanly (-W: warnings are errors):\n"
        + "\n".join(result.warnings[:40] or result.output.splitlines()[-40:])
        + "\n" + result.tracebacks()
    )
    return result


def _toc_files() -> list[str]:
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    files = [toc["root"]]
    for part in toc.get("parts", [{"chapters": toc.get("chapters", [])}]):
        for chapter in part["chapters"]:
            files.append(chapter["file"])
            files.extend(section["file"] for section in chapter.get("sections", []))
    return files


def _source(doc: str) -> Path:
    path = ROOT / doc
    return path if path.suffix else path.with_suffix(".md")


def _html(doc: str) -> Path:
    return HTML / Path(doc).with_suffix(".html")


@cache
def _soup(doc: str) -> BeautifulSoup:
    return BeautifulSoup(_html(doc).read_text(encoding="utf-8"), "html.parser")


def _is_notebook(doc: str) -> bool:
    return "{code-cell}" in _source(doc).read_text(encoding="utf-8")


def _text(node) -> str:
    return re.sub(r"\s+", " ", node.get_text(" ")).strip()


def _map_entries() -> list[dict]:
    entries = []
    for path in MAPS:
        data = yaml.safe_load(path.read_text()) or {}
        for entry in data.get("topics", []):
            entries.append({**entry, "_map": path.name})
    return entries


def _syllabus_topics() -> dict[int, list[str]]:
    """Every bullet of every week, whitespace collapsed, keyed by week."""
    topics: dict[int, list[str]] = {}
    week = None
    bullet: list[str] | None = None
    for line in SYLLABUS.read_text(encoding="utf-8").splitlines():
        heading = re.match(r"^## Week (\d+)\.", line)
        if heading or line.startswith("#") or line.startswith("---"):
            if bullet and week:
                topics[week].append(" ".join(bullet))
            bullet = None
            week = int(heading.group(1)) if heading else None
            if week:
                topics[week] = []
            continue
        if week is None:
            continue
        if line.startswith("- "):
            if bullet:
                topics[week].append(" ".join(bullet))
            bullet = [line[2:].strip()]
        elif line.startswith("  ") and bullet is not None:
            bullet.append(line.strip())
        elif bullet:
            topics[week].append(" ".join(bullet))
            bullet = None
    if bullet and week:
        topics[week].append(" ".join(bullet))
    return {w: [re.sub(r"\s+", " ", t) for t in ts] for w, ts in topics.items()}


# --- the build -----------------------------------------------------------------------


def test_book_builds_without_warnings(book):
    assert book.warnings == []


def test_chapter_kernels_do_not_warn_about_tcp(book):
    # book/_ext/measure_first_kernels.py starts them over ipc (a cold build starts one per
    # chapter; a fully cached one starts none).
    assert "running over TCP" not in book.output


def test_every_toc_page_was_built(book):
    missing = [doc for doc in _toc_files() if not _html(doc).exists()]
    assert missing == [], f"pages in _toc.yml without HTML: {missing}"


def test_only_chapters_are_read():
    """exclude_patterns keep solutions, assignments, tests and the venv out of the book."""
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    excluded = set(config["exclude_patterns"])
    for folder in ("solutions", "assignments", ".venv", "grading", "tests", "benchmarks",
                   "README.md", "course_lib", "_build"):
        assert folder in excluded, f"{folder} must be in exclude_patterns"
    assert config["only_build_toc_files"] is True
    assert config["execute"]["execute_notebooks"] == "cache"
    assert config["execute"]["raise_on_error"] is True


@pytest.mark.parametrize("doc", [d for d in WEEK_FILES.values()] + ["book/index.md"])
def test_notebook_chapters_have_the_jupytext_header(doc):
    """Without it MyST-NB treats the file as plain markdown and silently skips the code."""
    text = _source(doc).read_text(encoding="utf-8")
    if "{code-cell}" not in text:
        pytest.skip(f"{doc} has no code cells")
    header = text.split("---", 2)[1]
    assert "jupytext:" in header and "kernelspec:" in header, doc


# --- the syllabus map ----------------------------------------------------------------


@pytest.mark.skipif(not SYLLABUS.exists(), reason=f"no syllabus at {SYLLABUS}")
@pytest.mark.parametrize("week", range(1, 9))
def test_every_syllabus_topic_is_mapped(week):
    topics = _syllabus_topics()[week]
    assert topics, f"found no bullets for week {week} in {SYLLABUS}"
    mapped = [e for e in _map_entries() if e["week"] == week]
    unmapped = [t for t in topics
                if not any(t.startswith(re.sub(r"\s+", " ", e["topic"])) for e in mapped)]
    assert unmapped == [], (
        f"week {week}: syllabus topics with no entry in tests/syllabus_map_*.yml: {unmapped}"
    )
    stale = [e["topic"] for e in mapped
             if not any(t.startswith(re.sub(r"\s+", " ", e["topic"])) for t in topics)]
    assert stale == [], f"week {week}: map entries that match no syllabus bullet: {stale}"


def test_the_map_files_exist():
    names = {p.name for p in MAPS}
    assert "syllabus_map_weeks1_4.yml" in names
    assert "syllabus_map_weeks5_8.yml" in names, "Weeks 5-8 need their syllabus map"


@pytest.mark.parametrize("entry", _map_entries(),
                         ids=lambda e: f"w{e['week']}-{e['section']}")
def test_mapped_section_teaches_its_topic(book, entry):
    doc = entry["file"]
    assert _source(doc).exists(), f"{entry['_map']}: no such chapter {doc}"
    section = _soup(doc).find("section", id=entry["section"])
    assert section is not None, (
        f"{entry['_map']}: {doc} has no section with id {entry['section']!r}; it has "
        f"{[s.get('id') for s in _soup(doc).find_all('section')]}"
    )
    # Compared without whitespace: highlighted code splits into one element per token.
    text = re.sub(r"\s+", "", section.get_text()).lower()
    missing = [e for e in entry.get("evidence", []) if re.sub(r"\s+", "", e).lower() not in text]
    assert missing == [], f"{doc}#{entry['section']} lacks {missing}"
    if entry.get("plot"):
        images = [img for out in section.select("div.cell_output") for img in out.find_all("img")]
        assert images, f"{doc}#{entry['section']} should show an executed plot"


# --- what every chapter must have ----------------------------------------------------


@pytest.mark.parametrize("doc", [d for d in _toc_files()])
def test_chapters_have_executed_output_and_no_errors(book, doc):
    if not _is_notebook(doc):
        pytest.skip(f"{doc} has no code cells")
    soup = _soup(doc)
    cells = soup.select("div.cell")
    outputs = soup.select("div.cell_output")
    assert cells and outputs, f"{doc}: code cells without executed output"
    errors = [_text(o)[:300] for o in soup.select(".output.traceback, .output.error")]
    assert errors == [], f"{doc}: error outputs {errors}"
    stderr = [_text(o)[:300] for o in soup.select(".output.stderr")]
    bad = [s for s in stderr if re.search(r"Traceback|Error|Exception|Warning", s)]
    assert bad == [], f"{doc}: error or warning output on stderr {bad}"
    assert "Traceback (most recent call last)" not in _text(soup), doc


@pytest.mark.parametrize("week,doc", WEEK_FILES.items())
def test_week_chapters_have_the_parts_of_a_chapter(book, week, doc):
    soup = _soup(doc)
    text = _text(soup).lower()
    assert soup.select("div.admonition"), f"{doc}: no learning-outcomes admonition"
    assert "takeaways" in text, f"{doc}: no key takeaways"
    assert soup.select("div.exercise"), f"{doc}: no exercises"
    assert soup.select("div.solution.dropdown"), f"{doc}: no solution behind a toggle"
    plots = [img for out in soup.select("div.cell_output") for img in out.find_all("img")]
    assert plots, f"{doc}: no executed plot"
    link = f"assignments/week{week}/week{week}.ipynb"
    assert any(link in (a.get("href") or "") for a in soup.find_all("a")), (
        f"{doc}: no link to its graded notebook {link}"
    )


@pytest.mark.parametrize("week,doc", WEEK_FILES.items())
def test_exercises_are_numbered_within_their_chapter(book, week, doc):
    """Week N's exercises read Exercise N.1, N.2, ... and their solutions say the same."""
    soup = _soup(doc)
    titles = [_text(t) for t in soup.select("div.exercise p.admonition-title")]
    numbers = [re.match(r"Exercise (\d+)\.(\d+)", t) for t in titles]
    assert titles and all(numbers), f"{doc}: exercise titles {titles}"
    assert [(int(m.group(1)), int(m.group(2))) for m in numbers] == [
        (week, k) for k in range(1, len(titles) + 1)
    ], f"{doc}: {titles}"
    solutions = [_text(t) for t in soup.select("div.solution .admonition-title, div.solution summary")]
    referred = {m.group(1) for t in solutions for m in [re.search(r"Exercise (\d+(\.\d+)?)", t)] if m}
    assert referred <= {f"{week}.{k}" for k in range(1, len(titles) + 1)}, f"{doc}: {solutions}"


@pytest.mark.parametrize("doc", SIZED_CHAPTERS)
def test_chapters_state_the_size_they_ran_at(book, doc):
    """The size is printed from the variable, and the build used the small size.

    A failure here after a plain `jupyter-book build .` means the execution cache
    holds a full-size run: build with `make book` (or remove _build/.jupyter_cache).
    """
    text = _text(_soup(doc))
    match = re.search(r"built at size (\w+)|This build ran at size (\w+)", text)
    assert match, f"{doc}: does not state the size it ran at"
    assert (match.group(1) or match.group(2)) == "small", (
        f"{doc} was executed at size {match.group(1) or match.group(2)}; see this test's docstring"
    )


@pytest.mark.parametrize("doc", [d for d in _toc_files()])
def test_notebook_pages_have_launch_and_download_buttons(book, doc):
    if not _is_notebook(doc):
        pytest.skip(f"{doc} has no code cells")
    soup = _soup(doc)
    hrefs = [a.get("href", "") for a in soup.find_all("a")]
    ipynb = Path(doc).with_suffix(".ipynb").as_posix()
    assert any(h.startswith("https://codespaces.new/") for h in hrefs), f"{doc}: no Codespaces"
    assert any(h.startswith("https://mybinder.org/v2/gh/") and doc in h for h in hrefs), (
        f"{doc}: no Binder link to {doc}"
    )
    colab = [h for h in hrefs if h.startswith("https://colab.research.google.com/github/")]
    assert colab and all(h.endswith(f"/_sources/{ipynb}") for h in colab), (
        f"{doc}: Colab must open the published notebook _sources/{ipynb}, got {colab}"
    )
    downloads = [h for h in hrefs if h.endswith(f"_sources/{ipynb}")]
    assert downloads, f"{doc}: no .ipynb download"
    notebook = json.loads((HTML / "_sources" / ipynb).read_text(encoding="utf-8"))
    first = notebook["cells"][0]
    assert "measure-first-setup" in first["metadata"].get("tags", [])
    assert "course_lib" in "".join(first["source"])
    executed = [c for c in notebook["cells"] if c["cell_type"] == "code" and c.get("outputs")]
    assert executed, f"the downloadable {ipynb} has no outputs"


# --- nothing from outside the site ---------------------------------------------------


def _external_loads(path: Path) -> list[str]:
    found = []
    soup = BeautifulSoup(path.read_text(encoding="utf-8"), "html.parser")
    for tag, attrs in LOADING.items():
        for node in soup.find_all(tag):
            for attr in attrs:
                for value in (node.get(attr) or "").split(","):
                    if EXTERNAL.match(value):
                        found.append(f"<{tag} {attr}={value.strip()}>")
    for style in soup.find_all("style"):
        found += [f"<style> {u}" for u in re.findall(r"url\(\s*['\"]?((?:https?:)?//[^)'\"]+)", style.text)]
    return found


def test_no_page_loads_anything_from_outside_the_site(book):
    pages = sorted(HTML.rglob("*.html"))
    assert len(pages) >= len(_toc_files())
    offenders = {str(p.relative_to(HTML)): _external_loads(p) for p in pages}
    offenders = {k: v for k, v in offenders.items() if v}
    assert offenders == {}, f"pages that load from outside the site: {offenders}"


def test_no_stylesheet_imports_from_outside_the_site(book):
    offenders = []
    for css in HTML.rglob("*.css"):
        text = css.read_text(encoding="utf-8", errors="replace")
        for url in re.findall(r"(?:url\(|@import\s+)\s*['\"]?((?:https?:)?//[^)'\";\s]+)", text):
            offenders.append(f"{css.relative_to(HTML)}: {url}")
    assert offenders == []


def test_the_scanner_would_catch_a_cdn():
    """The check above is only worth something if it can fail."""
    page = HTML.parent / "scanner-check.html"
    page.parent.mkdir(parents=True, exist_ok=True)
    page.write_text('<html><head><script src="https://cdn.example.org/mathjax.js"></script>'
                    '<link rel="stylesheet" href="//fonts.example.org/a.css"></head>'
                    '<body><img src="_static/local.png"><a href="https://example.org">ok</a>'
                    "</body></html>")
    try:
        assert _external_loads(page) == ["<script src=https://cdn.example.org/mathjax.js>",
                                         "<link href=//fonts.example.org/a.css>"]
    finally:
        page.unlink()


# --- claims --------------------------------------------------------------------------


@pytest.mark.parametrize("doc", [d for d in _toc_files()])
def test_no_page_shows_a_claim_this_machine_did_not_bear_out(book, doc):
    """A strict build fails on a false claim; this catches a non-strict cached page."""
    if not _is_notebook(doc):
        pytest.skip(f"{doc} has no code cells")
    boxes = [_text(b)[:300] for b in _soup(doc).select("div.measure-first-claim")]
    assert boxes == [], f"{doc}: claims that did not hold: {boxes}"


# --- nothing on the page but the lesson ------------------------------------------------


def _executed(doc: str) -> dict:
    path = EXECUTED / Path(doc).with_suffix(".ipynb")
    return json.loads(path.read_text(encoding="utf-8"))


def _glue(doc: str) -> dict:
    path = EXECUTED / Path(doc).with_suffix(".glue.json")
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}


NOTEBOOK_PAGES = [d for d in _toc_files() if _is_notebook(d)]


@pytest.mark.parametrize("doc", NOTEBOOK_PAGES)
def test_set_up_and_claim_cells_leave_no_output(book, doc):
    """No bare True/None under a hidden cell; a removed cell or the set-up prints nothing."""
    assert stray_outputs(_executed(doc)) == []


@pytest.mark.parametrize("doc", NOTEBOOK_PAGES)
def test_every_chapter_starts_with_the_one_set_up_cell(doc):
    """One convention: the first code cell is hidden behind a toggle and calls book.setup."""
    source = _source(doc).read_text(encoding="utf-8")
    first = re.search(r"```\{code-cell\} ipython3\n(.*?)\n```", source, flags=re.S).group(1)
    assert first.startswith(":tags: [hide-input]"), f"{doc}: {first.splitlines()[0]!r}"
    assert "book.setup(" in first, f"{doc}: the set-up cell does not call book.setup"


@pytest.mark.parametrize("doc", NOTEBOOK_PAGES)
def test_visible_cells_call_no_plumbing(book, doc):
    """claims.claim/record/passage and glue belong in removed cells, never in view."""
    assert plumbing_in_view(_executed(doc)) == []


@pytest.mark.parametrize("doc", NOTEBOOK_PAGES)
def test_every_figure_is_labelled(book, doc):
    """Each panel titled (or its figure), each axis labelled or worded, as recorded."""
    assert figure_problems(_executed(doc)) == []


@pytest.mark.parametrize("doc", _toc_files())
def test_every_image_has_alt_text(book, doc):
    """A figure's <img> says what it shows (from its labels), never its file name."""
    assert images_without_alt(_html(doc).read_text(encoding="utf-8")) == []


@pytest.mark.parametrize("doc", NOTEBOOK_PAGES)
def test_no_skipped_claim_leaves_its_paragraph_standing(book, doc):
    statuses = claim_statuses(_glue(doc))
    source = _source(doc).read_text(encoding="utf-8")
    assert standing_paragraphs(source, statuses) == []
    skipped = [n for n, s in statuses.items() if s["status"] == "skipped"]
    page = _plain(_text(_soup(doc)))
    for name in skipped:                    # and the honest version is what the page shows
        passage = "".join(_glue(doc)[name]["data"]["text/markdown"])
        words = _plain(passage).split()[:8]
        assert " ".join(words) in page, (doc, name, words)


def test_week4_says_sampling_beat_tracing_only_where_py_spy_ran(book):
    """The page may promise or state py-spy's measurement only in a build that made it."""
    doc = WEEK_FILES[4]
    status = claim_statuses(_glue(doc))["outside"]["status"]
    page = _plain(_text(_soup(doc)))
    measured = [p for p in ("sampling beat tracing", "measures a sampler that does not",
                            "few percent") if p in page]
    if status == "held":
        assert measured[:2] == ["sampling beat tracing", "measures a sampler that does not"]
    else:
        assert measured == [], (status, measured)
        assert "could not" in page or "did not run" in page


def _plain(text: str) -> str:
    """Text without Markdown emphasis or code marks, and with straight quotes."""
    text = text.translate(str.maketrans("\u2018\u2019\u201c\u201d", "''\"\""))
    return re.sub(r"\s+", " ", re.sub(r"[`*_{}]", "", text))


# The checks above are only worth something if they can fail.


def _notebook(*cells):
    return {"cells": [{"cell_type": "code", "metadata": {"tags": tags}, "source": source,
                       "outputs": outputs} for tags, source, outputs in cells]}


def _result(text):
    return {"output_type": "execute_result", "data": {"text/plain": text}, "metadata": {}}


def test_the_output_check_would_catch_a_stray_true_or_none():
    setup = (["hide-input"], "page = book.setup()", [])
    notebook = _notebook(setup,
                         (["remove-input"], "claims.claim('x', True, 'x')", [_result("True")]),
                         (["remove-input"], "ax = plot()", [_result("None")]),
                         (["remove-input"], "table", [_result("   a\n0  1")]),
                         (["remove-cell"], "print(1)", [{"output_type": "stream",
                                                         "name": "stdout", "text": "1\n"}]))
    found = stray_outputs(notebook)
    assert len(found) == 3 and "a bare True" in found[0] and "a bare None" in found[1]
    assert "removed cell" in found[2]
    printing_claim = (["remove-input"], "claims.claim('x', True, 'x')\nprint(2)",
                      [{"output_type": "stream", "name": "stdout", "text": "2\n"}])
    assert "the claim cell shows '2'" in stray_outputs(_notebook(setup, printing_claim))[0]
    assert stray_outputs(_notebook(setup, (["remove-input"], "table", [_result("0  1")]))) == []


def test_the_plumbing_check_would_catch_a_record_in_view():
    notebook = _notebook((["hide-input"], "page = book.setup()", []),
                         ([], "x = 1\nrecord('x', x)", []),
                         (["remove-cell"], "claims.claim('x', True, 'x')", []),
                         ([], "# record(...) in a comment is fine\ny = 2", []))
    assert plumbing_in_view(notebook) == ["code cell 2: record('x', x)"]


def test_the_figure_check_would_catch_an_unlabelled_axis():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from course_lib import book

    fig, (left, right) = plt.subplots(1, 2)
    left.plot([1, 2], [3, 4])
    left.set(xlabel="workers", ylabel="speed-up", title="labelled")
    right.bar(["threads", "processes"], [1.0, 1.5])
    right.set(title="names on x, but y unlabelled")
    fig.canvas.draw()
    labels = book.figure_labels(fig)
    plt.close(fig)
    png = {"output_type": "display_data", "data": {"image/png": "iVBOR"},
           "metadata": {book.MIME: {**labels, "problems": book.figure_problems(labels)}}}
    found = figure_problems(_notebook(([], "plot()", [png])))
    assert found == ["code cell 1: panel 2 has no y-axis label"]
    unrecorded = {"output_type": "display_data", "data": {"image/png": "iVBOR"}, "metadata": {}}
    assert figure_problems(_notebook(([], "plot()", [unrecorded]))) == [
        "code cell 1: a figure with no label record"]


def test_the_paragraph_check_would_catch_a_skipped_claims_paragraph():
    statuses = {"pool_wins": {"status": "skipped", "skippable": True},
                "slope": {"status": "held", "skippable": False}}
    standing = ("With a free core the pool ran {glue:text}`pool_wins_ratio:.2f` times as "
                "fast; the slope was {glue:text}`slope_value:.2f`.\n")
    found = standing_paragraphs(standing, statuses)
    assert len(found) == 2 and "quoted outside its passage" in found[0]
    assert "never shows its passage" in found[1]
    honest = "```{glue:md} pool_wins\n:format: myst\n```\n\nThe slope was " \
             "{glue:text}`slope_value:.2f`.\n"
    assert standing_paragraphs(honest, statuses) == []


def test_the_alt_check_would_catch_a_file_name_for_alt_text():
    page = ('<img alt="../_images/0038bc.png" src="../_images/0038bc.png">'
            '<img src="../_images/1b07.png">'
            '<img alt="Plot: speed-up per round. Horizontal axis: round." src="a.png">')
    found = images_without_alt(page)
    assert len(found) == 2 and "0038bc.png" in found[0] and "1b07.png" in found[1]


def test_the_figure_extension_gives_an_image_its_recorded_alt_text():
    import sys
    from types import SimpleNamespace

    from docutils import nodes

    from course_lib import book

    sys.path.insert(0, str(ROOT / "book" / "_ext"))
    try:
        import measure_first_figures as ext
    finally:
        sys.path.pop(0)
    labels = {"title": "", "axes": [{"title": "Where the time went", "xlabel": "seconds",
                                     "ylabel": "", "xnames": [], "legend": [],
                                     "ynames": ["report", "report_v1"]}]}
    record = {book.MIME: {**labels, "alt": book.figure_alt(labels)}}
    render = ext._with_alt(lambda self, data: [nodes.image(uri="x.png")])
    node, = render(None, SimpleNamespace(output_metadata=record))
    assert node["alt"] == ("Plot: Where the time went. Horizontal axis: seconds. "
                           "Vertical axis: report, report_v1.")
    given = ext._with_alt(lambda self, data: [nodes.image(uri="x.png", alt="from the cell")])
    assert given(None, SimpleNamespace(output_metadata=record))[0]["alt"] == "from the cell"
    bare, = render(None, SimpleNamespace(output_metadata={}))
    assert "alt" not in bare
