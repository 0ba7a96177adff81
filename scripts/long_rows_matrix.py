"""A sparse matrix with a few very long rows, for `fegpu bench spmv A.mtx`
and `python3 peers/peers.py sparse A.mtx` (the SpMV's long-row path).

    python3 scripts/long_rows_matrix.py OUT.mtx [rows] [long rows] [long length]

Every row has 3-8 entries at random columns and a diagonal; `long rows` rows
(spread over the matrix) have `long length` entries each, as a circuit's
ground node or a reservoir's well row. Defaults: 2,000,000 rows, 4 long rows
of 500,000 entries, plus 2,000 rows of 2,000 (a power-law tail).
"""
import sys

import numpy as np
import scipy.io
import scipy.sparse as sp


def main():
    out = sys.argv[1]
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 2_000_000
    n_long = int(sys.argv[3]) if len(sys.argv) > 3 else 4
    long_len = int(sys.argv[4]) if len(sys.argv) > 4 else 500_000
    rng = np.random.default_rng(7)
    per_row = rng.integers(3, 9, size=n)
    rows = [np.repeat(np.arange(n), per_row), np.arange(n)]
    cols = [rng.integers(0, n, size=int(per_row.sum())), np.arange(n)]
    for count, length in ((n_long, long_len), (2_000, 2_000)):
        picked = rng.choice(n, size=count, replace=False)
        rows.append(np.repeat(picked, length))
        cols.append(rng.integers(0, n, size=count * length))
    r, c = np.concatenate(rows), np.concatenate(cols)
    a = sp.csr_matrix((rng.uniform(-1.0, 1.0, size=r.size), (r, c)), shape=(n, n))
    a.sum_duplicates()
    scipy.io.mmwrite(out, a)
    lengths = np.diff(a.indptr)
    print(f"{out}: {n} rows, {a.nnz} entries, longest row {lengths.max()}, mean {lengths.mean():.2f}")


if __name__ == "__main__":
    main()
