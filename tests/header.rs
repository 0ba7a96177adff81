//! include/fegpu.h is what cbindgen generates from the ABI (src/ffi) now.
//! Regenerate with: FEGPU_BLESS=1 cargo test --release --test header

use std::path::Path;

#[test]
fn committed_header_matches_the_code() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let config = cbindgen::Config::from_file(root.join("cbindgen.toml")).expect("cbindgen.toml");
    let mut generated = Vec::new();
    // Only the ABI: src/ffi read as a crate of its own, so nothing of the
    // domain can leak into the header and no exclusion list is needed.
    cbindgen::Builder::new()
        .with_src(root.join("src/ffi/mod.rs"))
        .with_config(config)
        .generate()
        .expect("cbindgen could not read the crate")
        .write(&mut generated);
    let path = root.join("include/fegpu.h");
    if std::env::var("FEGPU_BLESS").is_ok() {
        std::fs::write(&path, &generated).unwrap();
        return;
    }
    let committed = std::fs::read(&path).unwrap_or_default();
    assert!(
        committed == generated,
        "include/fegpu.h differs from what cbindgen generates from src/ffi: \
         run `FEGPU_BLESS=1 cargo test --release --test header` and commit it"
    );
}
