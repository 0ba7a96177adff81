"""pyamg's smoothed aggregation on the systems `fegpu bench amg` wrote with
FEGPU_AMG_DUMP=dir: iterations, setup, solve and time to solution on this
machine's CPU cores, tolerance 1e-8 as fegpu's. pyamg's defaults (symmetric
strength theta 0, standard aggregation, Jacobi-smoothed prolongation,
symmetric Gauss-Seidel smoothing, max_coarse 10); elasticity as 3x3 BSR with
the rigid-body modes where fegpu was given them. Usage: amg_pyamg.py dir"""
import os, sys, time
import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as spla
import pyamg

d = sys.argv[1]
k = 0
print(f"pyamg {pyamg.__version__}, numpy {np.__version__}, {os.cpu_count()} CPUs; tolerance 1e-8, times in ms")
print(f"  {'system':<52} {'its':>5} {'setup':>9} {'solve':>9} {'to solution':>12} {'op. complexity':>14}")
while os.path.exists(f"{d}/{k}.meta"):
    name, n, spd, bs, count = open(f"{d}/{k}.meta").read().split("\n")[:5]
    n, spd, bs, count = int(n), int(spd) == 1, int(bs), int(count)
    rp = np.fromfile(f"{d}/{k}.rp", dtype="<i4")
    ci = np.fromfile(f"{d}/{k}.ci", dtype="<i4")
    v = np.fromfile(f"{d}/{k}.v", dtype="<f8")
    b = np.fromfile(f"{d}/{k}.b", dtype="<f8")
    A = sp.csr_matrix((v, ci, rp), shape=(n, n))
    B = np.fromfile(f"{d}/{k}.nns", dtype="<f8").reshape(count, n).T.copy() if count else None
    if B is not None and bs > 1:
        A = A.tobsr(blocksize=(bs, bs))
    t = time.perf_counter()
    ml = pyamg.smoothed_aggregation_solver(A, B=B)
    setup = time.perf_counter() - t
    # SciPy's Krylov methods with pyamg's V-cycle as M (pyamg 5.2's own
    # accelerators call a SciPy helper that SciPy 1.18 changed)
    count = [0]
    def tick(_):
        count[0] += 1
    krylov = spla.cg if spd else spla.bicgstab
    t = time.perf_counter()
    x, info = krylov(A, b, rtol=1e-8, maxiter=2000, M=ml.aspreconditioner(cycle="V"), callback=tick)
    solve = time.perf_counter() - t
    its = count[0]
    print(f"  {name:<52} {its:>5} {setup*1e3:>9.1f} {solve*1e3:>9.1f} {(setup+solve)*1e3:>12.1f} {ml.operator_complexity():>14.3f}", flush=True)
    k += 1
