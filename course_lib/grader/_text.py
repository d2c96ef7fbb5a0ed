"""Text that comes from a student or a file system, made safe to write as UTF-8.

Python hands the grader strings that cannot be written as UTF-8: a file name whose bytes
are not UTF-8 arrives with each bad byte as a *surrogate escape* (``"\\udce9"`` for the
Latin-1 byte ``0xe9``), and a message from the student's code may hold a lone surrogate
(``"\\ud800"``) that JSON carried faithfully. Written to a CSV file, a log or a feedback
page, either raises ``UnicodeEncodeError``. :func:`writable` is applied where such text
enters what the grader writes (flags, verdicts, notes, names), so nothing downstream has
to care; :func:`display_name` reads a folder name in a legacy encoding as a person would.

Text bound for a student goes through :func:`scrub_host` too: inside the sandbox the
student's code can read where the course and the interpreter live (its command line, the
mount list, ``sys.executable``), and print it; the feedback replaces every such path of
the grader's machine with a label (``<course>``, ``<python>``, ``<home>``...).

Examples
--------
>>> writable("plain é")
'plain é'
>>> writable("caf\\udce9 \\ud800")
'caf\\\\xe9 \\\\ud800'
>>> display_name("Jos\\udce9 Garc\\udceda")
'José García'
"""

from __future__ import annotations

import os

__all__ = ["writable", "display_name", "scrub_host", "remember_host_paths"]


def writable(text: object) -> str:
    """``text`` as a string that encodes as UTF-8: surrogates written out as escapes.

    A surrogate escape of a byte becomes ``\\xNN`` (the byte it stood for), any other lone
    surrogate ``\\uNNNN``; everything else is kept as it is.
    """
    text = text if isinstance(text, str) else str(text)
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return "".join(_escape(c) for c in text)


def display_name(name: str) -> str:
    """A folder name as a person would read it, as valid text.

    A name that is not valid UTF-8 (its bytes came as surrogate escapes) is most likely in
    a legacy encoding: it is read as Windows-1252 (Latin-1 with the printable extras), and
    what still does not decode is escaped by :func:`writable`.
    """
    try:
        name.encode("utf-8")
        return name
    except UnicodeEncodeError:
        pass
    try:
        raw = os.fsencode(name)
    except UnicodeEncodeError:  # a lone surrogate that is no escaped byte
        return writable(name)
    for encoding in ("utf-8", "cp1252", "latin-1"):
        try:
            return raw.decode(encoding)
        except UnicodeDecodeError:
            continue
    return writable(name)  # pragma: no cover - latin-1 decodes every byte


def scrub_host(text: str) -> str:
    """``text`` with every path of the grader's machine replaced by a label.

    The paths are those of :func:`_host_paths` (the course repository, the Python
    installation and virtual environment, the grader's home and working folder) and any
    given to :func:`remember_host_paths`, longest first, as written and as resolved.

    Examples
    --------
    >>> import sys
    >>> scrub_host(f"ran {sys.executable} -c ...").startswith("ran <python>")
    True
    """
    for path, label in _host_paths():
        if path in text:
            text = text.replace(path, label)
    return text


def remember_host_paths(**paths: str | os.PathLike) -> None:
    """Add paths of this machine (by label) that :func:`scrub_host` must hide, e.g. ``grading=...``."""
    for label, path in paths.items():
        _EXTRA[f"<{label}>"] = str(path)
    _CACHE.clear()


_EXTRA: dict[str, str] = {}
_CACHE: list[list[tuple[str, str]]] = []


def _host_paths() -> list[tuple[str, str]]:
    if not _CACHE:
        import sys
        from pathlib import Path

        import course_lib

        named = [("<course>", Path(course_lib.__file__).parents[1]), ("<grading>", os.environ.get("COURSE_GRADING_DIR")),
                 ("<python>", sys.prefix), ("<python>", sys.base_prefix), ("<python>", sys.exec_prefix),
                 ("<python>", Path(sys.executable).resolve().parents[1]), ("<home>", Path.home()),
                 ("<folder>", os.getcwd()), *((label, path) for label, path in _EXTRA.items())]
        found = {}
        for label, path in named:
            if not path:
                continue
            for form in {str(path), os.path.realpath(path)}:
                if len(form) > 4:  # "/", "/usr", "/tmp" name no machine
                    found.setdefault(form, label)
        _CACHE.append(sorted(found.items(), key=lambda pair: -len(pair[0])))
    return _CACHE[0]


def _escape(char: str) -> str:
    code = ord(char)
    if 0xDC80 <= code <= 0xDCFF:
        return f"\\x{code - 0xDC00:02x}"
    if 0xD800 <= code <= 0xDFFF:
        return f"\\u{code:04x}"
    return char
