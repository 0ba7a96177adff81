#!/usr/bin/env python3
"""The scaling model of a distributed CG iteration (Jacobi, 7-point
operator) in BENCHMARKS.md: per-iteration time on P GPUs as compute +
halo exchange + two global reductions, from inputs measured on the H100
(results/2026-11-24-h100-dist-ebe-mps-bench.txt) and link figures taken from
the vendors' specifications (marked "assumed"). Prints the markdown tables.

    T(P) = c N/P + [host loop] + halo(b) + 2 allreduce(P)

b: halo bytes each way per product: 2 faces of a slab below 8 ranks, 6
faces of a cubic block of N/P rows from 8 on.
"""
import math

# measured here (H100, fegpu bench dist, 2026-11-24)
C_ROW = 0.165e-3 / 2097152   # s per row: one-process CG iteration, 128^3
HOST_LOOP = 0.055e-3         # the distributed loop on the host (1 rank: 0.22 vs 0.165 ms)
STAGE_LATENCY = 60e-6        # halo through host buffers: syncs, D2H, MPI, H2D (2 ranks under MPS)
HOST_COPY = 20e9             # B/s of each staging copy
ALLREDUCE_NODE = 0.7e-6      # s per doubling of ranks, host MPI within the node (0.71 us @ 2, 1.38 @ 4)
# assumed (vendors' figures; not measured here)
ALLREDUCE_IB = 2.0e-6        # s per doubling across nodes, MPI over InfiniBand NDR
NVLINK = 450e9               # B/s per direction per H100 SXM (NVLink 4)
IB = 50e9                    # B/s per GPU (one 400 Gb/s NDR port per GPU)
DIRECT_LATENCY = {"nvlink": 8e-6, "ib": 10e-6}  # NCCL / CUDA-aware point-to-point, small messages
GPUS_PER_NODE = 8


def allreduce(p):
    if p == 1:
        return 0.0
    inside = min(p, GPUS_PER_NODE)
    nodes = max(1, p // GPUS_PER_NODE)
    return ALLREDUCE_NODE * math.log2(inside) + ALLREDUCE_IB * math.log2(nodes)


def halo_bytes(rows, p):
    if p < GPUS_PER_NODE:
        return 2 * rows ** (2 / 3) * 8
    side = rows ** (1 / 3)
    return 6 * side * side * 8


def iteration(p, n, path):
    """Seconds per CG iteration on p GPUs for n rows; path: 'host' (today:
    host staging and the host-driven loop) or 'direct' (device buffers over
    NCCL / CUDA-aware MPI and the scalars kept on the device)."""
    rows = n / p
    t = C_ROW * rows
    if p == 1:
        return t
    b = halo_bytes(rows, p)
    link = NVLINK if p <= GPUS_PER_NODE else IB
    if path == "host":
        t += HOST_LOOP + STAGE_LATENCY + 2 * b / HOST_COPY + b / link
    else:
        t += DIRECT_LATENCY["nvlink" if p <= GPUS_PER_NODE else "ib"] + b / link
    return t + 2 * allreduce(p)


def main():
    print("Weak scaling, 128^3 rows (2,097,152) per GPU:\n")
    print("| GPUs | halo KB each way | host staging: ms / iteration | efficiency | device-direct: ms / iteration | efficiency |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: |")
    one = iteration(1, 2097152, "host")
    for p in [1, 2, 8, 64, 512, 1024]:
        n = 2097152 * p
        h, d = iteration(p, n, "host"), iteration(p, n, "direct")
        kb = 0 if p == 1 else halo_bytes(n / p, p) / 1e3
        print(f"| {p} | {kb:.0f} | {h * 1e3:.3f} | {100 * one / h:.0f}% | {d * 1e3:.3f} | {100 * one / d:.0f}% |")
    print("\nStrong scaling, 1024^3 rows (1.07e9), from 8 GPUs (one node):\n")
    print("| GPUs | rows per GPU | host staging: ms / iteration | speed-up over 8 | device-direct: ms / iteration | speed-up over 8 |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: |")
    n = 1024 ** 3
    base = {k: iteration(8, n, k) for k in ("host", "direct")}
    for p in [8, 64, 512, 1024]:
        h, d = iteration(p, n, "host"), iteration(p, n, "direct")
        print(f"| {p} | {n // p:,} | {h * 1e3:.3f} | {base['host'] / h:.1f} | {d * 1e3:.3f} | {base['direct'] / d:.1f} |")
    shared = C_ROW * 2097152 + HOST_LOOP + STAGE_LATENCY + 2 * halo_bytes(2097152 / 2, 2) / HOST_COPY + 2 * allreduce(2)
    print(f"\nCheck: 2 ranks sharing one GPU under MPS (the compute not divided): {shared * 1e3:.3f} ms predicted")


if __name__ == "__main__":
    main()
