"""Week 6 submissions that tests/test_assignments.py grades besides the reference.

``slow``: right but not compiled. ``admit`` moves the state into arrays, as the
reference does, but runs the loop in the interpreter (no ``@njit``): the same
decisions as ``admit_slow``, and no faster (indexing NumPy arrays one element at a
time in the interpreter costs more than lists and dictionaries). Every correctness
point, no speed point. The answers to the two questions are the reference's.

``wrong``: compiled and fast, but the refill is not capped at ``capacity``, so a
client that was quiet for a while gets a burst of more than ``capacity`` tokens. No
speed point (the speed test checks results first), and not every correctness point.
"""

VARIANTS = {
    "slow": {
        "admit": '''\
def admit(requests, rate, capacity):
    """The token buckets in arrays, looped over in the interpreter."""
    times = requests["time"].to_numpy()
    clients = requests["client"].to_numpy()
    costs = requests["cost"].to_numpy()
    n_clients = int(clients.max()) + 1
    tokens = np.full(n_clients, float(capacity))
    last_seen = np.zeros(n_clients)
    seen = np.zeros(n_clients, dtype=bool)
    admitted = np.zeros(times.shape[0], dtype=bool)
    for i in range(times.shape[0]):
        c = clients[i]
        if seen[c]:
            tokens[c] = min(capacity, tokens[c] + (times[i] - last_seen[c]) * rate)
        else:
            seen[c] = True
        last_seen[c] = times[i]
        if tokens[c] >= costs[i]:
            tokens[c] -= costs[i]
            admitted[i] = True
    return admitted
''',
    },
    "wrong": {
        "admit": '''\
@njit
def admit_kernel(times, clients, costs, n_clients, rate, capacity):
    """Compiled, but the refill is never capped at capacity."""
    tokens = np.full(n_clients, capacity)
    last_seen = np.zeros(n_clients)
    seen = np.zeros(n_clients, dtype=np.bool_)
    admitted = np.zeros(times.shape[0], dtype=np.bool_)
    for i in range(times.shape[0]):
        c = clients[i]
        if seen[c]:
            tokens[c] += (times[i] - last_seen[c]) * rate
        else:
            seen[c] = True
        last_seen[c] = times[i]
        if tokens[c] >= costs[i]:
            tokens[c] -= costs[i]
            admitted[i] = True
    return admitted


def admit(requests, rate, capacity):
    clients = requests["client"].to_numpy()
    return admit_kernel(requests["time"].to_numpy(), clients, requests["cost"].to_numpy(),
                        int(clients.max()) + 1, float(rate), float(capacity))
''',
    },
}
