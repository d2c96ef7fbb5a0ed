"""Reading an LMS grade sheet as the LMS itself reads it, for the export tests."""

from __future__ import annotations

import re

__all__ = ["canvas_import"]


def canvas_import(rows: list[list[str]]) -> dict:
    """Read a gradebook CSV as Canvas's importer does (canvas-lms, app/models/gradebook_importer.rb).

    Canvas's guide "How do I import grades in the Gradebook?" asks for the columns Student
    Name, Student ID, SIS User ID, SIS Login ID and Section before the assignments; its
    importer checks the header row (a first column with "Student", a second with "ID", the
    SIS columns where they are, "Section" last of the student columns), skips the columns
    it computes itself, reads a "Points Possible" row, parses an assignment header as
    "Title (id)" or a title, and finds each student by ID, SIS User ID, SIS Login ID or name.
    """
    header, *body = rows
    assert len(header) > 3 and "Student" in header[0] and "ID" in header[1], header
    student_columns = 3
    if re.search(r"SIS\s+Login\s+ID", header[2]):
        student_columns += 1
    elif re.search(r"SIS\s+User\s+ID", header[2]) and re.search(r"SIS\s+Login\s+ID", header[3]):
        student_columns += 2
    assert "Section" in header[student_columns - 1], "Canvas: 'Invalid header row'"
    computed = re.compile("Current Score|Current Points|Current Grade|Final Score|Final Points|Final Grade|"
                          "Override Score|Override Grade|Override Status")
    assignments = [(i, h) for i, h in enumerate(header) if i >= student_columns and not computed.search(h)]
    assert assignments, "no assignment column"
    titles = {i: (re.fullmatch(r"(.*)\s\((\d+)\)", h).group(1) if re.fullmatch(r"(.*)\s\((\d+)\)", h) else h)
              for i, h in assignments}
    points, students = {}, []
    for row in body:
        assert len(row) == len(header), row
        if "Points Possible" in row[0]:
            points = {titles[i]: float(row[i]) for i, _ in assignments}
            continue
        identified = row[1] or (row[2] if student_columns == 5 else "") or row[student_columns - 2] or row[0]
        assert identified, f"Canvas cannot find this student: {row}"
        grades = {}
        for i, _ in assignments:
            value = row[i].strip()
            assert value == "" or value.upper() == "EX" or re.fullmatch(r"-?\d+(\.\d+)?%?", value), value
            grades[titles[i]] = value
        students.append({"name": row[0], "id": row[1], "sis_user_id": row[2], "sis_login_id": row[3],
                         "section": row[student_columns - 1], "grades": grades})
    assert points, "no Points Possible row: new assignments would be created without points"
    return {"assignments": points, "students": students}
