//! Every kernels/*.cu compiles with NVRTC for sm_90 (the H100). Needs only
//! libnvrtc (CI installs it from the nvidia-cuda-nvrtc wheel), no GPU.
//! Where NVRTC is absent the test says so and is skipped unless
//! FEGPU_REQUIRE_NVRTC=1, which .ci/run sets.

#[test]
fn every_kernel_file_compiles_for_sm90() {
    let required = std::env::var("FEGPU_REQUIRE_NVRTC").map(|v| v == "1").unwrap_or(false);
    for (module, source) in fegpu::KERNEL_SOURCES {
        match fegpu::gpu::compile(module, source, "sm_90") {
            Ok(_) => {}
            Err(e) if e.status == fegpu::FEGPU_ERR_NO_DEVICE && !required => {
                eprintln!("skipped: {}", e.message);
                return;
            }
            Err(e) => panic!("{}", e.message),
        }
    }
}
