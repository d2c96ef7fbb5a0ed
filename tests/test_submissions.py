"""Finding submissions: Unicode student names and symbolic links (issue 14, item 7)."""

import os
import time
from pathlib import Path

import nbformat
import pytest

from course_lib.grader._submissions import (copy_submission, find_submissions, read_names,
                                            record_names, safe_student_id)

SAFE = r"^[A-Za-z0-9][A-Za-z0-9_.@-]*$"


def _put(path: Path, text: str | None = None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text if text is not None else nbformat.writes(nbformat.v4.new_notebook()))
    return path


# --- student ids ------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["José García", "Jose\u0301 Garci\u0301a", "李雷", "a b", "-x",
                                  "O'Brien, Seán", "x" * 200 + " y", "..", "ana/../bo"])
def test_any_name_gets_a_safe_deterministic_id(name):
    student = safe_student_id(name)
    assert __import__("re").match(SAFE, student)
    assert len(student) <= 49 and "/" not in student
    assert safe_student_id(name) == student


def test_safe_names_are_kept_and_lookalikes_stay_apart():
    assert safe_student_id("ana.lopez@uni.es") == "ana.lopez@uni.es"
    assert safe_student_id("José García") == safe_student_id("Jose\u0301 Garci\u0301a")  # NFC = NFD
    assert safe_student_id("José García") != safe_student_id("Jose Garcia")
    assert safe_student_id("José García").startswith("Jose_Garcia-")


def test_an_empty_name_is_refused():
    with pytest.raises(ValueError, match="non-empty string"):
        safe_student_id("  ")


def test_unicode_folders_are_graded_and_their_names_kept(tmp_path):
    _put(tmp_path / "subs" / "José García" / "example" / "example.ipynb")
    _put(tmp_path / "subs" / "example-李雷" / "work" / "example.ipynb")
    _put(tmp_path / "subs" / "ana" / "example" / "example.ipynb")
    found = {s.student: s for s in find_submissions(tmp_path / "subs", "example", ["example"])}
    assert found["ana"].display_name == "ana" and found["ana"].name == ""
    jose = found[safe_student_id("José García")]
    assert jose.display_name == "José García" and jose.notebooks
    assert found[safe_student_id("李雷")].display_name == "李雷"

    grading = tmp_path / "grading"
    record_names(grading, list(found.values()))
    record_names(grading, [found["ana"]])            # a later run keeps earlier names
    assert read_names(grading) == {jose.student: "José García",
                                   safe_student_id("李雷"): "李雷"}
    assert read_names(tmp_path / "nowhere") == {}


def test_two_spellings_of_one_name_are_one_student(tmp_path):
    _put(tmp_path / "José García" / "example" / "example.ipynb")
    _put(tmp_path / "example-Jose\u0301 Garci\u0301a" / "example.ipynb")
    with pytest.raises(ValueError, match="two submissions"):
        find_submissions(tmp_path, "example", ["example"])


# --- symbolic links ---------------------------------------------------------------------------

def test_links_to_the_repository_itself_are_not_walked(tmp_path):
    repo = tmp_path / "example-bo"
    _put(repo / "work" / "example.ipynb")
    for name in ("a", "b", "c"):                      # 3^40 paths if links were followed
        os.symlink(".", repo / name)
        os.symlink("..", repo / "work" / name)
    start = time.monotonic()
    [submission] = find_submissions(tmp_path, "example", ["example"])
    assert time.monotonic() - start < 5
    assert submission.notebooks == {"example": repo / "work" / "example.ipynb"}
    assert any("6 symbolic link(s) not followed" in note for note in submission.notes)


def test_a_linked_notebook_is_never_taken_or_copied(tmp_path):
    secret = _put(tmp_path / "solutions" / "example" / "example.ipynb", "the instructor's solution")
    repo = tmp_path / "subs" / "example-bo"
    repo.mkdir(parents=True)
    os.symlink(secret, repo / "example.ipynb")
    nb_layout = tmp_path / "subs" / "cy" / "example"
    nb_layout.mkdir(parents=True)
    os.symlink(secret, nb_layout / "example.ipynb")
    os.symlink(tmp_path / "solutions", tmp_path / "subs" / "dee")  # a whole linked "student"
    found = {s.student: s for s in find_submissions(tmp_path / "subs", "example", ["example"])}
    assert sorted(found) == ["bo", "cy"]
    assert found["bo"].notebooks == {} and found["cy"].notebooks == {}
    assert any("symbolic link" in note for note in found["cy"].notes)

    # even a Submission built by hand with a link is not copied through it
    bad = found["cy"].__class__("cy", "example", "nbgrader", {"example": nb_layout / "example.ipynb"})
    copy_submission(bad, tmp_path / "submitted" / "cy" / "example", {})
    assert list((tmp_path / "submitted" / "cy" / "example").iterdir()) == []
