// Prepended to the kernel files whose kernels compile one at a time
// (ONE_KERNEL_AT_A_TIME in src/lib.rs; src/gpu/launch.rs Gpu::kernel).
// Each kernel's body is guarded by WANTED(its name): where FEGPU_ONE_KERNEL
// names a kernel, every other keeps an empty body, so NVRTC spends its time
// on that one alone (the whole of lbm.cu took 36 s on one core, for a
// lattice that launches four or five of its 87 kernels). Without
// FEGPU_ONE_KERNEL every body is kept.
#ifdef FEGPU_ONE_KERNEL
__host__ __device__ constexpr bool same_name(const char* a, const char* b) {
    return *a == *b && (*a == 0 || same_name(a + 1, b + 1));
}
#define WANTED(name) same_name(#name, FEGPU_ONE_KERNEL)
#else
#define WANTED(name) true
#endif
