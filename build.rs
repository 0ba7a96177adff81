// Gives libfegpu.so a SONAME, so programs linked against it record
// "libfegpu.so" (found through their rpath or LD_LIBRARY_PATH) rather than
// the path it was linked from: the installed CMake package stays relocatable.
fn main() {
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux") {
        println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libfegpu.so");
    }
    println!("cargo:rerun-if-changed=build.rs");
}
