// The prelude of the kernel files whose kernels compile one at a time
// (src/gpu/launch.rs Gpu::kernel, the files of ONE_KERNEL_AT_A_TIME in
// src/lib.rs; prepended to them):
// each kernel's body is guarded by WANTED(its name). Where FEGPU_ONE_KERNEL
// names a kernel, every other keeps an empty body, so NVRTC spends its time
// on that one alone (the whole of lbm.cu took 36 s on one core: a job would
// compile some 80 kernels to launch four). Without it, every body is kept.
#ifdef FEGPU_ONE_KERNEL
__host__ __device__ constexpr bool same_name(const char* a, const char* b) {
    return *a == *b && (*a == 0 || same_name(a + 1, b + 1));
}
#define WANTED(name) same_name(#name, FEGPU_ONE_KERNEL)
#else
#define WANTED(name) true
#endif
