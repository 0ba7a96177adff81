//! The Fortran module against the C header: every `bind(C, name=...)`
//! interface in `fortran/` names a function of `include/fegpu.h` with the
//! same number of arguments, each passed the way the C prototype takes it
//! (by value as int32_t, int64_t or double; by reference where C has a
//! pointer), every C function is bound, and every `FEGPU_*` constant the
//! module publishes has the header's value. A new C function without a
//! Fortran binding fails this test until it is bound.

use std::collections::BTreeMap;

/// How an argument crosses: by value of a C type, or by reference (a pointer).
#[derive(Debug, Clone, PartialEq, Eq)]
enum Pass {
    Int32,
    Int64,
    Double,
    Pointer,
    Other(String),
}

/// The header's functions: name -> argument kinds.
fn c_functions(header: &str) -> BTreeMap<String, Vec<Pass>> {
    let mut out = BTreeMap::new();
    // comments and preprocessor lines (the MPI API's #if FEGPU_MPI) out
    let mut text: String = header
        .lines()
        .filter(|l| !l.trim_start().starts_with("//") && !l.trim_start().starts_with('#'))
        .collect::<Vec<_>>()
        .join("\n");
    while let Some(open) = text.find("/*") {
        let close = text[open..].find("*/").map_or(text.len(), |c| open + c + 2);
        text.replace_range(open..close, "");
    }
    for decl in text.split(';') {
        let decl = decl.trim();
        let Some(open) = decl.find('(') else { continue };
        let head = &decl[..open];
        let Some(name) = head.split_whitespace().last().filter(|n| n.starts_with("fegpu_")) else { continue };
        if head.contains("typedef") || head.contains("struct fegpu_") && !head.contains("fegpu_status") {
            continue;
        }
        let args = &decl[open + 1..decl.rfind(')').unwrap_or(decl.len())];
        let kinds = if args.trim() == "void" || args.trim().is_empty() {
            vec![]
        } else {
            args.split(',')
                .map(|a| {
                    let a = a.trim();
                    if a.contains('*') {
                        Pass::Pointer
                    } else if a.starts_with("int64_t") || a.starts_with("fegpu_") && a.contains("_t ") {
                        Pass::Int64 // handles are uint64_t typedefs, passed as integer(c_int64_t)
                    } else if a.starts_with("int32_t") {
                        Pass::Int32
                    } else if a.starts_with("double") {
                        Pass::Double
                    } else {
                        Pass::Other(a.to_string())
                    }
                })
                .collect()
        };
        out.insert(name.to_string(), kinds);
    }
    out
}

/// The module's `bind(C)` interfaces: C name -> argument kinds, read from
/// each dummy's declaration inside its interface body.
fn fortran_bindings(source: &str) -> BTreeMap<String, Vec<Pass>> {
    let mut out = BTreeMap::new();
    let joined = join_continuations(source);
    let lines: Vec<&str> = joined.lines().collect();
    let mut i = 0;
    while i < lines.len() {
        let l = lines[i];
        let Some(at) = l.find("bind(C, name='") else {
            i += 1;
            continue;
        };
        let c_name = l[at + 14..].split('\'').next().unwrap().to_string();
        let after_name = l.find("function ").or_else(|| l.find("subroutine ")).unwrap_or(0);
        let open = after_name + l[after_name..].find('(').unwrap();
        let close = l[..at].rfind(')').unwrap();
        let dummies: Vec<String> =
            l[open + 1..close].split(',').map(|d| d.trim().to_lowercase()).filter(|d| !d.is_empty()).collect();
        let mut decls: BTreeMap<String, Pass> = BTreeMap::new();
        i += 1;
        while i < lines.len()
            && !lines[i].trim_start().starts_with("end function")
            && !lines[i].trim_start().starts_with("end subroutine")
        {
            let d = lines[i].trim().to_lowercase();
            if let Some((ty, names)) = d.split_once("::") {
                let by_value = ty.contains("value");
                let kind = if !by_value {
                    Pass::Pointer
                } else if ty.starts_with("integer(c_int64_t)") {
                    Pass::Int64
                } else if ty.starts_with("integer(c_int32_t)") {
                    Pass::Int32
                } else if ty.starts_with("real(c_double)") {
                    Pass::Double
                } else if ty.starts_with("type(c_ptr)") {
                    Pass::Pointer
                } else {
                    Pass::Other(ty.trim().to_string())
                };
                for n in names.split(',') {
                    let n = n.trim().split('(').next().unwrap().trim().to_string();
                    decls.insert(n, kind.clone());
                }
            }
            i += 1;
        }
        let kinds = dummies
            .iter()
            .map(|d| decls.get(d).cloned().unwrap_or_else(|| panic!("{c_name}: dummy {d} is not declared in its interface")))
            .collect();
        assert!(out.insert(c_name.clone(), kinds).is_none(), "{c_name} is bound twice");
    }
    out
}

