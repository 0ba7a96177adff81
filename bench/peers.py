"""Peers timed on the same GPU as `fegpu bench`: what a user would pick instead.

    python3 bench/peers.py transpose [N ...]
    python3 bench/peers.py sparse [A.mtx]
    python3 bench/peers.py lbm [N ...]

lbm: a D3Q19 BGK step written the way a PyTorch user would (moments by
einsum, streaming by torch.roll), f32 and f64, on a periodic N^3 box: MLUPS
and GB/s counting the same 2*19 populations per site as `fegpu bench lbm`.

sparse: cuSPARSE SpMV through CuPy (csr_matrix @ x) and CuPy's cg / bicgstab
per iteration on the same operators as `fegpu bench spmv|solve`.

Prints, per size and dtype, the device-to-device copy (the ceiling) and the
transposes of PyTorch (.t().contiguous()) and CuPy (cupy.ascontiguousarray(a.T)),
in GB/s counting bytes read + written, timed with CUDA events (median).
"""
import sys
import statistics


def timed(fn, reps=20):
    import torch
    fn()
    torch.cuda.synchronize()
    samples = []
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        e.synchronize()
        samples.append(s.elapsed_time(e) * 1e-3)
    return statistics.median(samples)


def transpose(sizes):
    import torch
    import cupy
    print(f"peers on {torch.cuda.get_device_name(0)}: torch {torch.__version__}, cupy {cupy.__version__}")
    print(f"  {'size':<12} {'dtype':<6} {'what':<28} {'ms':>9} {'GB/s':>9} {'of copy':>8}")
    for n in sizes:
        for dt in (torch.float64, torch.float32):
            a = torch.rand(n, n, dtype=dt, device="cuda")
            b = torch.empty_like(a)
            nbytes = 2 * a.numel() * a.element_size()
            ca = cupy.asarray(a)
            rows = [
                ("copy (torch copy_: ceiling)", lambda: b.copy_(a)),
                ("torch .t().contiguous()", lambda: a.t().contiguous()),
                ("cupy ascontiguousarray(a.T)", lambda: cupy.ascontiguousarray(ca.T)),
            ]
            ceiling = None
            for what, fn in rows:
                t = timed(fn)
                gbs = nbytes / t / 1e9
                ceiling = ceiling or gbs
                name = str(dt).replace("torch.", "")
                print(f"  {n}x{n:<7} {name:<6} {what:<28} {t*1e3:9.4f} {gbs:9.1f} {100*gbs/ceiling:7.1f}%")


def operators(real):
    import scipy.sparse as sp
    import scipy.io

    def lap7(n):
        t = sp.diags([-1.0, 2.0, -1.0], [-1, 0, 1], shape=(n, n))
        i = sp.identity(n)
        return (sp.kron(sp.kron(i, i), t) + sp.kron(sp.kron(i, t), i) + sp.kron(sp.kron(t, i), i)).tocsr()

    def lap27(n):
        j = sp.diags([1.0, 1.0, 1.0], [-1, 0, 1], shape=(n, n))
        return (27 * sp.identity(n ** 3) - sp.kron(sp.kron(j, j), j)).tocsr()

    def convdiff(n, c=1.0):
        # -lap + upwind convection, as fegpu's gallery::convection_diffusion
        lo = sp.diags([-1 - c, 2 + c, -1], [-1, 0, 1], shape=(n, n))
        i = sp.identity(n)
        return (sp.kron(sp.kron(i, i), lo) + sp.kron(sp.kron(i, lo), i) + sp.kron(sp.kron(lo, i), i)).tocsr()

    ops = [("laplacian7 128^3", lap7(128), True), ("laplacian27 96^3", lap27(96), True)]
    if real:
        ops.append((real.split("/")[-1].replace(".mtx", ""), scipy.io.mmread(real).tocsr(), False))
    ops.append(("convdiff 128^3", convdiff(128), False))
    return ops


