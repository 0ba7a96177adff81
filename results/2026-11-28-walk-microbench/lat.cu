// Latencies that bound a pipelined triangular sweep on the H100:
// a hand-off between blocks through global memory and through a cluster's
// distributed shared memory, a cluster barrier, a block barrier.
#include <cooperative_groups.h>
#include <cstdio>
#include <cstdlib>
namespace cg = cooperative_groups;
#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("CUDA %s at %d\n", cudaGetErrorString(e), __LINE__); exit(1); } } while (0)

__device__ __forceinline__ long long ld_relaxed(const long long* p) {
    long long v;
    asm volatile("ld.relaxed.gpu.global.s64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
}
__device__ __forceinline__ void st_relaxed(long long* p, long long v) {
    asm volatile("st.relaxed.gpu.global.s64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

// block 0 and block gridDim.x-1 bounce a counter through global memory
__global__ void pingpong_global(long long* flag, int rounds) {
    if (threadIdx.x != 0) return;
    const bool first = blockIdx.x == 0;
    if (!first && blockIdx.x != gridDim.x - 1) return;
    for (int k = 0; k < rounds; ++k) {
        if (first) {
            st_relaxed(&flag[0], 2 * k + 1);
            while (ld_relaxed(&flag[32]) != 2 * k + 1) {}
        } else {
            while (ld_relaxed(&flag[0]) != 2 * k + 1) {}
            st_relaxed(&flag[32], 2 * k + 1);
        }
    }
}

// the same through the other block's shared memory, in a cluster of 2
__global__ void __cluster_dims__(2, 1, 1) pingpong_dsmem(int rounds, long long* out) {
    __shared__ volatile long long box;
    cg::cluster_group cl = cg::this_cluster();
    if (threadIdx.x == 0) box = 0;
    cl.sync();
    const unsigned me = cl.block_rank();
    volatile long long* other = (volatile long long*)cl.map_shared_rank((long long*)&box, me ^ 1);
    if (threadIdx.x == 0) {
        for (int k = 0; k < rounds; ++k) {
            if (me == 0) {
                *other = 2 * k + 1;
                while (box != 2 * k + 1) {}
            } else {
                while (box != 2 * k + 1) {}
                *other = 2 * k + 1;
            }
        }
        out[blockIdx.x] = box;
    }
    cl.sync();
}

template <int CL>
__global__ void cluster_barriers(int rounds, int* out) {
    cg::cluster_group cl = cg::this_cluster();
    int acc = 0;
    for (int k = 0; k < rounds; ++k) {
        acc += k;
        cl.sync();
    }
    if (acc == 7) out[0] = acc;
}

__global__ void block_barriers(int rounds, int* out) {
    int acc = 0;
    for (int k = 0; k < rounds; ++k) {
        acc += k;
        __syncthreads();
    }
    if (acc == 7) out[0] = acc;
}

template <typename F>
float timed(F f) {
    cudaEvent_t a, b;
    cudaEventCreate(&a); cudaEventCreate(&b);
    f();
    CK(cudaDeviceSynchronize());
    cudaEventRecord(a);
    f();
    cudaEventRecord(b);
    CK(cudaEventSynchronize(b));
    CK(cudaGetLastError());
    float t; cudaEventElapsedTime(&t, a, b);
    return t;
}

int main() {
    const int R = 20000;
    long long* flag; int* out; long long* lout;
    CK(cudaMalloc(&flag, 4096)); CK(cudaMalloc(&out, 64)); CK(cudaMalloc(&lout, 4096));
    for (int blocks : {2, 66, 132}) {
        float t = timed([&] { CK(cudaMemset(flag, 0, 4096)); pingpong_global<<<blocks, 32>>>(flag, R); });
        printf("global ping-pong (grid %d): %.3f us a one-way hand-off\n", blocks, 1e3 * t / (2.0 * R));
    }
    {
        float t = timed([&] { pingpong_dsmem<<<2, 32>>>(R, lout); });
        printf("cluster DSMEM ping-pong: %.3f us a one-way hand-off\n", 1e3 * t / (2.0 * R));
    }
    for (int threads : {128, 256, 512}) {
        float t = timed([&] { block_barriers<<<1, threads>>>(R, out); });
        printf("__syncthreads, %d threads: %.3f us each\n", threads, 1e3 * t / R);
    }
    for (int threads : {128, 512}) {
        {
            cudaLaunchConfig_t cfg = {};
            cudaLaunchAttribute at[1];
            at[0].id = cudaLaunchAttributeClusterDimension;
            at[0].val.clusterDim.x = 8; at[0].val.clusterDim.y = 1; at[0].val.clusterDim.z = 1;
            cfg.gridDim = 8; cfg.blockDim = threads; cfg.attrs = at; cfg.numAttrs = 1;
            float t = timed([&] { CK(cudaLaunchKernelEx(&cfg, cluster_barriers<8>, R, out)); });
            printf("cluster.sync, cluster of 8 x %d threads: %.3f us each\n", threads, 1e3 * t / R);
        }
        {
            cudaLaunchConfig_t cfg = {};
            cudaLaunchAttribute at[1];
            at[0].id = cudaLaunchAttributeClusterDimension;
            at[0].val.clusterDim.x = 2; at[0].val.clusterDim.y = 1; at[0].val.clusterDim.z = 1;
            cfg.gridDim = 2; cfg.blockDim = threads; cfg.attrs = at; cfg.numAttrs = 1;
            float t = timed([&] { CK(cudaLaunchKernelEx(&cfg, cluster_barriers<2>, R, out)); });
            printf("cluster.sync, cluster of 2 x %d threads: %.3f us each\n", threads, 1e3 * t / R);
        }
    }
    return 0;
}
