"""Shared test settings: a non-interactive plotting backend, and the groups `make test`
hands to its two pytest-xdist workers."""

from __future__ import annotations

import os

os.environ.setdefault("MPLBACKEND", "Agg")

# `make test` runs two pytest-xdist workers. A group runs whole on one worker, in one
# process, so a module's module-scoped fixtures (a graded batch, a listener on a fixed
# port) are built once. Every test is grouped by its file, except:
# - each assignment's self-test (nbgrader grading of 5-14 notebooks, up to a sixth of the
#   suite) is a group of its own, so the longest ones run side by side;
# - the two book modules share one group: they share one build of _build/ (book_support).
# (xdist's own --dist loadgroup cannot do this under pytest 9, whose test ids no longer
# take the group suffix that loadgroup reads; so this file gives xdist its scheduler.)
_OWN_GROUP = "tests/test_assignments.py::test_assignment_grades_reference_untouched_slow_and_wrong_as_designed["
_SHARED_GROUP = {"tests/test_book.py": "book", "tests/test_book_browser.py": "book"}


def group_of(nodeid: str) -> str:
    """The group a test runs in, by its pytest node id.

    >>> group_of("tests/test_amdahl.py::test_ceiling[0.9-10.0]")
    'tests/test_amdahl.py'
    >>> group_of("tests/test_book_browser.py::test_pages_render")
    'book'
    """
    if nodeid.startswith(_OWN_GROUP):
        return nodeid
    path = nodeid.split("::", 1)[0]
    return _SHARED_GROUP.get(path, path)


def pytest_collection_modifyitems(config, items) -> None:
    """Self-tests first, the later weeks first: xdist hands out groups in this order, and the
    longest (week 8's twelve notebooks, about 17 minutes beside the other worker; week 7's)
    must not start last."""
    selftests = sorted((i for i in items if i.nodeid.startswith(_OWN_GROUP)), key=lambda i: i.nodeid,
                       reverse=True)
    items[:] = selftests + [i for i in items if not i.nodeid.startswith(_OWN_GROUP)]


def pytest_xdist_make_scheduler(config, log):
    """xdist's scope scheduler, with :func:`group_of` as the scope."""
    from xdist.scheduler import LoadScopeScheduling

    class _GroupScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return group_of(nodeid)

    return _GroupScheduling(config, log)
