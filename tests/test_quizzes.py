"""The graded notebooks' quizzes: no tell in the options, one way of reading answers, one key.

Every question is written in a notebook's markdown as ``**Question N.**`` followed, for a
multiple-choice question, by its options as ``- (a) ...`` lines; the solution's answer
cell sets ``qN`` (``sN`` in week 2) and a hidden test cell checks it. The tests parse all
of that from ``solutions/`` and hold the quizzes to the rules of issue 18: the right
option is never the longest by more than 30% (a student who has not learnt the point
cannot find it by its length), the right letter varies, every answer is read by
``course_lib.answers``, and the hidden tests expect the letters the solution gives.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

import nbformat
import pytest

from course_lib.answers import choice, letters

ROOT = Path(__file__).resolve().parents[1]

# Questions found per notebook, and how many of them are multiple choice with one answer:
# a format change that hides questions from the parser fails here, not silently.
EXPECTED = {
    "week1": (6, 5),  # question 3 asks for a number
    "week2": (4, 3),  # question 1 is select-all
    "week3": (3, 2),  # question 2 asks for a number
    "week4": (3, 3),
    "week5": (0, 0),
    "week6": (2, 2),
    "week7": (3, 3),
    "week8": (2, 2),
}
LONGEST_RATIO = 1.3  # the right option may not exceed the longest wrong one by more than this


@dataclass(frozen=True)
class Question:
    notebook: str
    number: int
    stem: str
    options: dict[str, str]
    answer: object  # a letter, letters ("a, c") or an expression for a number

    @property
    def name(self) -> str:
        return f"{self.notebook} question {self.number}"

    @property
    def single_choice(self) -> bool:
        return bool(self.options) and isinstance(self.answer, str) and len(letters(self.answer)) == 1


def _notebook(name: str):
    return nbformat.read(ROOT / "solutions" / name / f"{name}.ipynb", as_version=4)


def _meta(cell) -> dict:
    return cell.metadata.get("nbgrader", {})


_QUESTION = re.compile(r"^\*\*Question (\d+)\.\*\*", re.MULTILINE)
_OPTION = re.compile(r"^- \(([a-z])\) ", re.MULTILINE)


def _parse_markdown(source: str) -> dict[int, tuple[str, dict[str, str]]]:
    """Question number -> (stem, {letter: option text}) from one markdown cell."""
    found = {}
    starts = list(_QUESTION.finditer(source))
    for k, match in enumerate(starts):
        end = starts[k + 1].start() if k + 1 < len(starts) else len(source)
        block = source[match.end():end]
        # the options end at the first blank line after them (a paragraph may follow)
        marks = list(_OPTION.finditer(block))
        stem = block[:marks[0].start()] if marks else block
        options = {}
        for j, mark in enumerate(marks):
            text = block[mark.end():marks[j + 1].start() if j + 1 < len(marks) else len(block)]
            text = text.split("\n\n")[0]
            options[mark.group(1)] = " ".join(line.strip() for line in text.splitlines())
        found[int(match.group(1))] = (" ".join(stem.split()), options)
    return found


def _answers(nb) -> dict[int, object]:
    """Question number -> the solution's answer: a string, or the source of an expression."""
    found = {}
    for cell in nb.cells:
        if cell.cell_type != "code" or not _meta(cell).get("solution"):
            continue
        for node in ast.parse(cell.source).body:
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                match = re.fullmatch(r"[qs](\d+)", node.targets[0].id)
                if match:
                    value = node.value
                    found[int(match.group(1))] = (value.value if isinstance(value, ast.Constant)
                                                  and isinstance(value.value, str) else ast.unparse(value))
    return found


def questions(name: str) -> list[Question]:
    nb = _notebook(name)
    parsed = {}
    for cell in nb.cells:
        if cell.cell_type == "markdown" and not _meta(cell).get("solution"):
            for number, found in _parse_markdown(cell.source).items():
                assert number not in parsed, f"{name}: question {number} is written twice"
                parsed[number] = found
    key = _answers(nb)
    assert sorted(parsed) == sorted(key), f"{name}: questions {sorted(parsed)}, answers {sorted(key)}"
    return [Question(name, n, *parsed[n], key[n]) for n in sorted(parsed)]


