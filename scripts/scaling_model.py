#!/usr/bin/env python3
"""The scaling model of a distributed CG iteration (Jacobi, 7-point
operator) in BENCHMARKS.md, fitted to the runs on 4 x H100 SXM (NVLink NV18)
of 2026-11-27 (results/2026-11-27-h100x4-dist-*.txt). Prints the markdown
tables: the fit against every run made, then predictions.

Within a node (the device-direct path: CUDA IPC, sums on the device):

    T(P) = c N/P + split + sync(P),   sync(P) = a + s log2(P)  (P > 1)

c: one-process time per row; split: what the distributed iteration costs
beyond it on one rank (its extra launches); sync: the halo exchange, the
two device-side sums and the waits for the slowest rank, fitted to the
weak-scaling runs at P = 2 and 4. The host-staged path instead adds
host + b / host_rate, b the halo bytes each way of the busiest rank.
Across nodes (assumed, vendors' figures: nothing here spans nodes) a
device-direct message over InfiniBand and an allreduce doubling across
nodes are added.
"""
import math

# measured (fegpu bench dist, 4 x H100, 2026-11-27)
C_ROW = 0.1625e-3 / 2097152   # s per row: one-process CG iteration, 128^3
SPLIT = 0.0148e-3             # distributed on 1 rank minus one process, 128^3 (0.1773 - 0.1625 ms)
SPLIT_256 = 0.0061e-3         # the same at 256^3 (1.2799 - 1.2766, 1.2841 - 1.2752 ms)
SYNC_A, SYNC_S = 5.2e-6, 13.2e-6  # sync(2) = 18.5 us, sync(4) = 31.7 us (weak 128^3: 0.1958, 0.2095 vs 0.1773 ms)
HOST_FIXED, HOST_RATE = 11e-6, 2.07e9  # host-staged halo: 256^3 on 2 and 4 ranks (+0.264, +0.517 ms)
# assumed (vendors' figures; not measured here)
GPUS_PER_NODE = 8
IB = 50e9                     # B/s per GPU (one 400 Gb/s NDR port per GPU)
IB_MESSAGE = 10e-6            # s, a device-direct small message across nodes (NCCL)
ALLREDUCE_IB = 2.0e-6         # s per doubling of nodes


def halo_bytes(rows, p):
    """Bytes each way of the busiest rank: slabs (two faces, one with 2
    ranks) below 8 ranks, a cubic block's six faces from 8 on."""
    if p == 1:
        return 0.0
    if p < GPUS_PER_NODE:
        return (1 if p == 2 else 2) * rows ** (2 / 3) * 8
    side = rows ** (1 / 3)
    return 6 * side * side * 8


def sync(p):
    if p == 1:
        return 0.0
    inside = min(p, GPUS_PER_NODE)
    t = SYNC_A + SYNC_S * math.log2(inside)
    nodes = p // GPUS_PER_NODE
    if nodes > 1:
        t += IB_MESSAGE + 2 * ALLREDUCE_IB * math.log2(nodes)
    return t


def iteration(p, n, path="direct", rows_face=None):
    rows = n / p
    t = C_ROW * rows + SPLIT
    if p == 1:
        return t
    b = halo_bytes(rows_face or rows, p)
    if path == "host":
        return t + HOST_FIXED + b / HOST_RATE
    if p > GPUS_PER_NODE:
        t += b / IB
    return t + sync(p)


def main():
    cube = lambda n: n ** 3
    print("Fit against the runs (ms per iteration):\n")
    print("| run | GPUs | measured | model | model / measured |")
    print("| --- | ---: | ---: | ---: | ---: |")
    runs = [
        ("weak 128^3 a GPU", 1, 2097152, "direct", None, 0.1773),
        ("weak 128^3 a GPU", 2, 2 * 2097152, "direct", 2097152, 0.1958),
        ("weak 128^3 a GPU", 4, 4 * 2097152, "direct", 2097152, 0.2095),
        ("strong 256^3", 2, cube(256), "direct", cube(256), 0.6720),
        ("strong 256^3", 4, cube(256), "direct", cube(256), 0.3679),
        ("strong 256^3, host-staged", 2, cube(256), "host", cube(256), 0.894),
        ("strong 256^3, host-staged", 4, cube(256), "host", cube(256), 0.814),
    ]
    for name, p, n, path, face, measured in runs:
        # slabs of a cube of `face` rows: a face is face^(2/3) rows whatever P
        m = iteration(p, n, path, rows_face=face)
        print(f"| {name} | {p} | {measured:.4f} | {m * 1e3:.4f} | {m * 1e3 / measured:.2f} |")
    print("\nPredicted, one node (8 GPUs), against the one-process iteration:\n")
    print("| case | one process, ms | 8 GPUs, ms | speed-up / efficiency |")
    print("| --- | ---: | ---: | ---: |")
    one = 1.2766e-3  # measured: the one-process iteration at 256^3 (c there is 2% below 128^3's)
    t8 = iteration(8, cube(256), rows_face=cube(256)) - C_ROW * cube(256) / 8 + one / 8
    print(f"| CG strong 256^3 (slabs) | {one * 1e3:.4f} | {t8 * 1e3:.4f} | {one / t8:.2f}x |")
    # the split term measured at 256^3 (1 rank: +3.3 and +8.9 us in two runs) instead of 128^3's 14.8
    t8_256 = t8 - SPLIT + SPLIT_256
    print(f"| same, split as measured at 256^3 | {one * 1e3:.4f} | {t8_256 * 1e3:.4f} | {one / t8_256:.2f}x |")
    t8w = iteration(8, 8 * 2097152, rows_face=2097152)
    print(f"| CG weak 128^3 a GPU | {C_ROW * 2097152 * 1e3:.4f} | {t8w * 1e3:.4f} | {100 * C_ROW * 2097152 / t8w:.0f}% |")
    print("\nWeak scaling, 128^3 rows a GPU, device-direct, beyond one node (assumed link terms):\n")
    print("| GPUs | halo KB each way | ms / iteration | efficiency |")
    print("| ---: | ---: | ---: | ---: |")
    base = C_ROW * 2097152
    for p in [1, 2, 4, 8, 64, 512, 1024]:
        t = iteration(p, 2097152 * p, rows_face=2097152)
        print(f"| {p} | {halo_bytes(2097152, p) / 1e3:.0f} | {t * 1e3:.4f} | {100 * base / t:.0f}% |")
    print("\nStrong scaling, 1024^3 rows, device-direct, from 8 GPUs (one node):\n")
    print("| GPUs | rows a GPU | ms / iteration | speed-up over 8 |")
    print("| ---: | ---: | ---: | ---: |")
    n = 1024 ** 3
    t8 = iteration(8, n)
    for p in [8, 64, 512, 1024]:
        t = iteration(p, n)
        print(f"| {p} | {n // p:,} | {t * 1e3:.3f} | {t8 / t:.1f} |")


if __name__ == "__main__":
    main()
