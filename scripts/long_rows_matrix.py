"""A sparse matrix with a few very long rows, for `fegpu bench spmv A.mtx`
and `python3 peers/peers.py sparse A.mtx` (the SpMV's long-row path).

    python3 scripts/long_rows_matrix.py OUT.mtx [rows] [long rows] [long length] [--peer]

Every row has 3-8 entries at random columns and a diagonal; `long rows` rows
(spread over the matrix) have `long length` entries each, as a circuit's
ground node or a reservoir's well row. Defaults: 2,000,000 rows, 4 long rows
of 500,000 entries, plus 2,000 rows of 2,000 (a power-law tail). With
--peer, also times cuSPARSE's SpMV (CuPy, csr @ x) on the same matrix, with
the bytes `fegpu bench spmv` counts.
"""
import sys

import numpy as np
import scipy.io
import scipy.sparse as sp


def peer(a):
    import cupy
    import cupyx.scipy.sparse as csp
    da = csp.csr_matrix(a)
    x = cupy.random.rand(a.shape[0])
    start, stop = cupy.cuda.Event(), cupy.cuda.Event()
    times = []
    for _ in range(25):
        start.record()
        da @ x
        stop.record()
        stop.synchronize()
        times.append(cupy.cuda.get_elapsed_time(start, stop) * 1e-3)
    t = sorted(times[5:])[len(times[5:]) // 2]
    n, nnz = a.shape[0], a.nnz
    nbytes = 12 * nnz + 4 * (n + 1) + 16 * n
    print(f"cuSPARSE SpMV (CuPy {cupy.__version__}, csr @ x): {t * 1e3:.4f} ms, {nbytes / t / 1e9:.1f} GB/s")


def main():
    args = [a for a in sys.argv[1:] if a != "--peer"]
    out = args[0]
    n = int(args[1]) if len(args) > 1 else 2_000_000
    n_long = int(args[2]) if len(args) > 2 else 4
    long_len = int(args[3]) if len(args) > 3 else 500_000
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
    if "--peer" in sys.argv:
        peer(a)


if __name__ == "__main__":
    main()
