//! The on-disk kernel cache on a device (gpu::kernel_cache): a context
//! stores what it compiles, a later context loads it, and an entry the
//! driver refuses is compiled afresh and stored again, never an error.
//! One test in its own binary: it names the cache directory in the
//! environment before any context reads it. Skipped without a GPU.

use fegpu::context::{Context, Request};

#[test]
fn a_later_context_loads_the_cache_and_a_damaged_entry_is_compiled_again() {
    let dir = std::env::temp_dir().join(format!("fegpu-kernel-cache-device-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    // the only test of this binary, before any context reads the environment
    std::env::set_var("FEGPU_KERNEL_CACHE", &dir);
    let kernel = || {
        let ctx = Context::new(Request::Auto, 0).unwrap();
        let Some(g) = ctx.gpu() else { return false };
        g.kernel("vector", fegpu::array::cuda::SOURCE, "dots").unwrap();
        true
    };
    if !kernel() {
        eprintln!("skipped: no GPU");
        return;
    }
    let entries = || -> Vec<std::path::PathBuf> {
        std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).filter(|p| p.to_string_lossy().contains("vector-")).collect()
    };
    let stored = entries();
    assert_eq!(stored.len(), 1, "one entry for kernels/vector.cu: {stored:?}");
    let ptx = std::fs::read_to_string(&stored[0]).unwrap();
    assert!(ptx.contains(".entry dots("));
    // a later context loads it (the same entry, untouched)
    assert!(kernel());
    assert_eq!(std::fs::read_to_string(&stored[0]).unwrap(), ptx);
    // damaged behind a valid header and ending: the driver refuses it, the file is compiled and stored again
    let header = ptx.lines().next().unwrap();
    std::fs::write(&stored[0], format!("{header}\nnot ptx at all {{\n}}\n")).unwrap();
    assert!(kernel());
    assert_eq!(std::fs::read_to_string(&stored[0]).unwrap(), ptx);
    std::fs::remove_dir_all(&dir).unwrap();
}
