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


# --- names that are not UTF-8, trees past the limits (issue 26) -------------------------------

def test_a_folder_named_in_latin1_bytes_is_graded_under_a_safe_id(tmp_path):
    folder = os.path.join(os.fsencode(tmp_path), b"example-Jos\xe9 Garc\xeda")
    _put(Path(os.fsdecode(folder)) / "example.ipynb")
    os.symlink(b"nowhere", os.path.join(folder, b"link-\xff"))
    found, = find_submissions(tmp_path, "example", ["example"])
    assert __import__("re").match(SAFE, found.student) and found.name == "José García"
    assert found.student != safe_student_id("José García")  # other bytes, another folder
    assert found.notes == ("1 symbolic link(s) not followed: link-\\xff",)  # writable as UTF-8
    found.notes[0].encode("utf-8")
    record_names(tmp_path, [found])
    assert read_names(tmp_path)[found.student] == "José García"


@pytest.mark.parametrize("shape, says", [("deep", "nested more than 64 deep"),
                                         ("wide", "more than 50,000 files and folders")])
def test_a_repository_past_the_search_limits_is_refused_alone(tmp_path, shape, says):
    _put(tmp_path / "example-big" / "example.ipynb")
    _put(tmp_path / "example-fine" / "work" / "example.ipynb")
    if shape == "deep":
        path = str(tmp_path / "example-big")
        for _ in range(1_200):  # past Python's recursion limit: the walk must not recurse
            path = os.path.join(path, "d")
            os.mkdir(path)
    else:
        for i in range(50_001):
            sub = tmp_path / "example-big" / f"f{i // 1000}"
            if i % 1000 == 0:
                sub.mkdir()
            (sub / str(i)).touch()
    found = {s.student: s for s in find_submissions(tmp_path, "example", ["example"])}
    assert says in found["big"].refused and found["big"].notebooks == {}
    assert found["fine"].refused == "" and "example" in found["fine"].notebooks
    if shape == "deep":
        for level in range(1_200, 0, -1):
            os.rmdir(os.path.join(str(tmp_path / "example-big"), *["d"] * level))


def test_a_slow_search_is_refused(tmp_path, monkeypatch):
    from course_lib.grader import _submissions

    _put(tmp_path / "example-slow" / "a" / "b" / "example.ipynb")
    monkeypatch.setitem(_submissions.WALK_LIMITS, "seconds", -1.0)
    found, = find_submissions(tmp_path, "example", ["example"])
    assert "took more than" in found.refused
