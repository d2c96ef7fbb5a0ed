"""course_lib.claims: sizes, recorded figures, and a false claim that fails the build."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from course_lib import claims


def _status(glued, name):
    import json

    return json.loads(dict((n, v) for n, v, _ in glued)[name + claims.STATUS_SUFFIX])


@pytest.fixture
def glued(monkeypatch):
    """Capture what record() hands to myst_nb.glue."""
    calls = []
    import myst_nb

    monkeypatch.setattr(myst_nb, "glue", lambda name, value, display=True:
                        calls.append((name, value, display)))
    return calls


@pytest.mark.parametrize("value, expected", [(None, "full"), ("small", "small"),
                                             ("full", "full"), (" Small ", "small")])
def test_size_reads_the_environment(monkeypatch, value, expected):
    if value is None:
        monkeypatch.delenv("MEASURE_FIRST_SIZE", raising=False)
    else:
        monkeypatch.setenv("MEASURE_FIRST_SIZE", value)
    assert claims.size() == expected


def test_an_unknown_size_is_rejected(monkeypatch):
    monkeypatch.setenv("MEASURE_FIRST_SIZE", "medium")
    with pytest.raises(ValueError, match="must be 'small' or 'full'"):
        claims.size()


def test_sized_picks_by_size(monkeypatch):
    monkeypatch.setenv("MEASURE_FIRST_SIZE", "small")
    assert claims.sized(small=1, full=2) == 1
    monkeypatch.setenv("MEASURE_FIRST_SIZE", "full")
    assert claims.sized(small=1, full=2) == 2


def test_record_unwraps_numpy_scalars_and_does_not_display(glued):
    claims.record("ratio", np.float64(2.5))
    claims.record("count", np.int64(7))
    assert glued == [("ratio", 2.5, False), ("count", 7, False)]
    assert type(glued[0][1]) is float and type(glued[1][1]) is int


def test_record_rejects_a_name_glue_could_not_be_read_back_by(glued):
    with pytest.raises(ValueError, match="identifier"):
        claims.record("a ratio", 1.0)


def test_a_true_claim_records_its_figures_with_the_claims_prefix(glued, monkeypatch, capsys):
    monkeypatch.setenv("MEASURE_FIRST_STRICT", "1")
    assert claims.claim("faster", 3.0 > 1, "the new code is faster", ratio=np.float64(3.0),
                        slow_s=0.3) is None           # a claim cell shows nothing
    assert glued[:2] == [("faster_ratio", 3.0, False), ("faster_slow_s", 0.3, False)]
    assert _status(glued, "faster") == {"status": "held", "skippable": False}
    assert "CLAIM" not in capsys.readouterr().out


def test_a_false_claim_shows_a_box_and_returns_false_when_not_strict(glued, monkeypatch,
                                                                      capsys):
    monkeypatch.setenv("MEASURE_FIRST_STRICT", "0")
    assert claims.claim("faster", False, "the new code is faster", ratio=0.93) is None
    assert _status(glued, "faster")["status"] == "failed"
    out = capsys.readouterr().out
    assert "CLAIM NOT SHOWN" in out and "the new code is faster" in out
    assert "ratio = 0.93" in out


def test_a_false_claim_raises_in_a_strict_build(glued, monkeypatch):
    monkeypatch.setenv("MEASURE_FIRST_STRICT", "1")
    with pytest.raises(claims.ClaimFailed, match=r"'faster'.*the new code is faster.*0\.93"):
        claims.claim("faster", np.bool_(False), "the new code is faster", ratio=0.93)
    # the figures were still recorded before the failure
    assert ("faster_ratio", 0.93, False) in glued


def test_a_skippable_claim_needs_both_paragraphs(glued):
    with pytest.raises(ValueError, match="needs both of its paragraphs"):
        claims.claim("pool", True, "the pool wins", applies=True, shown="It won.")
    with pytest.raises(ValueError, match="go with applies"):
        claims.claim("pool", True, "the pool wins", shown="It won.", otherwise="No core.")
    with pytest.raises(ValueError, match="may not start with"):
        claims.claim("pool", True, "the pool wins", _claim=1)


def test_a_skipped_claim_is_not_checked_and_hands_over_its_honest_paragraph(
        glued, monkeypatch, capsys):
    monkeypatch.setenv("MEASURE_FIRST_STRICT", "1")
    claims.claim("pool", False, "the pool wins", applies=False,
                 shown="The pool won, {ratio:.2f}x.",
                 otherwise="No core was free: the pool ran at {ratio:.2f}x.", ratio=0.98)
    assert _status(glued, "pool") == {"status": "skipped", "skippable": True}
    passage = dict((n, v) for n, v, _ in glued)["pool"]
    assert passage.data == "No core was free: the pool ran at 0.98x."
    assert "CLAIM" not in capsys.readouterr().out


def test_a_skippable_claim_that_applies_is_checked_and_shows_its_paragraph(glued, monkeypatch):
    monkeypatch.setenv("MEASURE_FIRST_STRICT", "1")
    claims.claim("pool", 1.4 > 1.1, "the pool wins", applies=True,
                 shown="The pool won, {ratio:.2f}x.", otherwise="No core.", ratio=1.4)
    assert dict((n, v) for n, v, _ in glued)["pool"].data == "The pool won, 1.40x."
    assert _status(glued, "pool") == {"status": "held", "skippable": True}
    with pytest.raises(claims.ClaimFailed, match="'pool2'"):
        claims.claim("pool2", 0.9 > 1.1, "the pool wins", applies=True,
                     shown="The pool won, {ratio:.2f}x.", otherwise="No core.", ratio=0.9)


def test_pinning_threads_limits_blas(monkeypatch):
    from threadpoolctl import threadpool_info, threadpool_limits

    with threadpool_limits(limits=None):
        with claims.single_threaded():
            assert all(p["num_threads"] == 1 for p in threadpool_info())


# --- the build: a false claim fails it, naming the page and the claim ----------------

PAGE = """\
---
jupytext:
  text_representation:
    extension: .md
    format_name: myst
