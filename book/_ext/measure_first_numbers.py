"""Exercises are numbered per chapter: Exercise 5.2 is the second exercise of week 5.

Sphinx numbers enumerable nodes (sphinx-exercise's exercises among them) with section
numbers as a prefix, and the book's parts are not numbered (the chapters carry "Week N"
in their titles), so the numbers ran on through the whole book: week 5 started at
Exercise 13. Turning section numbering on would put a second number in front of every
title. Instead, after Sphinx has assigned the numbers (``env-get-updated``, later than
its own collector), this extension renumbers each chapter's exercises as (chapter,
position in the chapter), the chapter being its place in the table of contents. The
solutions' titles ("Solution to Exercise 5.2") and references follow, as they read the
same table.
"""

from __future__ import annotations

from typing import Any

__all__ = ["setup", "per_chapter"]

_FIGTYPE = "exercise"


def setup(app: Any) -> dict[str, Any]:
    # Priority 900: after the toctree collector (default 500) has assigned the numbers.
    app.connect("env-get-updated", _renumber, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True}


def per_chapter(numbers: dict[str, dict[str, dict[str, tuple[int, ...]]]],
                chapters: list[str]) -> dict[str, dict[str, dict[str, tuple[int, ...]]]]:
    """``numbers`` (Sphinx's ``toc_fignumbers``) with exercises numbered per chapter.

    Examples
    --------
    >>> numbers = {"week2": {"exercise": {"a": (4,), "b": (5,)}, "figure": {"f": (2,)}}}
    >>> per_chapter(numbers, ["index", "week1", "week2"])["week2"]
    {'exercise': {'a': (2, 1), 'b': (2, 2)}, 'figure': {'f': (2,)}}
    """
    renumbered = {doc: dict(types) for doc, types in numbers.items()}
    for doc, types in renumbered.items():
        if _FIGTYPE not in types or doc not in chapters:
            continue
        # The root page is position 0, so the first chapter is 1.
        chapter = chapters.index(doc)
        ordered = sorted(types[_FIGTYPE].items(), key=lambda item: item[1])
        types[_FIGTYPE] = {ident: (chapter, k) for k, (ident, _) in enumerate(ordered, start=1)}
    return renumbered


def _renumber(app: Any, env: Any) -> list[str]:
    env.toc_fignumbers = per_chapter(env.toc_fignumbers, _toc_order(env, app.config.root_doc))
    return []


def _toc_order(env: Any, root: str) -> list[str]:
    """Documents in reading order: the root, then depth first through the toctrees."""
    order: list[str] = []

    def walk(doc: str) -> None:
        if doc in order:
            return
        order.append(doc)
        for child in env.toctree_includes.get(doc, []):
            walk(child)

    walk(root)
    return order
