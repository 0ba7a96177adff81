// A kernel-level A/B harness for kernels/lbm.cu on the GPU machine (which
// has nvcc; fegpu itself compiles the kernels with NVRTC): the in-place
// steps (BGK, TRT, forced) at several even/odd block sizes and the pull
// step, on a periodic 256^3 box, MLUPS against the copy ceiling measured in
// the same run, even and odd steps also timed apart; and each variant's
// populations after 4 steps from one random start on a 64^3 box, dumped
// (pops_<tag>_<storage>_<variant>.bin) so two kernel files can be compared
// (results/2026-11-24-h100-lbm-zero-terms-lab.txt). LAB_QUICK=1 times only
// the main block sizes:
//   nvcc -O3 -arch=sm_90 -DLBM_FILE='"../kernels/lbm.cu"' scripts/lbm_lab.cu -o lab && ./lab new [f32only]
#include LBM_FILE
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <algorithm>
#include <cstring>
#include <string>
#include <cuda_fp16.h>

#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("CUDA %s at %d\n", cudaGetErrorString(e), __LINE__); exit(1);} } while (0)

typedef void (*K16)(half_bits*, const unsigned char*, int, int, int, int, float, float, float, float, float, float, float, float, i64, i64, const unsigned*, const double*, int);
typedef void (*K32)(float*, const unsigned char*, int, int, int, int, float, float, float, float, float, float, float, float, i64, i64, const unsigned*, const double*, int);
typedef void (*P16)(const half_bits*, half_bits*, const unsigned char*, int, int, int, int, float, float, float, float, float, float, float, float, i64, i64, const unsigned*, const double*, int);
typedef void (*P32)(const float*, float*, const unsigned char*, int, int, int, int, float, float, float, float, float, float, float, float, i64, i64, const unsigned*, const double*, int);

template <typename T> struct Kern;
template <> struct Kern<half_bits> {
    static void* even(int v) { return v == 0 ? (void*)lbm_even_unforced_f16 : v == 1 ? (void*)lbm_even_unforced_trt_f16 : (void*)lbm_even_f16; }
    static void* odd(int v) { return v == 0 ? (void*)lbm_odd_unforced_f16 : v == 1 ? (void*)lbm_odd_unforced_trt_f16 : (void*)lbm_odd_f16; }
    static void* pull() { return (void*)lbm_pull_unforced_f16; }
    static const char* name() { return "f16"; }
};
template <> struct Kern<float> {
    static void* even(int v) { return v == 0 ? (void*)lbm_even_unforced_f32 : v == 1 ? (void*)lbm_even_unforced_trt_f32 : (void*)lbm_even_f32; }
    static void* odd(int v) { return v == 0 ? (void*)lbm_odd_unforced_f32 : v == 1 ? (void*)lbm_odd_unforced_trt_f32 : (void*)lbm_odd_f32; }
    static void* pull() { return (void*)lbm_pull_unforced_f32; }
    static const char* name() { return "f32"; }
};

struct Lat { int N; unsigned n; unsigned char* flags; void* f; void* g; };

template <typename T>
void init(Lat& L, unsigned seed) {
    std::vector<T> h((size_t)19 * L.n);
    srand(seed);
    for (size_t k = 0; k < h.size(); ++k) {
        float r = (rand() / (float)RAND_MAX - 0.5f) * 0.01f;
        if (sizeof(T) == 2) { __half hv = __float2half(r); memcpy(&h[k], &hv, 2); }
        else { int i = k / L.n; float w = i == 0 ? 1.f/3 : (i <= 3 || (i >= 10 && i <= 12)) ? 1.f/18 : 1.f/36; float v = w + r * w; memcpy(&h[k], &v, 4); }
    }
    CK(cudaMemcpy(L.f, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice));
}

