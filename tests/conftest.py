"""Shared test settings: a non-interactive plotting backend, and the groups `make test`
hands to its two pytest-xdist workers."""

import os

import pytest

os.environ.setdefault("MPLBACKEND", "Agg")

# `make test` runs two workers with --dist loadgroup: a group runs whole on one worker, in
# one process, so a module's module-scoped fixtures (a graded batch, a listener on a fixed
# port) are built once. Every test is grouped by its module, except:
# - each assignment's self-test (nbgrader grading of 5-14 notebooks, up to a quarter of the
#   suite) is a group of its own, so the longest ones run side by side;
# - the two book modules share one group: they share one build of _build/ (book_support).
_OWN_GROUP = {"test_assignment_grades_reference_untouched_slow_and_wrong_as_designed"}
_SHARED_GROUP = {"test_book": "book", "test_book_browser": "book"}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Give every test an ``xdist_group`` mark (used only under ``--dist loadgroup``)."""
    for item in items:
        module = getattr(item, "module", None)  # doctests of course_lib: their file
        module = module.__name__.rpartition(".")[2] if module else str(item.path)
        group = _SHARED_GROUP.get(module, module)
        if getattr(item, "originalname", item.name) in _OWN_GROUP:
            group = item.nodeid
        item.add_marker(pytest.mark.xdist_group(group))
