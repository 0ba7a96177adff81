// Kernel harness for f16's in-place steps two sites a thread
// (kernels/lbm.cu lbm_pairs_*) on the GPU machine: checked against the
// one-site kernels after 4 steps from one random start, on boxes periodic
// or not, with and without 3% random walls (the one-site fallbacks), at
// several block sizes, then timed at 256^3 beside them. LAB_PROFILE=1 runs
// one step pair of each at 256^3, for ncu. LAB_F32=1 and LAB_F32_BOUNDS=1:
// f32's index widths and launch bounds. LAB_PDL=1: overlapped (programmatic
// dependent) launches against plain ones, f16, f32 and f64, checked and
// timed at 128^3 to 512^3; built with -DLAB_PAD=P against a copy of the
// kernel file whose n is patched to nx ny nz + P, the directions' stride
// padded (results/2026-11-25-h100-lbm-overlapped-launches.txt).
//   nvcc -O3 -arch=sm_90 -DLBM_FILE='"../kernels/lbm.cu"' scripts/lbm_lab_pairs.cu -o lab && ./lab
#include LBM_FILE
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#include <algorithm>
#include <string>
#include <cmath>
#include <cuda_fp16.h>
#include <type_traits>

// Launch-bound experiments for f32's steps (LAB_F32_BOUNDS=1).
#define LAB_ARGS32 float* f, const unsigned char* flags, int nx, int ny, int nz, int periodic, float omega,      \
    float omega_minus, float fx, float fy, float fz, float uwx, float uwy, float uwz, i64 first, i64 count,      \
    const unsigned* open_sites, const double* open_table, int open_count
#define LAB_PASS32 f, flags, nx, ny, nz, periodic, omega, omega_minus, fx, fy, fz, uwx, uwy, uwz, first, count,    \
    open_sites, open_table, open_count
extern "C" __global__ void __launch_bounds__(256, 4) lab_even32_b4(LAB_ARGS32) {
    stream_in_place<IN_PLACE_EVEN, false, float, float, false, unsigned>(LAB_PASS32);
}
extern "C" __global__ void __launch_bounds__(256, 2) lab_odd32_b2(LAB_ARGS32) {
    stream_in_place<IN_PLACE_ODD, false, float, float, false, unsigned>(LAB_PASS32);
}
extern "C" __global__ void __launch_bounds__(256, 2) lab_even32_b2(LAB_ARGS32) {
    stream_in_place<IN_PLACE_EVEN, false, float, float, false, unsigned>(LAB_PASS32);
}

// Programmatic dependent launch (LAB_PDL=1): each step waits for the one
// before it (griddepcontrol.wait) and lets the next launch once all its
// blocks have started, so the next grid's blocks are resident when the tail
// of this one drains.
__device__ __forceinline__ void lab_pdl_enter() {
    asm volatile("griddepcontrol.wait;" ::: "memory");
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
}
extern "C" __global__ void __launch_bounds__(256, 3) lab_pdl_even32(LAB_ARGS32) {
    lab_pdl_enter();
    stream_in_place<IN_PLACE_EVEN, false, float, float, false, unsigned>(LAB_PASS32);
}
extern "C" __global__ void __launch_bounds__(256, 3) lab_pdl_odd32(LAB_ARGS32) {
    lab_pdl_enter();
    stream_in_place<IN_PLACE_ODD, false, float, float, false, unsigned>(LAB_PASS32);
}
#define LAB_ARGS16 half_bits* f, const unsigned char* flags, int nx, int ny, int nz, int periodic, float omega,   \
    float omega_minus, float fx, float fy, float fz, float uwx, float uwy, float uwz, i64 first, i64 count,      \
    const unsigned* open_sites, const double* open_table, int open_count
