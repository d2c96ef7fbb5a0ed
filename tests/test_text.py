"""Text from students and file systems, made writable; the grader's paths kept from students (issue 26)."""

from __future__ import annotations

import csv
import os
import sys
from pathlib import Path

import pytest

from course_lib.grader._text import display_name, remember_host_paths, scrub_host, writable

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("text, expected", [
    ("plain", "plain"), ("é ✓ 李", "é ✓ 李"),
    ("bad \ud800 byte", "bad \\ud800 byte"),          # a lone surrogate: written out
    (os.fsdecode(b"caf\xe9"), "caf\\xe9"),            # a byte that was not UTF-8: as that byte
    (3, "3"),
])
def test_every_string_becomes_writable_as_utf8(text, expected):
    assert writable(text) == expected
    writable(text).encode("utf-8")


def test_a_legacy_folder_name_reads_as_a_person_would():
    assert display_name(os.fsdecode(b"Jos\xe9 Garc\xeda")) == "José García"
    assert display_name("José García") == "José García"
    assert display_name("x\ud800").encode("utf-8")


def test_the_graders_paths_become_labels():
    text = f"{sys.executable} {ROOT / 'course_lib' / '__init__.py'} {os.path.realpath(sys.executable)}"
    scrubbed = scrub_host(text)
    assert str(ROOT) not in scrubbed and sys.prefix not in scrubbed and sys.base_prefix not in scrubbed
    assert "<course>/course_lib/__init__.py" in scrubbed
    remember_host_paths(grading="/srv/secret-grading-folder")
    assert scrub_host("at /srv/secret-grading-folder/x") == "at <grading>/x"


def test_flags_and_grades_are_written_whole_or_not_at_all(tmp_path, monkeypatch):
    from course_lib.grader import nbgrading

    from nbgrader.api import Gradebook

    course = nbgrading.Course(ROOT, tmp_path, f"sqlite:///{tmp_path / 'gradebook.db'}", 60)
    with nbgrading._environment(**nbgrading._nbgrader_env()), Gradebook(course.db_url):
        pass  # an empty gradebook, as a first run makes
    bad = nbgrading.Flag("note", ("cell\udce9",), "a message with \ud800 in it")
    assert bad.detail == "a message with \\ud800 in it" and bad.cells == ("cell\\xe9",)
    first = [nbgrading.SubmissionResult("ana", "example", 1.0, 10.0, flags=(bad,))]
    nbgrading._export(course, first)
    whole = (tmp_path / "flags.csv").read_bytes()
    rows = list(csv.DictReader((tmp_path / "flags.csv").open(encoding="utf-8")))
    assert [(r["student"], r["detail"]) for r in rows] == [("ana", "a message with \\ud800 in it")]

    real_writer = csv.writer

    class Broken:  # a writer whose rows never arrive: the header is written, then the disk goes
        def __init__(self, *args, **kwargs):
            self._writer = real_writer(*args, **kwargs)

        def writerow(self, row):
            return self._writer.writerow(row)

        def writerows(self, rows):
            raise RuntimeError("the disk went away")

    monkeypatch.setattr(csv, "writer", Broken)
    with pytest.raises(RuntimeError):
        nbgrading._export(course, [nbgrading.SubmissionResult("bo", "example", 1.0, 10.0,
                                                              flags=(nbgrading.Flag("note"),))])
    assert (tmp_path / "flags.csv").read_bytes() == whole  # the last complete file, not a header
    assert sorted(p.name for p in tmp_path.iterdir()) == ["flags.csv", "gradebook.db", "grades.csv"]
