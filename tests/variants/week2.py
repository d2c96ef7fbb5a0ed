"""Week 2 submissions for the grading proof (tests/test_assignments.py).

``slow``: every answer right, but ``peak_fast`` puts NumPy inside the loop instead of the
loop inside NumPy: one small ``max`` call per window, correct and no faster than
``peak_slow`` (about half its speed): all the correctness points, none of the speed points.

``wrong``: a vectorised ``peak_fast`` that drops the last window: fast, but its result is
one element short, so it loses the correctness points of Parts 1 and 4 and the speed points.
"""

SLOW_PEAK = '''
def peak_fast(counts, window=WINDOW):
    """The same peaks as ``peak_slow``, with the loop over positions inside NumPy."""
    # NumPy inside the loop, but still one Python step (and one small NumPy call) per window
    return np.array([counts[i:i + window].max() for i in range(len(counts) - window + 1)],
                    dtype=np.int64)
'''

WRONG_PEAK = '''
def peak_fast(counts, window=WINDOW):
    """The same peaks as ``peak_slow``, with the loop over positions inside NumPy."""
    m = len(counts) - window  # one window short: the last full window is forgotten
    if m <= 0:
        return np.empty(0, dtype=np.int64)
    peaks = counts[:m].copy()
    for k in range(1, window):
        np.maximum(peaks, counts[k:k + m], out=peaks)
    return peaks
'''

VARIANTS = {
    "slow": {"peak_fast": SLOW_PEAK},
    "wrong": {"peak_fast": WRONG_PEAK},
}