extern "C" __global__ void __launch_bounds__(128, 5) lab_pdl_pairs_even16(LAB_ARGS16) {
    lab_pdl_enter();
    even_in_place_pairs<false, false, i64>(LAB_PASS32);
}
extern "C" __global__ void __launch_bounds__(128, 6) lab_pdl_pairs_odd16(LAB_ARGS16) {
    lab_pdl_enter();
    odd_in_place_pairs<false, false, unsigned>(LAB_PASS32);
}
extern "C" __global__ void __launch_bounds__(256, 2) lab_pdl_even64(double* f, const unsigned char* flags, int nx,
    int ny, int nz, int periodic, double omega, double omega_minus, double fx, double fy, double fz, double uwx,
    double uwy, double uwz, i64 first, i64 count, const unsigned* open_sites, const double* open_table, int open_count) {
    lab_pdl_enter();
    stream_in_place<IN_PLACE_EVEN, false, double, double, false, i64>(LAB_PASS32);
}
extern "C" __global__ void __launch_bounds__(256, 2) lab_pdl_odd64(double* f, const unsigned char* flags, int nx,
    int ny, int nz, int periodic, double omega, double omega_minus, double fx, double fy, double fz, double uwx,
    double uwy, double uwz, i64 first, i64 count, const unsigned* open_sites, const double* open_table, int open_count) {
    lab_pdl_enter();
    stream_in_place<IN_PLACE_ODD, false, double, double, false, i64>(LAB_PASS32);
}
#ifndef LAB_PAD
#define LAB_PAD 0  // elements between directions (the kernel file's n patched to match: LAB_PAD runs only)
#endif

#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("CUDA %s at %d\n", cudaGetErrorString(e), __LINE__); exit(1);} } while (0)

struct Lat { int nx, ny, nz, per; unsigned n; unsigned char* flags; void* f; };

template <typename T> Lat make(int nx, int ny, int nz, int per, double walls) {
    Lat L{nx, ny, nz, per, (unsigned)nx * ny * nz, nullptr, nullptr};
    CK(cudaMalloc(&L.f, (size_t)19 * (L.n + LAB_PAD) * sizeof(T)));
    CK(cudaMalloc(&L.flags, L.n));
    std::vector<unsigned char> h(L.n, 0);
    srand(3);
    for (auto& c : h) if (rand() < walls * RAND_MAX) c = 1;
    CK(cudaMemcpy(L.flags, h.data(), L.n, cudaMemcpyHostToDevice));
    lbm_mark_bulk<<<(L.n + 255) / 256, 256>>>(L.flags, nx, ny, nz, per);
    CK(cudaDeviceSynchronize());
    return L;
}
void drop(Lat& L) { CK(cudaFree(L.f)); CK(cudaFree(L.flags)); }

template <typename T> void init(Lat& L) {
    std::vector<T> h((size_t)19 * L.n);
    srand(7);
    for (size_t k = 0; k < h.size(); ++k) {
        float r = (rand() / (float)RAND_MAX - 0.5f) * 0.01f;
        if (sizeof(T) == 2) { __half hv = __float2half(r); memcpy(&h[k], &hv, 2); }
        else {
            int i = k / L.n; float w = i == 0 ? 1.f/3 : (i <= 3 || (i >= 10 && i <= 12)) ? 1.f/18 : 1.f/36; float v = w + r * w;
            if (sizeof(T) == 8) { double d = v; memcpy(&h[k], &d, 8); } else memcpy(&h[k], &v, 4);
        }
    }
    CK(cudaMemcpy(L.f, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice));
}

// a step: kernel, threads a block, sites a thread
struct Step { void* k; int block; int per_thread; bool pdl = false; };
struct Variant { std::string name; Step even, odd; };

template <typename T> void launch(Lat& L, const Step& s, cudaStream_t st) {
    typedef typename std::conditional<sizeof(T) == 8, double, float>::type R;
    R om = 1.2f, omm = 1.0f, z = 0, fx = 1e-5f;  // (the unforced kernels ignore fx)
    i64 first = 0, count = L.n;
    const unsigned* os = nullptr; const double* ot = nullptr; int oc = 0;
    T* f = (T*)L.f;
    void* args[] = {&f, &L.flags, &L.nx, &L.ny, &L.nz, &L.per, &om, &omm, &fx, &z, &z, &z, &z, &z, &first, &count, &os, &ot, &oc};
    const unsigned threads = (L.n + s.per_thread - 1) / s.per_thread;
    if (!s.pdl) {
        CK(cudaLaunchKernel(s.k, dim3((threads + s.block - 1) / s.block), dim3(s.block), args, 0, st));
        return;
    }
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3((threads + s.block - 1) / s.block);
    cfg.blockDim = dim3(s.block);
    cfg.stream = st;
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    CK(cudaLaunchKernelExC(&cfg, s.k, args));
}