/// `FEGPU_*` constants: from `#define NAME value` and from Fortran
/// `integer, parameter, public :: NAME = value, ...` statements.
fn c_constants(header: &str) -> BTreeMap<String, i64> {
    header
        .lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            (w.next() == Some("#define")).then_some(())?;
            let (name, value) = (w.next()?, w.next()?);
            Some((name.to_string(), value.parse().ok()?))
        })
        .collect()
}

/// Free-form continuation lines (`... &` then `& ...` or `...`) joined into one.
fn join_continuations(source: &str) -> String {
    let mut out = String::new();
    let mut continued = false;
    for l in source.lines() {
        let mut t = l.trim();
        if continued {
            t = t.strip_prefix('&').unwrap_or(t).trim_start();
        }
        match t.strip_suffix('&') {
            Some(head) => {
                out.push_str(head);
                out.push(' ');
                continued = true;
            }
            None => {
                out.push_str(t);
                out.push('\n');
                continued = false;
            }
        }
    }
    out
}

fn fortran_constants(source: &str) -> BTreeMap<String, i64> {
    let joined = join_continuations(source);
    let mut out = BTreeMap::new();
    for l in joined.lines() {
        let l = l.trim();
        if !(l.starts_with("integer") && l.contains("parameter") && l.contains("public")) {
            continue;
        }
        let Some((_, list)) = l.split_once("::") else { continue };
        for item in list.split(',') {
            if let Some((name, value)) = item.split_once('=') {
                if let Ok(v) = value.trim().parse::<i64>() {
                    out.insert(name.trim().to_string(), v);
                }
            }
        }
    }
    out
}

fn read(rel: &str) -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(rel);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// fortran/ and fortran/mpi/ (the MPI build's module), so the distributed
/// API is bound too.
fn fortran_sources() -> String {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files: Vec<_> = ["fortran", "fortran/mpi"]
        .iter()
        .flat_map(|d| std::fs::read_dir(root.join(d)).unwrap())
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "f90"))
        .collect();
    files.sort();
    files.iter().map(|p| std::fs::read_to_string(p).unwrap()).collect::<Vec<_>>().join("\n")
}

/// Fortran-only constants (no C counterpart), with why.
const FORTRAN_ONLY: &[&str] = &[
    "FEGPU_KIND_F16", // the lattice's kind= sentinel for f16 storage (C passes FEGPU_DTYPE_F16)
];

#[test]
fn every_fortran_binding_matches_its_c_prototype() {
    let (c, f) = (c_functions(&read("include/fegpu.h")), fortran_bindings(&fortran_sources()));
    assert!(f.len() > 50, "only {} bind(C) interfaces found: the parser missed them", f.len());
    let mut problems = Vec::new();
    for (name, kinds) in &f {
        match c.get(name) {
            None => problems.push(format!("{name}: bound in Fortran but not in include/fegpu.h")),
            Some(ck) if ck != kinds => problems.push(format!("{name}: C takes {ck:?}, the Fortran interface passes {kinds:?}")),
            _ => {}
        }
    }
    for n in c.keys().filter(|k| !f.contains_key(*k)) {
        problems.push(format!("{n}: in include/fegpu.h but not bound in fortran/"));
    }
    assert!(problems.is_empty(), "{} problems:\n{}", problems.len(), problems.join("\n"));
}

#[test]
fn every_fortran_constant_has_the_header_value() {
    let (c, f) = (c_constants(&read("include/fegpu.h")), fortran_constants(&fortran_sources()));
    assert!(f.len() > 40, "only {} constants found: the parser missed them", f.len());
    let mut problems = Vec::new();
    for (name, v) in &f {
        match c.get(name) {
            Some(cv) if cv != v => problems.push(format!("{name} = {v} in Fortran but {cv} in include/fegpu.h")),
            None if !FORTRAN_ONLY.contains(&name.as_str()) => problems.push(format!("{name} is not in include/fegpu.h")),
            _ => {}
        }
    }
    let status: Vec<&String> = c.keys().filter(|k| k.starts_with("FEGPU_ERR_") || *k == "FEGPU_OK").collect();
    for s in status {
        if !f.contains_key(s) {
            problems.push(format!("status {s} is not published by the Fortran module"));
        }
    }
    assert!(problems.is_empty(), "{} problems:\n{}", problems.len(), problems.join("\n"));
}
