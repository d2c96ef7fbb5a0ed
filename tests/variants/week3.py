"""Week 3 submissions for tests/test_assignments.py: correct but slow, and fast but wrong.

Each maps the ``grade_id`` of an answer cell of ``solutions/week3/week3.ipynb`` to the
source that replaces it; answer cells not named keep the reference solution.
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
}
