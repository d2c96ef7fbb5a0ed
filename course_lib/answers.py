"""Quiz answers read one way in every graded notebook: a letter, a set of letters, a number.

A student writes ``q1 = "c"``, or ``"C"``, ``"(c)"``, ``"c)"``, ``"c."``, or copies the
whole option, ``"(c) O(n^2)"``; all of them mean the same answer, and every week's tests
read them with the same function. Anything that is not one of the allowed letters
(``"ac"``, ``""``, ``3``, ``"e"`` when there are four options) raises a ``ValueError``
that names the letters allowed, so a badly written answer is reported by the notebook's
well-formedness cell instead of failing a hidden test in silence.

The notebooks import these functions in their locked first cell, beside the grading
helpers, and their hidden tests compare what comes back with the key, for instance
``assert_same(choice(answer), "b")``, ``assert_same(letters(answer), {"a", "d"})`` or
``assert_same(number(answer), 250.0)``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable

__all__ = ["choice", "letters", "number"]


def choice(answer: object, options: str | Iterable[str] = "abcd") -> str:
    """The one option letter an answer names, in lower case.

    Accepted: the letter alone in either case (``"c"``, ``" C "``), in brackets or followed
    by a closing bracket, a full stop or a colon (``"(c)"``, ``"c)"``, ``"c."``), and the
    same followed by the option's text (``"(c) O(n^2)"``, ``"c) about 120"``). Text after a
    bare letter needs that bracket or stop (``"c O(n^2)"`` is refused), so that two letters
    such as ``"a c"`` are never read as one.

    Parameters
    ----------
    answer : object
        What the student wrote; usually a string.
    options : str or iterable of str, default "abcd"
        The letters of the question's options.

    Returns
    -------
    str
        The letter, lower case.

    Raises
    ------
    ValueError
        when the answer is not exactly one of the allowed letters; the message names them.

    Examples
    --------
    >>> choice("(c) O(n^2)"), choice(" C "), choice("b."), choice("a)")
    ('c', 'c', 'b', 'a')
    >>> choice("a, c")
    Traceback (most recent call last):
    ...
    ValueError: answer with one of the letters a, b, c, d as a string, such as "b" or "(b)"; got 'a, c'
    """
    allowed = _options(options)
    letter = _letter(answer)
    if letter is None or letter not in allowed:
        raise ValueError(f"answer with one of the letters {', '.join(allowed)} as a string, "
                         f"such as \"{allowed[1 % len(allowed)]}\" or \"({allowed[1 % len(allowed)]})\"; "
                         f"got {answer!r}")
    return letter


def letters(answer: object, options: str | Iterable[str] = "abcdef") -> set[str]:
    """The set of option letters a select-all answer names, in lower case.

    Accepted: letters separated by commas, semicolons or spaces (``"a, c"``, ``"a c"``),
    written together (``"ac"``), each optionally bracketed (``"(a) (c)"``), or a list, tuple
    or set of single answers as :func:`choice` reads them (``{"a", "c"}``, ``["(a)", "c."]``).
    A letter given twice counts once.

    Parameters
    ----------
    answer : object
        What the student wrote.
    options : str or iterable of str, default "abcdef"
        The letters of the question's options.

    Returns
    -------
    set of str
        The letters chosen, at least one.

    Raises
    ------
    ValueError
        when nothing is chosen, or an item is not one of the allowed letters.

    Examples
    --------
    >>> sorted(letters("a, c")), sorted(letters("AC")), sorted(letters(["(a)", "c."]))
    (['a', 'c'], ['a', 'c'], ['a', 'c'])
    >>> letters("a, g")
    Traceback (most recent call last):
    ...
    ValueError: answer with letters from a, b, c, d, e, f, such as "a, c"; got 'a, g'
    """
    allowed = _options(options)
    if isinstance(answer, str):
        text = answer.strip()
        items = [item for item in re.split(r"[\s,;]+", text) if item]
        if len(items) == 1 and len(re.sub(r"[().:]", "", items[0])) > 1:
            items = list(re.sub(r"[().:]", "", items[0]))  # "acd" means a, c and d
    elif isinstance(answer, Iterable) and not isinstance(answer, (bytes, dict)):
        items = list(answer)
    else:
        items = [answer]
    chosen = {_letter(item) for item in items}
    if not items or None in chosen or not chosen <= set(allowed):
        raise ValueError(f"answer with letters from {', '.join(allowed)}, such as \"a, c\"; got {answer!r}")
    return chosen


def number(answer: object) -> float:
    """A numeric answer as a float; underscores and thousands commas are allowed.

    Raises
    ------
    ValueError
        when the answer is not a finite number (a letter, a word, ``True``, ``nan``).

    Examples
    --------
    >>> number("5,000"), number(5_000), number(" 0.5 ")
    (5000.0, 5000.0, 0.5)
    """
    if isinstance(answer, bool):
        raise ValueError(f"answer with a number such as 12 or 0.5, got {answer!r}")
    try:
        value = float(str(answer).strip().replace("_", "").replace(",", ""))
    except ValueError:
        raise ValueError(f"answer with a number such as 12 or 0.5, got {answer!r}") from None
    if not math.isfinite(value):
        raise ValueError(f"answer with a finite number such as 12 or 0.5, got {answer!r}")
    return value


# --- private helpers -------------------------------------------------------------------------

# One letter, bracketed or followed by ")", "." or ":"; text may follow only after such a mark.
_BARE = re.compile(r"\(?([a-z])\)?[.:]?", re.IGNORECASE)
_WITH_TEXT = re.compile(r"\(?([a-z])(?:\)[.:]?|[.:])\s*\S.*", re.IGNORECASE | re.DOTALL)


def _letter(answer: object) -> str | None:
    if not isinstance(answer, str):
        return None
    text = answer.strip()
    match = _BARE.fullmatch(text) or _WITH_TEXT.fullmatch(text)
    return match.group(1).lower() if match else None


def _options(options: str | Iterable[str]) -> list[str]:
    allowed = [str(o).strip().lower() for o in options]
    if not allowed or any(len(o) != 1 or not o.isalpha() for o in allowed):
        raise ValueError(f"options must be single letters such as \"abcd\", got {options!r}")
    return sorted(set(allowed))
