"""Week 3 submissions for tests/test_assignments.py: slow, wrong, the alternatives a class writes,
and the give-aways issue 27 removed.

Each maps the ``grade_id`` of an answer cell of ``solutions/week3/week3.ipynb`` to the
source that replaces it; answer cells not named keep the reference solution.

The growth points follow the course's rule for alternative answers: the technique the
notebook teaches earns all of them, anything still quadratic at these sizes none (all 4
points up to an exponent of 1.5, none from 1.7, each with its 0.1 noise margin). The
ranges below come from in-process measurements (``complexity.doubling`` in CPU time from
2,000 to 16,000 names; December 2026, the 2-core course machine shared with other jobs)
and are wide enough for a 2-core grader with one busy neighbour.

``sorted``: the positions sorted by key and neighbours grouped, O(n log n): exponent 1.10;
every point.

``half_fixed``: a set answers "seen before?" but each group is still found with
``keys.index``: still quadratic (exponent 1.86): few or none of the growth points.

The evidence cells (``test_slow_growth``, ``test_my_growth``) grade the student's own
doubling tables against the grader's measurement of the same code: a table typed from
theory, seconds in other units, or the table of another function earn nothing there,
whatever the rest of the notebook earns. ``form_only`` answers the multiple-choice
questions by the form of their options alone (the longest), and earns nothing for them.
"""

VARIANTS = {
    # Correct and still quadratic: a list of (key, group) pairs searched from the start for
    # every name. Every correctness point; no speed or scaling point.
    "slow": {
        "duplicate_groups": '''
def duplicate_groups(names):
    """Same groups as duplicate_groups_slow: each name searches the groups found so far."""
    found = []  # (key, positions) in order of first position
    for i, name in enumerate(names):
        key = name_key(name)
        for seen, positions in found:
            if seen == key:
                positions.append(i)
                break
        else:
            found.append((key, [i]))
    return [positions for _, positions in found if len(positions) > 1]
''',
    },
    # Linear and wrong: the groups come out in the order of their keys, not of their first
    # position, so any input with several groups differs. Some correctness points lost;
    # no speed or scaling point, however fast.
    "wrong": {
        "duplicate_groups": '''
def duplicate_groups(names):
    """Groups by key with a dict, but returned sorted by key (the order is wrong)."""
    groups = {}
    for i, name in enumerate(names):
        groups.setdefault(name_key(name), []).append(i)
    return [group for _, group in sorted(groups.items()) if len(group) > 1]
''',
    },
    "sorted": {
        "duplicate_groups": '''
def duplicate_groups(names):
    """Sort the positions by key, then group neighbours: O(n log n)."""
    keys = [name_key(name) for name in names]
    order = sorted(range(len(keys)), key=keys.__getitem__)  # stable: positions stay increasing
    groups = []
    start = 0
    for j in range(1, len(order) + 1):
        if j == len(order) or keys[order[j]] != keys[order[start]]:
            if j - start > 1:
                groups.append(order[start:j])
            start = j
    return sorted(groups, key=lambda group: group[0])
''',
    },
    "half_fixed": {
        "duplicate_groups": '''
def duplicate_groups(names):
    """A set answers "seen before?" at once, but the group is still found with list.index."""
    seen, keys, groups = set(), [], []
    for i, name in enumerate(names):
        key = name_key(name)
        if key in seen:
            groups[keys.index(key)].append(i)
        else:
            seen.add(key)
            keys.append(key)
            groups.append([i])
    return [group for group in groups if len(group) > 1]
''',
    },
    # Tables typed from theory: "n**2 steps" and "n steps" instead of seconds, with the
    # exponents theory gives. Self-consistent, and nowhere near the grader's seconds: both
    # evidence cells lose their points, nothing else does.
    "typed_tables": {
        "slow_growth": '''
import pandas as pd

slow_table = pd.DataFrame({"n": [500, 1_000, 2_000, 4_000]})
slow_table["seconds"] = slow_table["n"].astype(float) ** 2  # quadratic: n**2 steps
slow_exponent = 2.0
''',
        "my_growth": '''
my_table = pd.DataFrame({"n": [1_000, 2_000, 4_000, 8_000]})
my_table["seconds"] = my_table["n"].astype(float)  # linear: n steps
my_exponent = 1.0
''',
    },
    # Measured, then shown in milliseconds for readability: the exponents do not change, the
    # seconds of Task 1 are a thousand times the grader's (and so is question 2's prediction
    # made from them). Task 3's check is a ratio of the two tables, so the same unit in both
    # passes it.
    "milliseconds": {
        "slow_growth": '''
slow_table = complexity.doubling(duplicate_groups_slow, lambda n: make_names(n, seed=n),
                                 sizes=[500, 1_000, 2_000, 4_000], budget=0.1, clock="cpu")
slow_table["seconds"] *= 1_000  # in ms
slow_exponent = complexity.exponent(slow_table).slope
''',
        "my_growth": '''
my_table = complexity.doubling(duplicate_groups, lambda n: make_names(n, seed=n),
                               sizes=[1_000, 2_000, 4_000, 8_000], budget=0.1, clock="cpu")
my_table["seconds"] *= 1_000  # in ms
my_exponent = complexity.exponent(my_table).slope
''',
    },
    # Task 3 measured on the provided function instead of the student's own: an exponent near
    # 2 where the grader measures the student's linear function near 1, and tables that imply
    # no speed-up at all.
    "wrong_function": {
        "my_growth": '''
my_table = complexity.doubling(duplicate_groups_slow, lambda n: make_names(n, seed=n),
                               sizes=[1_000, 2_000, 4_000, 8_000], budget=0.1, clock="cpu")
my_exponent = complexity.exponent(my_table).slope
''',
    },
    # The quiz answered from the options' form alone (the longest option) and question 2 by a
    # linear extrapolation of the largest size: no quiz point.
    "form_only": {
        "quiz": '''
q1 = "b"  # the longest option
q2 = float(slow_table["seconds"].iloc[-1] * 800_000 / slow_table["n"].iloc[-1])  # linear
q3 = "a"  # the longest option
''',
    },
}

EXPECT = {
    "sorted": {"total": "full"},
    "half_fixed": {"correctness": "full", "test_groups_scaling": (0, 2)},
    # totals are of the 16 automatic points (the written explanations are marked by hand)
    # question 2's prediction is made from the typed table too: wrong by far
    "typed_tables": {"test_slow_growth": 0, "test_my_growth": 0, "test_q2": 0, "performance": "full",
                     "total": 11},
    "milliseconds": {"test_slow_growth": 0, "test_my_growth": 2, "test_q2": 0, "total": 13},
    "wrong_function": {"test_slow_growth": 2, "test_my_growth": 0, "total": 14},
    "form_only": {"test_q1": 0, "test_q2": 0, "test_q3": 0, "total": 13},
}
