"""Week 3 submissions for tests/test_assignments.py: slow, wrong, and the alternatives a class writes.

Each maps the ``grade_id`` of an answer cell of ``solutions/week3/week3.ipynb`` to the
source that replaces it; answer cells not named keep the reference solution.

The speed and scaling points follow the course's rule for alternative answers: the
technique the notebook teaches earns all of them, a loop that is merely tidier earns little
or nothing, and anything in between earns what its measurement earns on the cell's scale
(speed: all 5 points from 15x, none at 2x; scaling: all 5 up to an exponent of 1.5, none
from 1.7, each with its noise margin). The ranges below come from in-process measurements
(``timing.compare``, one thread, 6,000 fresh names; ``complexity.doubling`` in CPU time from
2,000 to 16,000; December 2026, the 2-core course machine shared with other jobs) and are
wide enough for a 2-core grader with one busy neighbour.

``sorted``: the positions sorted by key and neighbours grouped, O(n log n): 38x-39x, exponent
1.10; every point.

``half_fixed``: a set answers "seen before?" but each group is still found with
``keys.index``: 9.2x at 6,000 names, still quadratic (exponent 1.86): most of the speed
points, few or none of the scaling points.
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
}

EXPECT = {
    "sorted": {"total": "full"},
    "half_fixed": {"correctness": "full", "test_groups_speed": (2.5, 5), "test_groups_scaling": (0, 2)},
}