// variant 0 BGK unforced, 1 TRT unforced, 2 BGK with a force
template <typename T>
void inplace(Lat& L, int pass, int block, int variant, cudaStream_t st) {
    float om = 1.2f, omm = 1.0f / (3.0f / 16 / (1 / 1.2f - 0.5f) + 0.5f), fx = variant == 2 ? 1e-5f : 0.f, z = 0;
    i64 first = 0, count = L.n;
    const unsigned* os = nullptr; const double* ot = nullptr; int oc = 0;
    int nx = L.N, per = 7;
    T* f = (T*)L.f;
    void* args[] = {&f, &L.flags, &nx, &nx, &nx, &per, &om, &omm, &fx, &z, &z, &z, &z, &z, &first, &count, &os, &ot, &oc};
    void* k = pass == 0 ? Kern<T>::even(variant) : Kern<T>::odd(variant);
    CK(cudaLaunchKernel(k, dim3((L.n + block - 1) / block), dim3(block), args, 0, st));
}
template <typename T>
void pull(Lat& L, int pass, int block, cudaStream_t st) {
    float om = 1.2f, omm = 1.0f, z = 0;
    i64 first = 0, count = L.n;
    const unsigned* os = nullptr; const double* ot = nullptr; int oc = 0;
    int nx = L.N, per = 7;
    T* a = (T*)(pass == 0 ? L.f : L.g); T* b = (T*)(pass == 0 ? L.g : L.f);
    void* args[] = {&a, &b, &L.flags, &nx, &nx, &nx, &per, &om, &omm, &z, &z, &z, &z, &z, &z, &first, &count, &os, &ot, &oc};
    CK(cudaLaunchKernel(Kern<T>::pull(), dim3((L.n + block - 1) / block), dim3(block), args, 0, st));
}

template <typename F>
void mlups(Lat& L, F step, const std::string& name, double bytes_site, double copy_gbs) {
    cudaStream_t st; CK(cudaStreamCreate(&st));
    cudaEvent_t a, b; CK(cudaEventCreate(&a)); CK(cudaEventCreate(&b));
    for (int k = 0; k < 4; ++k) step(k & 1, st);
    CK(cudaStreamSynchronize(st));
    std::vector<double> ts, te, to;
    float ms;
    for (int r = 0; r < 5; ++r) {
        CK(cudaEventRecord(a, st)); for (int k = 0; k < 20; ++k) step(k & 1, st); CK(cudaEventRecord(b, st)); CK(cudaEventSynchronize(b));
        CK(cudaEventElapsedTime(&ms, a, b)); ts.push_back(ms);
        CK(cudaEventRecord(a, st)); for (int k = 0; k < 10; ++k) step(0, st); CK(cudaEventRecord(b, st)); CK(cudaEventSynchronize(b));
        CK(cudaEventElapsedTime(&ms, a, b)); te.push_back(ms);
        CK(cudaEventRecord(a, st)); for (int k = 0; k < 10; ++k) step(1, st); CK(cudaEventRecord(b, st)); CK(cudaEventSynchronize(b));
        CK(cudaEventElapsedTime(&ms, a, b)); to.push_back(ms);
    }
    CK(cudaGetLastError());
    std::sort(ts.begin(), ts.end()); std::sort(te.begin(), te.end()); std::sort(to.begin(), to.end());
    double m = 20.0 * L.n / (ts[2] * 1e-3) / 1e6, me = 10.0 * L.n / (te[2] * 1e-3) / 1e6, mo = 10.0 * L.n / (to[2] * 1e-3) / 1e6;
    printf("%-40s %4d^3 %8.0f MLUPS %5.1f%% of copy  (even/collide %8.0f  odd/pull %8.0f)\n", name.c_str(), L.N, m,
           100 * m * 1e6 * bytes_site / (copy_gbs * 1e9), me, mo);
    CK(cudaStreamDestroy(st));
}

