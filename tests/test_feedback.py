"""The feedback page: what a student reads after grading, checked as text and in a browser."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from course_lib.grader import feedback

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ("correct_slow", "correct_fast", "wrong")

VERDICT = ("\nChecked again by the grader outside your kernel: 0 / 4. GradingError: Not fast enough: "
           "measured outside your kernel: 1.14x, 95% interval 1.02x to 1.3x over 9 rounds; reference "
           "89.7 ms per call, yours 78 ms; thread pools: blas 1 thread; this test needs 10x (a measured "
           "9x passes)\n")


def _cell(source, grade_id, points=None, outputs=(), solution=False):
    meta = {"grade_id": grade_id, "solution": solution, "grade": points is not None, "locked": not solution}
    if points is not None:
        meta["points"] = points
    cell = nbformat.v4.new_code_cell(source, metadata={"nbgrader": meta})
    cell.outputs = list(outputs)
    return cell


def _notebook():
    error = nbformat.v4.new_output("error", ename="GradingError", evalue="Your result differs: got 2, expected 3",
                                   traceback=['File "/srv/course/course_lib/grading.py", line 12, in assert_same',
                                              "    raise GradingError(secret_hidden_line)"])
    return nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell("## Part 1: count (10 points)"),
        _cell("def f(x):\n    return x", "answer", solution=True),
        _cell("# Visible tests (2 points).\nassert_same(f(2), 3)", "test_f_visible", 2, [error]),
        _cell("# Hidden speed test (4 points): at least 10x.\n### BEGIN HIDDEN TESTS\nsecret_hidden_line()\n"
              "### END HIDDEN TESTS", "test_f_speed", 4,
              [nbformat.v4.new_output("stream", name="stdout", text="speed-up 12.0x in the kernel\n"),
               nbformat.v4.new_output("stream", name="stdout", text=VERDICT)]),
        _cell("# Hidden speed test (4 points): from 3x to 25x.\n### BEGIN HIDDEN TESTS\nspeedup_points(f, g)\n"
              "### END HIDDEN TESTS", "test_g_speed", 4,
              [nbformat.v4.new_output("execute_result", data={"text/plain": "1.5"}, execution_count=4)]),
    ])


RULES = [{"grade_id": "test_f_visible", "partial": False, "says": ""},
         {"grade_id": "test_f_speed", "partial": False, "says": "at least 10x."},
         {"grade_id": "test_g_speed", "partial": True, "says": "from 3x to 25x."}]


@pytest.fixture(scope="module")
def page() -> str:
    scores = {"test_f_visible": 0.0, "test_f_speed": 0.0, "test_g_speed": 1.5}
    return feedback.render_feedback(_notebook(), scores, RULES, title="week0: w.ipynb", machine="test box")


def test_every_graded_cell_is_named_with_its_part_points_and_scoring(page):
    assert "<td><code>test_f_visible</code></td><td>Part 1</td><td>0 / 2</td><td>all or nothing</td>" in page
    assert "<td><code>test_g_speed</code></td><td>Part 1</td><td>1.5 / 4</td><td>partial credit</td>" in page
    assert "Score: 1.5 / 10 points." in page


def test_the_speed_that_counted_is_the_one_outside_the_kernel(page):
    assert "Not fast enough. The speed-up that counted: 1.14x</b> (95% interval 1.02x to 1.3x)" in page
    assert "This test needs 10x (a measured 9x passes)" in page
    assert "How the points follow the speed-up: at least 10x." in page
    assert "Measured on the grading machine (test box)" in page
    assert "printed inside your kernel (not counted)" in page
    assert feedback.SPEED_SENTENCE.split(":")[0] in page


def test_a_partial_credit_cell_says_what_it_returned(page):
    assert "This cell returns its points: 1.5 of 4 (partial credit)." in page
    assert "Out[" not in page


def test_no_traceback_and_no_hidden_test_source(page):
    assert "GradingError: Your result differs: got 2, expected 3" in page
    for leaked in ("secret_hidden_line", "course_lib/", "Traceback", "speedup_points(f, g)", "BEGIN HIDDEN"):
        assert leaked not in page


def test_text_wraps_and_the_table_has_borders(page):
    assert "white-space: pre-wrap" in page and "overflow-wrap: anywhere" in page
    assert "th, td { border: 1px solid" in page


def test_a_written_answer_marked_by_hand_has_its_row_its_points_and_the_students_text():
    nb = _notebook()
    nb.cells += [nbformat.v4.new_markdown_cell("## Part 2: in your own words"),
                 nbformat.v4.new_markdown_cell("The loop <b>scans</b> every row.", metadata={"nbgrader": {
                     "grade": True, "solution": True, "points": 2, "grade_id": "written_explanation"}})]
    scores = {"test_f_visible": 0.0, "test_f_speed": 0.0, "test_g_speed": 1.5}
    page = feedback.render_feedback(nb, scores, RULES, title="t", machine="m")
    assert ("<td><code>written_explanation</code></td><td>Part 2</td><td>0 / 2</td><td>marked by hand</td>"
            f"<td>{feedback.MARKED_BY_HAND}</td>") in page
    assert "Score: 1.5 / 12 points." in page  # the written answer's points are part of the total
    assert "The loop &lt;b&gt;scans&lt;/b&gt; every row." in page
    marked = feedback.render_feedback(nb, {**scores, "written_explanation": 2.0}, RULES, title="t", machine="m")
    assert "Score: 3.5 / 12 points." in marked and "<td>2 / 2</td><td>marked by hand</td>" in marked


def test_a_scaling_cell_speaks_of_its_exponent_and_a_memory_cell_of_its_peak():
    verdict = ("\nChecked again by the grader outside your kernel: 1 / 3. measured outside your kernel: exponent "
               "1.40 (between linear and quadratic) from CPU time per call 1.71 ms at n=1,000, 3.9 ms at n=2,000\n")
    cells = [_cell("# Hidden scaling test (3 points): full up to 1.1, none from 1.6.", "test_h_scaling", 3,
                   [nbformat.v4.new_output("stream", name="stdout", text=verdict)]),
             _cell("# Hidden memory test (2 points): full up to 20 MB.", "test_h_memory", 2,
                   [nbformat.v4.new_output("stream", name="stdout", text=verdict.replace("1 / 3", "2 / 2"))])]
    rules = [{"grade_id": "test_h_scaling", "partial": True, "says": "full up to 1.1, none from 1.6."},
             {"grade_id": "test_h_memory", "partial": True, "says": "full up to 20 MB."}]
    page = feedback.render_feedback(nbformat.v4.new_notebook(cells=cells), {"test_h_scaling": 1.0}, rules,
                                    title="t", machine="m")
    assert "How the points follow the growth exponent: full up to 1.1" in page
    assert "How the points follow the peak memory: full up to 20 MB." in page
    assert "follow the speed-up" not in page and "CPU seconds" not in page
    assert "from CPU time per call 1.71 ms at n=1,000" in page


def test_a_cell_without_a_verdict_is_parsed_as_none():
    assert feedback.parse_verdict("speed-up 3x") is None
    kept = feedback.parse_verdict("Checked again by the grader outside your kernel: 0 / 4 (it could not be "
                                  "checked, so the cell scores 0). the worker died")
    assert kept.used is False and kept.speedup is None and kept.detail == "the worker died"


# --- in a browser, after real grading ----------------------------------------------------------

@pytest.fixture(scope="module")
def graded(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("feedback")
    for name in SAMPLES:
        shutil.copytree(ROOT / "examples" / "submissions" / name, tmp / "subs" / name)
    outcome = subprocess.run([sys.executable, "-m", "course_lib", "grade", "example", "--submissions",
                              str(tmp / "subs"), "--grading-dir", str(tmp / "grading"), "--timeout", "20",
                              "--memory-limit", "1GB", "--no-progress"], cwd=ROOT, capture_output=True,
                             text=True, timeout=900)
    assert outcome.returncode in (0, 1), outcome.stderr
    assert "without encryption" not in outcome.stdout + outcome.stderr
    return tmp / "grading" / "feedback"


def test_nbgraders_feedback_step_writes_a_placeholder_not_a_rendered_page():
    # Its page is replaced by ours at once: rendering it cost more than the rest of the stage.
    exporter = feedback._placeholder_class()()
    output, resources = exporter.from_notebook_node(_notebook())
    assert output == feedback._PLACEHOLDER_PAGE and resources["output_extension"] == ".html"


@pytest.mark.slow
def test_every_page_after_grading_is_ours(graded):
    pages = sorted(graded.glob("*/example/*"))
    assert [p.name for p in pages] == ["example.html"] * len(SAMPLES)
    for page in pages:
        text = page.read_text(encoding="utf-8")
        assert text != feedback._PLACEHOLDER_PAGE and "feedback for " in text, page


@pytest.mark.slow
def test_what_a_student_sees_in_a_browser(graded):
    from test_book_browser import CHROMIUM, chromium

    if CHROMIUM is None:
        pytest.skip("chromium is not installed (apt-get install chromium)")
    pytest.importorskip("websocket", reason="websocket-client is needed to drive Chromium")
    seen = {}
    with chromium() as tools:
        tools.call("Page.enable")
        tools.call("Emulation.setDeviceMetricsOverride", width=900, height=900, deviceScaleFactor=1, mobile=False)
        for name in SAMPLES:
            tools.events.clear()
            tools.call("Page.navigate", url=(graded / name / "example" / "example.html").as_uri())
            tools.wait_for("Page.loadEventFired", timeout=60)
            seen[name] = tools.evaluate("""(() => {
                const verdicts = [...document.querySelectorAll('.verdict')];
                const td = document.querySelector('td');
                return {
                  text: document.body.innerText,
                  overflow: document.documentElement.scrollWidth - window.innerWidth,
                  verdictRight: Math.max(0, ...verdicts.map(v => v.getBoundingClientRect().right)),
                  width: window.innerWidth,
                  border: td ? getComputedStyle(td).borderTopWidth : '',
                  rows: document.querySelectorAll('tbody tr').length,
                };
            })()""")
    for name, state in seen.items():
        assert state["overflow"] <= 0, f"{name}: the page is wider than the window"
        assert state["verdictRight"] <= state["width"], name
        assert state["border"] not in ("", "0px"), name
        assert state["rows"] == 5, name
        for leaked in ("Traceback", "course_lib/", "BEGIN HIDDEN", "_list_count"):
            assert leaked not in state["text"], f"{name} shows {leaked!r}"
    slow, fast, wrong = seen["correct_slow"]["text"], seen["correct_fast"]["text"], seen["wrong"]["text"]
    assert "Not fast enough. The speed-up that counted:" in slow and "This test needs 10x" in slow
    assert "test_count_speed" in fast and "4 / 4" in fast and "The speed-up that counted:" in fast
    assert "GradingError: Your result differs from the reference" in wrong
    assert "Score: 0 / 10 points." in wrong