template <typename T> std::vector<float> run4(Lat& L, const Variant& v) {
    init<T>(L);
    for (int k = 0; k < 4; ++k) launch<T>(L, k & 1 ? v.odd : v.even, 0);
    CK(cudaDeviceSynchronize());
    CK(cudaGetLastError());
    std::vector<T> h((size_t)19 * L.n);
    CK(cudaMemcpy(h.data(), L.f, h.size() * sizeof(T), cudaMemcpyDeviceToHost));
    std::vector<float> out(h.size());
    for (size_t k = 0; k < h.size(); ++k) {
        if (sizeof(T) == 2) { __half hv; memcpy(&hv, &h[k], 2); out[k] = __half2float(hv); }
        else if (sizeof(T) == 8) { double d; memcpy(&d, &h[k], 8); out[k] = (float)d; }
        else memcpy(&out[k], &h[k], 4);
    }
    return out;
}

template <typename T> void check(const std::vector<Variant>& vs, int nx, int ny, int nz, int per, double walls) {
    Lat L = make<T>(nx, ny, nz, per, walls);
    auto ref = run4<T>(L, vs[0]);
    for (size_t j = 1; j < vs.size(); ++j) {
        auto got = run4<T>(L, vs[j]);
        size_t differ = 0; double worst = 0;
        for (size_t k = 0; k < ref.size(); ++k)
            if (!(got[k] == ref[k])) { ++differ; worst = std::max(worst, (double)std::fabs(got[k] - ref[k])); }
        printf("check %-28s %dx%dx%d periodic %d walls %.0f%%: %zu of %zu differ, max %.3g  %s\n", vs[j].name.c_str(), nx, ny, nz,
               per, walls * 100, differ, ref.size(), worst, differ == 0 ? "IDENTICAL" : "DIFFER");
    }
    drop(L);
}

template <typename T> void timing(const std::vector<Variant>& vs, int N, double copy, double bytes_site) {
    Lat L = make<T>(N, N, N, 7, 0);
    init<T>(L);
    cudaStream_t st; CK(cudaStreamCreate(&st));
    cudaEvent_t a, b; CK(cudaEventCreate(&a)); CK(cudaEventCreate(&b));
    for (int round = 0; round < 2; ++round)
        for (auto& v : vs) {
            for (int k = 0; k < 4; ++k) launch<T>(L, k & 1 ? v.odd : v.even, st);
            std::vector<double> ts, te, to; float ms;
            for (int r = 0; r < 5; ++r) {
                CK(cudaEventRecord(a, st)); for (int k = 0; k < 20; ++k) launch<T>(L, k & 1 ? v.odd : v.even, st); CK(cudaEventRecord(b, st));
                CK(cudaEventSynchronize(b)); CK(cudaEventElapsedTime(&ms, a, b)); ts.push_back(ms);
                CK(cudaEventRecord(a, st)); for (int k = 0; k < 10; ++k) launch<T>(L, v.even, st); CK(cudaEventRecord(b, st));
                CK(cudaEventSynchronize(b)); CK(cudaEventElapsedTime(&ms, a, b)); te.push_back(ms);
                CK(cudaEventRecord(a, st)); for (int k = 0; k < 10; ++k) launch<T>(L, v.odd, st); CK(cudaEventRecord(b, st));
                CK(cudaEventSynchronize(b)); CK(cudaEventElapsedTime(&ms, a, b)); to.push_back(ms);
            }
            std::sort(ts.begin(), ts.end()); std::sort(te.begin(), te.end()); std::sort(to.begin(), to.end());
            const double m = 20.0 * L.n / (ts[2] * 1e-3) / 1e6, me = 10.0 * L.n / (te[2] * 1e-3) / 1e6, mo = 10.0 * L.n / (to[2] * 1e-3) / 1e6;
            printf("round %d %-28s %d^3 %8.0f MLUPS %5.1f%% of copy  (even %8.0f  odd %8.0f)\n", round, v.name.c_str(), N, m,
                   100 * m * 1e6 * bytes_site / (copy * 1e9), me, mo);
        }
    CK(cudaStreamDestroy(st));
    drop(L);
}

