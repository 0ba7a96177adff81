//! The on-disk cache of compiled kernel files: NVRTC's PTX of each file of
//! `kernels/`, keyed by its source, the architecture, the compile options
//! and NVRTC's version, so that a program's later runs load what an earlier
//! run compiled (NVRTC takes 70–170 ms a file on a warm machine, seconds on
//! a cold one). FEGPU_KERNEL_CACHE names the directory, or `off` turns the
//! cache off; by default $XDG_CACHE_HOME/fegpu/kernels or
//! $HOME/.cache/fegpu/kernels. A cache that cannot be read or written is a
//! miss, never an error: the file is compiled as without a cache.

use std::io::Write;
use std::path::{Path, PathBuf};

/// The cache directory the environment names (None: off, or no home).
pub fn directory() -> Option<PathBuf> {
    match std::env::var("FEGPU_KERNEL_CACHE") {
        Ok(v) if v == "off" || v == "0" || v.is_empty() => None,
        Ok(v) => Some(PathBuf::from(v)),
        Err(_) => std::env::var_os("XDG_CACHE_HOME")
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
            .map(|base| base.join("fegpu").join("kernels")),
    }
}

/// What a compiled file depends on, hashed (FNV-1a: stable across runs and builds).
pub fn key(parts: &[&str]) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    for part in parts {
        for &b in part.as_bytes().iter().chain([0u8].iter()) {
            h = (h ^ b as u64).wrapping_mul(0x0100_0000_01b3);
        }
    }
    h
}

/// The first line of an entry: the file it holds and its key, so a file
/// renamed, cut short at its start or from another key is a miss.
fn header(module: &str, key: u64) -> String {
    format!("// fegpu kernel cache: kernels/{module}.cu {key:016x}\n")
}

fn entry(dir: &Path, module: &str, key: u64) -> PathBuf {
    dir.join(format!("{module}-{key:016x}.ptx"))
}

/// The PTX stored for `module` under `key`, if any.
pub fn load(dir: &Path, module: &str, key: u64) -> Option<String> {
    let text = std::fs::read_to_string(entry(dir, module, key)).ok()?;
    let ptx = text.strip_prefix(&header(module, key))?;
    // PTX ends with its last function's closing brace; a cut-short file does not
    ptx.trim_end().ends_with('}').then(|| ptx.to_string())
}

/// Stores `ptx` for `module` under `key`: written to a file of its own,
/// then renamed into place, so a reader never sees half an entry and
/// processes that compile the same file at once leave one whole entry.
pub fn store(dir: &Path, module: &str, key: u64, ptx: &str) -> std::io::Result<()> {
    // a name no other writer uses: this process's, and its own count of writes
    static WRITES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    std::fs::create_dir_all(dir)?;
    let nth = WRITES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let partial = dir.join(format!(".{module}-{key:016x}.{}.{nth}", std::process::id()));
    let written = std::fs::File::create(&partial).and_then(|mut f| {
        f.write_all(header(module, key).as_bytes())?;
        f.write_all(ptx.as_bytes())?;
        f.sync_all()
    });
    let placed = written.and_then(|_| std::fs::rename(&partial, entry(dir, module, key)));
    if placed.is_err() {
        let _ = std::fs::remove_file(&partial);
    }
    placed
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("fegpu-kernel-cache-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    #[test]
    fn an_entry_comes_back_only_whole_and_under_its_own_key() {
        let dir = scratch("roundtrip");
        let ptx = ".version 8.0\n.target sm_90\n.entry k() {\n ret;\n}\n";
        let k = key(&["source", "sm_90"]);
        assert_eq!(load(&dir, "sparse", k), None, "an empty cache misses");
        store(&dir, "sparse", k, ptx).unwrap();
        assert_eq!(load(&dir, "sparse", k).as_deref(), Some(ptx));
        // another key, another file or architecture: a miss
        assert_ne!(key(&["source", "sm_80"]), k);
        assert_ne!(key(&["sourc", "esm_90"]), k, "parts are separated");
        assert_eq!(load(&dir, "sparse", key(&["source", "sm_80"])), None);
        assert_eq!(load(&dir, "amg", k), None);
        // an entry cut short, or whose header names another key: a miss
        let path = entry(&dir, "sparse", k);
        let full = std::fs::read_to_string(&path).unwrap();
        std::fs::write(&path, &full[..full.len() - 4]).unwrap();
        assert_eq!(load(&dir, "sparse", k), None);
        std::fs::write(&path, full.replace(&format!("{k:016x}"), "0000000000000000")).unwrap();
        assert_eq!(load(&dir, "sparse", k), None);
        // stored again: whole, and no partial file left beside it
        store(&dir, "sparse", k, ptx).unwrap();
        assert_eq!(load(&dir, "sparse", k).as_deref(), Some(ptx));
        let names: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names.len(), 1, "{names:?}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_cache_that_cannot_be_written_reports_it() {
        // a directory under a regular file cannot be made
        let file = scratch("blocked");
        std::fs::write(&file, "not a directory").unwrap();
        assert!(store(&file.join("kernels"), "sparse", 1, "}").is_err());
        assert_eq!(load(&file.join("kernels"), "sparse", 1), None);
        std::fs::remove_file(&file).unwrap();
    }
}
