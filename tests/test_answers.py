"""course_lib.answers: one reading of quiz answers for every graded notebook."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, strategies as st

from course_lib import answers
from course_lib.answers import choice, letters, number


@pytest.mark.parametrize("written", ["c", "C", " c ", "(c)", "c)", "c.", "c:", "(C).", "(c) O(n^2)",
                                     "c) about 120", "c. the median", "(c)O(n^2)", "\tc\n"])
def test_every_usual_way_of_writing_one_letter_reads_as_that_letter(written):
    assert choice(written) == "c"


@pytest.mark.parametrize("written", ["", "   ", "ac", "a, c", "a c", "c O(n^2)", "cc", "3", "(3)", "e",
                                     "(e) none", "answer c", 3, None, True, ["c"], {"c"}])
def test_anything_but_one_allowed_letter_is_refused_naming_the_letters(written):
    with pytest.raises(ValueError, match=r"one of the letters a, b, c, d .*got "):
        choice(written)


def test_the_allowed_letters_follow_the_question():
    assert choice("(e)", options="abcde") == "e"
    with pytest.raises(ValueError, match="letters a, b, c as a string"):
        choice("d", options="abc")
    with pytest.raises(ValueError, match="single letters"):
        choice("a", options=["a", "bc"])


@given(st.sampled_from("abcd"), st.booleans(), st.sampled_from(["", ")", ".", ":"]),
       st.text(alphabet="xyz ()^0123", max_size=12))
def test_a_letter_with_a_mark_keeps_its_meaning_whatever_text_follows(letter, upper, mark, text):
    written = (letter.upper() if upper else letter) + mark
    if mark:
        written += " " + text
    assert choice(written) == letter


@pytest.mark.parametrize("written", ["a, c", "a c", "a;c", "ac", "CA", "(a) (c)", "(a), (c)", "a,c,", " a , c ",
                                     {"a", "c"}, ["(a)", "c."], ("A", "c"), ["a", "c", "a"]])
def test_select_all_answers_read_as_a_set_of_letters(written):
    assert letters(written) == {"a", "c"}


@pytest.mark.parametrize("written", ["", "  ", [], "a, g", "a and c", "a, 3", 3, None, ["a", "bc"],
                                     "a) one, c) two"])
def test_a_select_all_answer_with_an_unknown_item_or_none_is_refused(written):
    with pytest.raises(ValueError, match="letters from a, b, c, d, e, f"):
        letters(written)


def test_a_single_letter_is_a_valid_select_all_answer():
    assert letters("d") == {"d"} and letters("(d)") == {"d"}
    assert letters("a, b", options="ab") == {"a", "b"}


@pytest.mark.parametrize("written, value", [("5000", 5000.0), ("5,000", 5000.0), ("5_000", 5000.0), (5000, 5000.0),
                                            (" 0.5 ", 0.5), (2.5e3, 2500.0), ("1e-3", 0.001)])
def test_numbers_read_with_separators(written, value):
    assert number(written) == value


@pytest.mark.parametrize("written", ["c", "", "five", True, None, "nan", math.inf, "1.5 s"])
def test_anything_but_a_finite_number_is_refused(written):
    with pytest.raises(ValueError, match="a (finite )?number such as 12"):
        number(written)


def test_the_module_lists_its_public_names():
    assert answers.__all__ == ["choice", "letters", "number"]
