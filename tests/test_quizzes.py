"""The graded notebooks' quizzes: no tell in the options, one way of reading answers, one key.

Every question is written in a notebook's markdown as ``**Question N.**`` followed, for a
multiple-choice question, by its options as ``- (a) ...`` lines; the solution's answer
cell sets ``qN`` (``sN`` in week 2) and a hidden test cell checks it. The tests parse all
of that from ``solutions/`` and hold the quizzes to the rules of issues 18 and 27:

- the right option is never the longest by more than 30% (a student who has not learnt the
  point cannot find it by its length), and the right letter varies;
- no absolute word (never, only, always, all, none, must, cannot...) marks the wrong options
  of a question whose right options have none: "the hedged one is right" is a tell;
- the notebook's own text does not give the right option away: no run of four or more of
  its words stands in the notebook's markdown outside the question, and no sentence there
  holds two thirds of its content words while holding fewer of every wrong option's;
- a numeric answer is computed from the student's own work (the solution sets it with an
  expression, never a number typed in);
- every answer is read by ``course_lib.answers``, and the hidden tests expect the letters
  the solution gives.

The checks of issue 27 run per notebook, so a notebook that breaks a rule fails on its own
line with every question that breaks it.
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
    "week1": (4, 3),  # question 2 asks for a number
    "week2": (2, 1),  # question 1 is select-all
    "week3": (3, 2),  # question 2 asks for a number
    "week4": (3, 3),
    "week5": (0, 0),
    "week6": (2, 2),
    "week7": (2, 2),  # question 3 dropped for the graded speed-up curve (issue 27)
    "week8": (1, 1),  # question 2 dropped for the graded stage table (issue 27)
}
LONGEST_RATIO = 1.3  # the right option may not exceed the longest wrong one by more than this
# Words that state a rule without exception. Their weight as a tell is in the contrast: wrong
# options that say "always" or "only" beside a right one that says "usually".
ABSOLUTE = re.compile(r"\b(always|never|only|all|none|nothing|must|cannot|can't|impossible|"
                      r"guarantee[sd]?|entirely|completely)\b", re.IGNORECASE)
RUN = 4  # this many words of the right option in a row, found in the notebook's text, give it away
COVERED = 2 / 3  # share of the right option's content words that one sentence may not hold
_STOP = frozenset("""a an the of to in on at for by with and or but is are was were be been being it
its this that these those as from than then so such not no yes which what who when where why how do
does did can could would should may might will into over under about after before each per one two
own same other more most less much many very just also if there their them they we you your our us
whose while both either any some""".split())


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


def _right(q: Question) -> set[str]:
    """The letters of the right options (one for a single choice, several for select-all)."""
    return {choice(q.answer)} if q.single_choice else letters(q.answer)


_OPTION_LINES = re.compile(r"^- \([a-z]\) .*(?:\n[ \t]+\S.*)*", re.MULTILINE)


def text_outside(name: str, q: Question) -> str:
    """The notebook's markdown a student reads, less the question's stem and every option.

    Other questions' stems stay (one may answer another); their options go, since wrong
    options are false by design and the right ones are checked on their own.
    """
    kept = []
    for cell in _notebook(name).cells:
        if cell.cell_type != "markdown" or _meta(cell).get("solution"):
            continue
        source = cell.source
        marker = re.search(rf"^\*\*Question {q.number}\.\*\*", source, re.MULTILINE)
        if marker:
            ends = [m.start() for m in (_OPTION.search(source, marker.end()),
                                        _QUESTION.search(source, marker.end())) if m]
            source = source[:marker.start()] + source[min(ends, default=len(source)):]
        kept.append(_OPTION_LINES.sub(" ", source))
    return "\n".join(kept)


def _words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]+(?:'[a-z]+)?", re.sub(r"[`*_]", " ", text.lower()))


def longest_run(option: str, text: str) -> int:
    """How many words of ``option`` in a row stand, in the same order, somewhere in ``text``."""
    words, haystack = _words(option), f" {' '.join(_words(text))} "
    best = 0
    for i in range(len(words)):
        while i + best < len(words) and f" {' '.join(words[i:i + best + 1])} " in haystack:
            best += 1
    return best


def _content(text: str) -> set[str]:
    # a crude stem (five letters) so that "changes" meets "changed" and "calls" meets "call"
    return {w[:5] for w in _words(text) if len(w) > 2 and w not in _STOP}


def coverage(option: str, text: str) -> float:
    """The largest share of ``option``'s content words that one sentence of ``text`` holds."""
    wanted = _content(option)
    sentences = re.split(r"(?<=[.!?:;])\s+|\n\s*[-|]|\|", text)
    return max((len(wanted & _content(s)) / len(wanted) for s in sentences), default=0.0) if wanted else 0.0


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


@pytest.mark.parametrize("name", EXPECTED)
def test_no_absolute_word_marks_the_wrong_options_of_a_hedged_answer(name):
    found = []
    for q in ALL[name]:
        right = _right(q) if q.options else set()
        marked = {letter: ABSOLUTE.findall(text) for letter, text in q.options.items()
                  if letter not in right and ABSOLUTE.search(text)}
        if marked and not any(ABSOLUTE.search(q.options[letter]) for letter in right):
            found.append(f"{q.name}: wrong options {marked}, right ({', '.join(sorted(right))}) hedged")
    assert not found, found


@pytest.mark.parametrize("name", EXPECTED)
def test_no_right_option_is_written_in_its_notebooks_own_text(name):
    found = []
    for q in ALL[name]:
        if not q.options:
            continue
        text, right = text_outside(name, q), _right(q)
        wrong = max(coverage(o, text) for letter, o in q.options.items() if letter not in right)
        for letter in sorted(right):
            option = q.options[letter]
            run, covered = longest_run(option, text), coverage(option, text)
            if run >= min(RUN, len(_words(option))):
                found.append(f"{q.name} ({letter}): {run} of its words in a row stand in the text: {option!r}")
            elif covered >= COVERED and covered > wrong:
                found.append(f"{q.name} ({letter}): one sentence holds {covered:.0%} of its content words "
                             f"(a wrong option's at most {wrong:.0%}): {option!r}")
    assert not found, found


@pytest.mark.parametrize("name", EXPECTED)
def test_numeric_answers_are_computed_not_typed_in(name):
    # A number the solution types in does not depend on anything the student measured; the
    # answer must come from the student's own profile, table or calculation.
    typed = [f"{q.name}: {q.answer}" for q in ALL[name] if not q.options
             and re.fullmatch(r"[-+]?[\d_.]+(e[-+]?\d+)?", str(q.answer).strip())]
    assert not typed, typed


def test_the_text_checks_catch_what_they_are_for():
    text = "A first call pays for the translation. Later calls pay for the work alone."
    assert longest_run("the work alone, later", text) == 3
    assert longest_run("nothing in common here", text) == 0
    assert coverage("later calls pay for work", text) == 1.0
    assert coverage("translation of the first call", text) == 1.0
    assert coverage("garbage collection", text) == 0.0
    assert ABSOLUTE.search("it can only interleave") and not ABSOLUTE.search("usually the fastest")


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