kernelspec:
  name: python3
  display_name: Python 3
---

# A page with one claim

```{{code-cell}} ipython3
from course_lib import claims
claims.claim("two_below_one", {holds}, "two is less than one", two=2)
```

Two is {{glue:text}}`two_below_one_two`.
"""

CONFIG = """\
title: claim check
execute:
  execute_notebooks: force
  raise_on_error: true
  show_tb: true
only_build_toc_files: true
"""


def _build(tmp_path: Path, holds: bool, strict: bool) -> subprocess.CompletedProcess:
    book = tmp_path / f"book-{holds}-{strict}"
    book.mkdir()
    (book / "_config.yml").write_text(CONFIG)
    (book / "_toc.yml").write_text("format: jb-book\nroot: claimpage\n")
    (book / "claimpage.md").write_text(PAGE.format(holds=holds))
    env = {**os.environ, "MEASURE_FIRST_STRICT": "1" if strict else "0"}
    env.pop("MPLBACKEND", None)
    executable = Path(sys.executable).with_name("jupyter-book")
    return subprocess.run([str(executable), "build", str(book), "-W", "-n", "--keep-going"],
                          capture_output=True, text=True, env=env, cwd=book)


@pytest.mark.slow
def test_a_false_claim_fails_a_strict_build_naming_page_and_claim(tmp_path):
    result = _build(tmp_path, holds=False, strict=True)
    output = result.stdout + result.stderr
    assert result.returncode != 0, output[-3000:]
    assert "claimpage" in output, output[-3000:]
    assert "two_below_one" in output and "two is less than one" in output, output[-3000:]


@pytest.mark.slow
def test_the_same_page_builds_when_the_claim_holds(tmp_path):
    result = _build(tmp_path, holds=True, strict=True)
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
    html = (tmp_path / "book-True-True" / "_build" / "html" / "claimpage.html").read_text()
    assert re.search(r"Two is <span class=\"pasted-text\">2<", html), "the figure was not glued"
    assert "did not show it" not in html


@pytest.mark.slow
def test_a_false_claim_outside_strict_mode_builds_and_shows_the_reader_a_box(tmp_path):
    result = _build(tmp_path, holds=False, strict=False)
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
    html = (tmp_path / "book-False-False" / "_build" / "html" / "claimpage.html").read_text()
    assert "did not show it" in html and "two is less than one" in html