def sparse(args):
    import cupy
    import cupyx.scipy.sparse as csp
    import cupyx.scipy.sparse.linalg as cla
    import torch
    print(f"peers on {torch.cuda.get_device_name(0)}: cupy {cupy.__version__}")
    print(f"  {'matrix':<20} {'what':<34} {'ms':>10} {'GB/s':>8}")
    for name, a, spd in operators(args[0] if args else None):
        a.sort_indices()
        n, nnz = a.shape[0], a.nnz
        da = csp.csr_matrix(a)
        x = cupy.random.rand(n)
        nbytes = 12 * nnz + 4 * (n + 1) + 16 * n
        if not name.startswith("convdiff"):
            t = timed(lambda: da @ x)
            print(f"  {name:<20} {'cuSPARSE SpMV (csr @ x)':<34} {t*1e3:10.4f} {nbytes/t/1e9:8.1f}")
        b = cupy.ones(n)
        iters = 200
        solvers = [("cg", cla.cg)] if spd else []
        if hasattr(cla, "bicgstab"):
            solvers.append(("bicgstab", cla.bicgstab))
        for sname, fn in solvers:
            count = [0]
            def cb(_):
                count[0] += 1
            import inspect
            tol_kw = "rtol" if "rtol" in inspect.signature(fn).parameters else "tol"
            fn(da, b, **{tol_kw: 1e-30}, maxiter=5, callback=cb)  # warm-up
            cupy.cuda.runtime.deviceSynchronize()
            count[0] = 0
            import time
            t0 = time.perf_counter()
            fn(da, b, **{tol_kw: 1e-30}, maxiter=iters, callback=cb)
            cupy.cuda.runtime.deviceSynchronize()
            t = (time.perf_counter() - t0) / max(count[0], 1)
            print(f"  {name:<20} {'cupyx ' + sname + ' per iteration':<34} {t*1e3:10.4f}    ({count[0]} its)")
        if not hasattr(cla, "bicgstab"):
            print(f"  {name:<20} cupyx.scipy.sparse.linalg has no bicgstab in this CuPy")


def lbm(sizes):
    import torch
    c = torch.tensor([[0, 0, 0], [-1, 0, 0], [0, -1, 0], [0, 0, -1], [-1, -1, 0], [-1, 1, 0], [-1, 0, -1],
                      [-1, 0, 1], [0, -1, -1], [0, -1, 1]])
    c = torch.cat([c, -c[1:]])
    w = torch.tensor([1 / 3] + [1 / 18] * 3 + [1 / 36] * 6 + [1 / 18] * 3 + [1 / 36] * 6)
    print(f"peers on {torch.cuda.get_device_name(0)}: torch {torch.__version__}")
    print(f"  {'size':<8} {'dtype':<8} {'what':<28} {'ms/step':>9} {'MLUPS':>9} {'GB/s':>8}")
    for n in sizes:
        for dt in (torch.float32, torch.float64):
            cd, wd = c.to("cuda", dt), w.to("cuda", dt).view(19, 1, 1, 1)
            f = wd.expand(19, n, n, n).clone()
            omega = 1 / 0.6

            def step():
                nonlocal f
                rho = f.sum(0)
                u = torch.einsum("qa,qzyx->azyx", cd, f) / rho
                cu = torch.einsum("qa,azyx->qzyx", cd, u)
                feq = wd * rho * (1 + 3 * cu + 4.5 * cu * cu - 1.5 * (u * u).sum(0))
                post = f - omega * (f - feq)
                f = torch.stack([torch.roll(post[i], shifts=(int(c[i, 2]), int(c[i, 1]), int(c[i, 0])), dims=(0, 1, 2))
                                 for i in range(19)])
            t = timed(step, reps=10)
            size = 4 if dt == torch.float32 else 8
            print(f"  {str(n) + '^3':<8} {str(dt)[6:]:<8} {'torch einsum + roll':<28} {t*1e3:9.3f} "
                  f"{n**3/t/1e6:9.0f} {n**3*38*size/t/1e9:8.0f}")
            del f


if __name__ == "__main__":
    what = sys.argv[1] if len(sys.argv) > 1 else "transpose"
    if what == "sparse":
        sparse(sys.argv[2:])
    elif what == "lbm":
        lbm([int(x) for x in sys.argv[2:]] or [128, 256])
    else:
        transpose([int(x) for x in sys.argv[2:]] or [4096, 8192])
