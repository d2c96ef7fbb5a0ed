"""Example-assignment submissions for ``course selftest example``: correct but slow, fast but wrong.

Each maps the ``grade_id`` of an answer cell of ``solutions/example/example.ipynb`` to the
source that replaces it; answer cells not named keep the reference solution. ``slow`` and
``wrong`` get the default expectations (see :func:`course_lib.grader.authoring.load_variants`).
"""

VARIANTS = {
    # The provided list scan, correct: every correctness point, no speed point.
    "slow": {
        "count_known": '''
def count_known(catalogue, queries):
    return sum(1 for q in queries if q in catalogue)
''',
    },
    # Fast and wrong: a repeated query counts once. Some correctness points lost, no speed point.
    "wrong": {
        "count_known": '''
def count_known(catalogue, queries):
    return len(set(queries) & set(catalogue))
''',
    },
}