ALL = {name: questions(name) for name in EXPECTED}
SINGLE = [q for qs in ALL.values() for q in qs if q.single_choice]


@pytest.mark.parametrize("name", EXPECTED)
def test_every_quiz_is_parsed_in_full(name):
    found = ALL[name]
    assert (len(found), sum(q.single_choice for q in found)) == EXPECTED[name], [q.name for q in found]
    assert [q.number for q in found] == list(range(1, len(found) + 1))
    for q in found:
        if q.options:
            assert list(q.options) == list("abcdef"[:len(q.options)]) and len(q.options) >= 3, q.name
            assert all(text.strip() for text in q.options.values()), q.name


@pytest.mark.parametrize("q", SINGLE, ids=lambda q: q.name)
def test_the_right_option_is_not_the_longest_by_more_than_30_percent(q):
    right = choice(q.answer, options="".join(q.options))
    longest_wrong = max(len(text) for letter, text in q.options.items() if letter != right)
    assert len(q.options[right]) <= LONGEST_RATIO * longest_wrong, (
        f"{q.name}: the right option ({right}) has {len(q.options[right])} characters, the longest "
        f"wrong one {longest_wrong}: {q.options[right]!r}")


def test_the_right_option_is_seldom_the_longest_and_its_letter_varies():
    longest = [q.name for q in SINGLE if len(q.options[choice(q.answer)]) == max(map(len, q.options.values()))]
    assert len(longest) <= len(SINGLE) // 3, f"the right option is the longest in {longest}"
    used = [choice(q.answer) for q in SINGLE]
    assert {letter: used.count(letter) >= 3 for letter in "abcd"} == dict.fromkeys("abcd", True), used
    for name, found in ALL.items():
        mine = [choice(q.answer) for q in found if q.single_choice]
        assert len(mine) < 3 or len(set(mine)) > 1, f"{name}: every answer is {mine[0]}"


def test_no_question_is_asked_twice():
    stems = [(q.name, re.sub(r"\W+", " ", q.stem.lower()).strip()) for qs in ALL.values() for q in qs]
    for i, (name, stem) in enumerate(stems):
        for other, other_stem in stems[i + 1:]:
            assert stem != other_stem, f"{name} and {other} ask the same question"


@pytest.mark.parametrize("name", [n for n, (count, _) in EXPECTED.items() if count])
def test_answers_are_read_by_course_lib_answers_and_the_hidden_tests_expect_the_key(name):
    nb = _notebook(name)
    setup = next(c for c in nb.cells if _meta(c).get("grade_id") == "setup")
    assert "def choice" not in setup.source and "def letters" not in setup.source, name
    tests = {_meta(c)["grade_id"]: c.source for c in nb.cells
             if _meta(c).get("grade") and re.fullmatch(r"test_[qs]\d+", _meta(c).get("grade_id", ""))}
    assert len(tests) == EXPECTED[name][0], sorted(tests)
    uses_answers = "from course_lib.answers import" in setup.source
    for q in ALL[name]:
        source = tests[f"test_{'s' if name == 'week2' else 'q'}{q.number}"]
        assert uses_answers or "from course_lib.answers import" in source, f"{q.name}: not read by course_lib.answers"
        assert ".strip(" not in source, f"{q.name}: parses the answer by hand"
        if q.single_choice:
            assert re.search(rf"assert_same\(choice\([qs]{q.number}\), \"{choice(q.answer)}\"\)", source), q.name
        elif q.options:
            expected = re.search(r"assert_same\(letters\([qs]\d+\), (\{.*?\})\)", source).group(1)
            assert ast.literal_eval(expected) == letters(q.answer), q.name
        else:
            assert "number(" in source, q.name


@pytest.mark.parametrize("written", ["c", "(c)", "c)", "c.", " C ", "(c) O(n^2)"])
def test_every_week_reads_the_same_answer_the_same_way(written):
    # the same helper everywhere, so a form accepted in one week is accepted in all
    assert choice(written) == "c"
