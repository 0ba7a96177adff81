"""Peers timed on the same GPU as `fegpu bench`: what a user would pick instead.

    python3 bench/peers.py transpose [N ...]

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


if __name__ == "__main__":
    what = sys.argv[1] if len(sys.argv) > 1 else "transpose"
    sizes = [int(x) for x in sys.argv[2:]] or [4096, 8192]
    {"transpose": transpose}[what](sizes)