int main() {
    const Step e16{(void*)lbm_even_unforced_f16, 128, 1}, o16{(void*)lbm_odd_unforced_f16, 256, 1};
    const Step pe16{(void*)lbm_pairs_even_unforced_f16, 64, 2}, po16{(void*)lbm_pairs_odd_unforced_f16, 128, 2};
    if (getenv("LAB_PROFILE")) {
        Lat L = make<half_bits>(256, 256, 256, 7, 0);
        init<half_bits>(L);
        for (auto& v : std::vector<Variant>{{"one site", e16, o16}, {"pairs", pe16, po16}})
            for (int k = 0; k < 2; ++k) launch<half_bits>(L, k & 1 ? v.odd : v.even, 0);
        CK(cudaDeviceSynchronize());
        return 0;
    }
    size_t cb = (size_t)1 << 30; void *a, *b; CK(cudaMalloc(&a, cb)); CK(cudaMalloc(&b, cb));
    cudaEvent_t e0, e1; cudaEventCreate(&e0); cudaEventCreate(&e1);
    for (int k = 0; k < 3; ++k) CK(cudaMemcpy(b, a, cb, cudaMemcpyDeviceToDevice));
    std::vector<double> cs;
    for (int r = 0; r < 5; ++r) { cudaEventRecord(e0); for (int k = 0; k < 5; ++k) cudaMemcpyAsync(b, a, cb, cudaMemcpyDeviceToDevice); cudaEventRecord(e1); cudaEventSynchronize(e1); float ms; cudaEventElapsedTime(&ms, e0, e1); cs.push_back(2.0 * 5 * cb / (ms * 1e-3) / 1e9); }
    std::sort(cs.begin(), cs.end()); const double copy = cs[2];
    printf("copy ceiling %.0f GB/s\n", copy);
    cudaFree(a); cudaFree(b);
    const Step po32{(void*)lbm_pairs32_odd_unforced_f16, 128, 2};
    const std::vector<Variant> v16 = {
        {"f16 one site 128/256", e16, o16},
        {"f16 pairs 64/128", pe16, po16},
        {"f16 pairs 64/128, odd 32-bit", pe16, po32},
        {"f16 pairs 64/64", pe16, {po16.k, 64, 2}},
        {"f16 pairs 32/32", {pe16.k, 32, 2}, {po16.k, 32, 2}},
        {"f16 pairs 32/96, odd 32-bit", {pe16.k, 32, 2}, {po32.k, 96, 2}},
    };
    const std::vector<Variant> v16f = {  // TRT with a force, the widest collision
        {"f16 TRT+F one site 128/256", {(void*)lbm_even_trt_f16, 128, 1}, {(void*)lbm_odd_trt_f16, 256, 1}},
        {"f16 TRT+F pairs 64/128", {(void*)lbm_pairs_even_trt_f16, 64, 2}, {(void*)lbm_pairs_odd_trt_f16, 128, 2}},
        {"f16 TRT+F pairs 32/32", {(void*)lbm_pairs_even_trt_f16, 32, 2}, {(void*)lbm_pairs_odd_trt_f16, 32, 2}},
        {"f16 TRT+F pairs 64/128, odd 32-bit", {(void*)lbm_pairs_even_trt_f16, 64, 2}, {(void*)lbm_pairs32_odd_trt_f16, 128, 2}},
    };
    if (getenv("LAB_SIZE")) {  // timing only, at LAB_SIZE^3
        const int N = atoi(getenv("LAB_SIZE"));
        timing<half_bits>({v16[0], v16[1], v16[2], v16[3]}, N, copy, 2.0 * 19 * 2 + 1);
        return 0;
    }
    const std::vector<Variant> v32 = {  // f32: 64-bit against 32-bit indices
        {"f32 one site 256/256", {(void*)lbm_even_unforced_f32, 256, 1}, {(void*)lbm_odd_unforced_f32, 256, 1}},
        {"f32 32-bit indices 256/256", {(void*)lbm_even32_unforced_f32, 256, 1}, {(void*)lbm_odd32_unforced_f32, 256, 1}},
        {"f32 TRT+F 32-bit indices", {(void*)lbm_even32_trt_f32, 256, 1}, {(void*)lbm_odd32_trt_f32, 256, 1}},
    };
    const std::vector<Variant> v32f = {
        {"f32 TRT+F one site", {(void*)lbm_even_trt_f32, 256, 1}, {(void*)lbm_odd_trt_f32, 256, 1}},
        {"f32 TRT+F 32-bit indices", {(void*)lbm_even32_trt_f32, 256, 1}, {(void*)lbm_odd32_trt_f32, 256, 1}},
    };
    if (getenv("LAB_PDL")) {  // programmatic dependent launch against plain launches; LAB_PAD: f32 only
        const Step e32{(void*)lbm_even32_unforced_f32, 256, 1}, o32{(void*)lbm_odd32_unforced_f32, 256, 1};
        const Variant f32{"f32 32-bit", e32, o32}, f32p{"f32 32-bit PDL", {(void*)lab_pdl_even32, 256, 1, true}, {(void*)lab_pdl_odd32, 256, 1, true}};
        if (LAB_PAD) {
            printf("directions LAB_PAD = %d elements apart beyond n\n", LAB_PAD);
            for (int N : {256, 128}) timing<float>({f32, f32p}, N, copy, 2.0 * 19 * 4 + 1);
            return 0;
        }
        const Variant f16{"f16 pairs 64/128", pe16, {(void*)lbm_pairs32_odd_unforced_f16, 128, 2}};
        const Variant f16p{"f16 pairs PDL", {(void*)lab_pdl_pairs_even16, 64, 2, true}, {(void*)lab_pdl_pairs_odd16, 128, 2, true}};
        const Variant f64{"f64", {(void*)lbm_even_unforced_f64, 256, 1}, {(void*)lbm_odd_unforced_f64, 256, 1}};
        const Variant f64p{"f64 PDL", {(void*)lab_pdl_even64, 256, 1, true}, {(void*)lab_pdl_odd64, 256, 1, true}};
        for (auto shape : {std::vector<int>{128, 128, 128, 7}, std::vector<int>{37, 20, 18, 6}})
            for (double walls : {0.0, 0.03}) {
                check<float>({f32, f32p}, shape[0], shape[1], shape[2], shape[3], walls);
                if (shape[0] % 2 == 0) check<half_bits>({f16, f16p}, shape[0], shape[1], shape[2], shape[3], walls);
                check<double>({f64, f64p}, shape[0], shape[1], shape[2], shape[3], walls);
            }
        for (int N : {256, 128}) {
            timing<float>({f32, f32p}, N, copy, 2.0 * 19 * 4 + 1);
            timing<half_bits>({f16, f16p}, N, copy, 2.0 * 19 * 2 + 1);
            timing<double>({f64, f64p}, N, copy, 2.0 * 19 * 8 + 1);
        }
        timing<float>({f32, f32p}, 512, copy, 2.0 * 19 * 4 + 1);
        return 0;
    }
    if (getenv("LAB_F32_BOUNDS")) {
        const Step e32{(void*)lbm_even32_unforced_f32, 256, 1}, o32{(void*)lbm_odd32_unforced_f32, 256, 1};
        timing<float>({{"f32 32-bit (256,3)/(256,3)", e32, o32},
                       {"f32 even (256,4)", {(void*)lab_even32_b4, 256, 1}, o32},
                       {"f32 even (256,2)", {(void*)lab_even32_b2, 256, 1}, o32},
                       {"f32 odd (256,2)", e32, {(void*)lab_odd32_b2, 256, 1}},
                       {"f32 even 64-bit", {(void*)lbm_even_unforced_f32, 256, 1}, o32},
                       {"f32 odd 128 threads", e32, {o32.k, 128, 1}},
                       {"f32 even 128 threads", {e32.k, 128, 1}, o32}}, 256, copy, 2.0 * 19 * 4 + 1);
        return 0;
    }
    if (getenv("LAB_F32")) {
        for (auto shape : {std::vector<int>{64, 64, 64, 7}, std::vector<int>{37, 20, 18, 6}})
            for (double walls : {0.0, 0.03}) {
                check<float>({v32[0], v32[1]}, shape[0], shape[1], shape[2], shape[3], walls);
                check<float>(v32f, shape[0], shape[1], shape[2], shape[3], walls);
            }
        timing<float>({v32[0], v32[1]}, 256, copy, 2.0 * 19 * 4 + 1);
        timing<float>({v32[0], v32[1]}, 128, copy, 2.0 * 19 * 4 + 1);
        return 0;
    }
    for (auto shape : {std::vector<int>{64, 64, 64, 7}, std::vector<int>{64, 64, 64, 5}, std::vector<int>{48, 40, 36, 7}, std::vector<int>{37, 20, 18, 6}, std::vector<int>{256, 12, 10, 7}, std::vector<int>{256, 12, 10, 6}}) {
        for (double walls : {0.0, 0.03}) {
            check<half_bits>(v16, shape[0], shape[1], shape[2], shape[3], walls);
            check<half_bits>(v16f, shape[0], shape[1], shape[2], shape[3], walls);
        }
    }
    timing<half_bits>({v16[0], v16[1], v16[2]}, 256, copy, 2.0 * 19 * 2 + 1);
    timing<half_bits>({v16f[0], v16f[1], v16f[3]}, 256, copy, 2.0 * 19 * 2 + 1);
    return 0;
}