template <typename T>
Lat make(int N) {
    Lat L; L.N = N; L.n = (unsigned)N * N * N;
    const size_t bytes = (size_t)19 * L.n * sizeof(T);
    CK(cudaMalloc(&L.f, bytes)); CK(cudaMalloc(&L.g, bytes));
    CK(cudaMalloc(&L.flags, L.n)); CK(cudaMemset(L.flags, 0, L.n));
    lbm_mark_bulk<<<(L.n + 255) / 256, 256>>>(L.flags, N, N, N, 7);
    CK(cudaDeviceSynchronize());
    return L;
}
void drop(Lat& L) { CK(cudaFree(L.f)); CK(cudaFree(L.g)); CK(cudaFree(L.flags)); }

template <typename T>
void lab(int N, double copy, const char* tag) {
    const double bs = 2.0 * 19 * sizeof(T) + 1;
    std::string tn = Kern<T>::name();
    // dump: 4 in-place steps of each variant from one random start, on a 64^3 box
    Lat C = make<T>(64);
    const size_t check_bytes = (size_t)19 * C.n * sizeof(T);
    for (int v = 0; v < 3; ++v) {
        init<T>(C, 7);
        for (int k = 0; k < 4; ++k) inplace<T>(C, k & 1, 256, v, 0);
        CK(cudaDeviceSynchronize());
        std::vector<char> h(check_bytes); CK(cudaMemcpy(h.data(), C.f, check_bytes, cudaMemcpyDeviceToHost));
        std::string fn = std::string("pops_") + tag + "_" + tn + "_" + std::to_string(v) + ".bin";
        FILE* fp = fopen(fn.c_str(), "wb"); fwrite(h.data(), 1, check_bytes, fp); fclose(fp);
    }
    drop(C);
    Lat L = make<T>(N);
    init<T>(L, 7);
    int blocks[4][2] = {{128, 128}, {256, 256}, {128, 256}, {256, 128}};
    const bool quick = getenv("LAB_QUICK") != nullptr;  // BGK 256/256 and 128/256, TRT and forced 128/256, one pull
    const char* vn[3] = {"BGK", "TRT", "BGK+F"};
    for (int v = 0; v < 3; ++v)
        for (auto& bb : blocks) {
            if (v > 0 && bb[0] == 256 && bb[1] == 128) continue;
            if (quick && (bb[1] == 128 || (v > 0 && bb[0] == 256))) continue;
            mlups(L, [&](int p, cudaStream_t s) { inplace<T>(L, p, bb[p], v, s); },
                  std::string(tag) + " " + tn + " " + vn[v] + " in place " + std::to_string(bb[0]) + "/" + std::to_string(bb[1]), bs, copy);
        }
    for (int blk : {128, 256})
        if (!quick || blk == (sizeof(T) == 2 ? 128 : 256)) mlups(L, [&](int p, cudaStream_t s) { pull<T>(L, p, blk, s); }, std::string(tag) + " " + tn + " BGK pull " + std::to_string(blk), bs, copy);
    drop(L);
}

int main(int argc, char** argv) {
    const char* tag = argc > 1 ? argv[1] : "x";
    size_t cb = (size_t)1 << 30; void *a, *b; CK(cudaMalloc(&a, cb)); CK(cudaMalloc(&b, cb));
    cudaEvent_t e0, e1; cudaEventCreate(&e0); cudaEventCreate(&e1);
    for (int k = 0; k < 3; ++k) CK(cudaMemcpy(b, a, cb, cudaMemcpyDeviceToDevice));
    std::vector<double> cs;
    for (int r = 0; r < 5; ++r) { cudaEventRecord(e0); for (int k = 0; k < 5; ++k) cudaMemcpyAsync(b, a, cb, cudaMemcpyDeviceToDevice); cudaEventRecord(e1); cudaEventSynchronize(e1); float ms; cudaEventElapsedTime(&ms, e0, e1); cs.push_back(2.0 * 5 * cb / (ms * 1e-3) / 1e9); }
    std::sort(cs.begin(), cs.end()); double copy = cs[2];
    printf("%s: copy ceiling %.0f GB/s\n", tag, copy);
    cudaFree(a); cudaFree(b);
    if (argc > 2) { lab<float>(256, copy, tag); return 0; }
    lab<float>(256, copy, tag);
    lab<half_bits>(256, copy, tag);
    return 0;
}
