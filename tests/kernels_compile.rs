//! Every kernels/*.cu compiles with NVRTC for sm_90 (the H100). Needs only
//! libnvrtc (CI installs it from the nvidia-cuda-nvrtc wheel), no GPU.
//! Where NVRTC is absent the test says so and is skipped unless
//! FEGPU_REQUIRE_NVRTC=1, which .ci/run sets.

#[test]
fn every_kernel_file_compiles_for_sm90() {
    for (module, source) in fegpu::KERNEL_SOURCES {
        if ptx(module, source).is_none() {
            return;
        }
    }
}

/// The PTX of one kernel file for sm_90; None (the test skipped) where NVRTC
/// is absent and FEGPU_REQUIRE_NVRTC is not 1.
fn ptx(module: &str, source: &str) -> Option<String> {
    let required = std::env::var("FEGPU_REQUIRE_NVRTC").map(|v| v == "1").unwrap_or(false);
    match fegpu::gpu::compile(module, source, "sm_90") {
        Ok(p) => Some(p.to_src()),
        Err(e) if e.kind == fegpu::ErrorKind::NoDevice && !required => {
            eprintln!("skipped: {}", e.message);
            None
        }
        Err(e) => panic!("{}", e.message),
    }
}

/// Every FEM kernel the launches ask for by name exists in the compiled
/// module: the names are built from the element and the physics at run
/// time, so a missing instantiation would only show on a GPU.
#[test]
fn every_fem_kernel_name_is_defined() {
    let Some(linear) = ptx("fem", fegpu::fem::cuda::SOURCE) else { return };
    for element in ["tri3", "quad4", "tet4", "hex8"] {
        for physics in ["heat", "elastic"] {
            for kind in ["stiffness", "mass", "ebe_apply", "ebe_diagonal", "ebe_otf", "body_load"] {
                let name = format!("{kind}_{element}_{physics}");
                assert!(linear.contains(&format!(".entry {name}(")), "kernels/fem.cu defines no {name}");
            }
            let blocked = format!("stiffness_{element}_{physics}_blocked");
            assert!(linear.contains(&format!(".entry {blocked}(")), "kernels/fem.cu defines no {blocked}");
        }
    }
    for name in [
        "ebe_init",
        "dirichlet_rhs",
        "assemble",
        "assemble_scaled",
        "tl_force_tri3_elastic",
        "tl_force_hex8_elastic",
        "thermal_stress_tet4",
        "thermal_stress_hex8",
        "face_load_quad",
        "face_matrix_add",
        "stress_to_nodes",
    ] {
        assert!(linear.contains(&format!(".entry {name}(")), "kernels/fem.cu defines no {name}");
    }
    // the quadratic elements' module (kernels/fem.cu with FEM_QUADRATIC)
    let Some(quadratic) = ptx("fem_quadratic", fegpu::fem::cuda::QUADRATIC_SOURCE) else { return };
    for element in ["tri6", "quad8", "tet10", "hex20"] {
        for physics in ["heat", "elastic"] {
            let mut kinds = vec!["mass", "ebe_apply", "ebe_diagonal", "body_load", "stiffness"];
            if physics == "elastic" && matches!(element, "tet10" | "hex20") {
                kinds.pop(); // blocked only
            }
            for kind in kinds {
                let name = format!("{kind}_{element}_{physics}");
                assert!(quadratic.contains(&format!(".entry {name}(")), "the quadratic module defines no {name}");
            }
            let blocked = format!("stiffness_{element}_{physics}_blocked");
            assert!(quadratic.contains(&format!(".entry {blocked}(")), "the quadratic module defines no {blocked}");
        }
    }
    for element in ["tri6", "quad8", "tet10", "hex20"] {
        assert!(quadratic.contains(&format!(".entry hrz_lump_{element}_elastic(")), "no hrz_lump_{element}_elastic");
    }
    for face in ["edge3", "tri6", "quad8"] {
        assert!(quadratic.contains(&format!(".entry face_load_{face}(")), "the quadratic module defines no face_load_{face}");
    }
    let heavy = ["stiffness_hex8_elastic_blocked", "ebe_apply_hex8_elastic", "tl_force_hex8_elastic"];
    compiled_alone_as_in_the_whole_file("fem", fegpu::fem::cuda::SOURCE, &linear, &heavy);
    let heavy = ["mass_tet10_elastic", "stiffness_hex20_elastic_blocked"];
    compiled_alone_as_in_the_whole_file("fem_quadratic", fegpu::fem::cuda::QUADRATIC_SOURCE, &quadratic, &heavy);
}

/// Every LBM kernel a pass asks for by name (scheme, collision, forcing,
/// storage) exists: the names are built at run time (src/lbm/cuda.rs).
#[test]
fn every_lbm_kernel_name_is_defined() {
    let Some(ptx) = ptx("lbm", fegpu::lbm::cuda::SOURCE) else { return };
    for dtype in ["f16", "f32", "f64"] {
        let mut names = vec![
            format!("lbm_stream_{dtype}"),
            format!("lbm_settle_{dtype}"),
            format!("lbm_equilibrium_{dtype}"),
            format!("lbm_fields_{dtype}"),
        ];
        for kind in ["push", "pull", "pull_unforced", "collide", "even", "even_unforced", "odd", "odd_unforced"] {
            for trt in ["", "trt_"] {
                names.push(format!("lbm_{kind}_{trt}{dtype}"));
            }
        }
        if dtype == "f32" {
            // 32-bit indices (src/lbm/cuda.rs)
            for kind in ["even32", "even32_unforced", "odd32", "odd32_unforced"] {
                for trt in ["", "trt_"] {
                    names.push(format!("lbm_{kind}_{trt}f32"));
                }
            }
        }
        if dtype == "f16" {
            // two sites a thread (src/lbm/cuda.rs over_pairs)
            for kind in
                ["pairs_even", "pairs_even_unforced", "pairs_odd", "pairs_odd_unforced", "pairs32_odd", "pairs32_odd_unforced"]
            {
                for trt in ["", "trt_"] {
                    names.push(format!("lbm_{kind}_{trt}f16"));
                }
            }
        }
        for name in names {
            assert!(ptx.contains(&format!(".entry {name}(")), "kernels/lbm.cu defines no {name}");
        }
    }
    assert!(ptx.contains(".entry lbm_mark_bulk("), "kernels/lbm.cu defines no lbm_mark_bulk");
    compiled_alone_as_in_the_whole_file(
        "lbm",
        fegpu::lbm::cuda::SOURCE,
        &ptx,
        &["lbm_even32_f32", "lbm_odd_trt_f64", "lbm_pairs32_odd_unforced_f16", "lbm_fields_f16", "lbm_mark_bulk"],
    );
}

/// The solvers' and the dense operations' files compile one kernel at a time too.
#[test]
fn more_kernel_files_compile_alone_as_in_the_whole_file() {
    let Some(sparse) = ptx("sparse", fegpu::sparse::cuda::SOURCE) else { return };
    compiled_alone_as_in_the_whole_file(
        "sparse",
        fegpu::sparse::cuda::SOURCE,
        &sparse,
        &["spmv_tpr8", "ilu0_level", "usolve_syncfree"],
    );
    let Some(krylov) = ptx("krylov", fegpu::krylov::cuda::SOURCE) else { return };
    compiled_alone_as_in_the_whole_file(
        "krylov",
        fegpu::krylov::cuda::SOURCE,
        &krylov,
        &["bicgstab_cluster", "bicgstab_cluster_bsr_k2", "cg_step"],
    );
    let Some(dense) = ptx("dense", fegpu::dense::cuda::SOURCE) else { return };
    let heavy = ["transpose_padded_t32r8j2_f64", "transpose_square_tile_t32r8_f32"];
    compiled_alone_as_in_the_whole_file("dense", fegpu::dense::cuda::SOURCE, &dense, &heavy);
}

/// Jobs compile each kernel of `module` alone (Gpu::kernel, ONE_KERNEL_AT_A_TIME): a compile
/// of empty bodies lists the whole file's kernels, and each of `names`
/// compiled alone is the same code as in the whole file's PTX, `whole`, the
/// others in that compile left empty.
fn compiled_alone_as_in_the_whole_file(module: &str, source: &str, whole: &str, names: &[&str]) {
    assert!(fegpu::ONE_KERNEL_AT_A_TIME.contains(&module));
    let alone = |name: &str| self::ptx(module, &fegpu::gpu::one_kernel_source(source, name)).unwrap();
    let mut all = fegpu::gpu::entry_names(whole);
    let names_only = alone("");
    let mut listed = fegpu::gpu::entry_names(&names_only);
    all.sort();
    listed.sort();
    assert!(all.len() > 10 && all == listed, "the names-only compile lists kernels/{module}.cu's kernels");
    for name in names {
        let one = alone(name);
        let (one_code, whole_code) = (comparable(function(&one, name)), comparable(function(whole, name)));
        assert_eq!(one_code, whole_code, "{name} compiled alone differs from the whole file's");
        let others = fegpu::gpu::entry_names(&one).into_iter().filter(|k| k != name).map(|k| function(&one, k).len());
        assert!(others.max().unwrap() < function(&one, name).len() / 4, "{name} alone: another kernel kept its body");
    }
}

/// A function's PTX as compiled alone and in the whole file compare: the
/// function's number taken out of its block labels ($L__BB12_3 -> $L__BB_3;
/// a file compiled for one kernel emits fewer functions before it), and no
/// declarations of static shared arrays (an inline function's array that
/// several kernels share is declared in the module, or "demoted" into the
/// one kernel that uses it: the same per-block memory either way), no
/// blank lines.
fn comparable(code: &str) -> String {
    let kept: Vec<&str> = code
        .lines()
        .filter(|l| !(l.is_empty() || l.starts_with("\t// demoted variable") || l.starts_with("\t.shared ")))
        .collect();
    let code = kept.join("\n");
    let mut out = String::with_capacity(code.len());
    let mut rest = code.as_str();
    while let Some(at) = rest.find("$L__BB") {
        out.push_str(&rest[..at + 6]);
        rest = rest[at + 6..].trim_start_matches(|c: char| c.is_ascii_digit());
    }
    out + rest
}

/// One `.entry` function of a PTX text, from its name to its closing brace.
fn function<'a>(ptx: &'a str, name: &str) -> &'a str {
    let start = ptx.find(&format!(".entry {name}(")).unwrap_or_else(|| panic!("no kernel {name}"));
    let end = ptx[start..].find("\n}\n").map_or(ptx.len(), |e| start + e + 3);
    &ptx[start..end]
}

/// Every block kernel a launch asks for by name (block size 2..MAX_BLOCK,
/// lanes per block row) exists: the names are built at run time
/// (src/sparse/block/cuda.rs).
#[test]
fn every_block_kernel_name_is_defined() {
    let Some(block) = ptx("block", fegpu::sparse::block::cuda::SOURCE) else { return };
    for k in 2..=fegpu::sparse::block::MAX_BLOCK {
        let mut names: Vec<String> = [1, 2, 4, 8].iter().map(|t| format!("bsr_spmv_k{k}_tpr{t}")).collect();
        for kind in ["bsr_diag_inverse", "bsr_jacobi", "bilu0_level", "bilu0_lower", "bilu0_upper", "bilu0_sweep", "bilu0_diag"] {
            names.push(format!("{kind}_k{k}"));
        }
        for name in names {
            assert!(block.contains(&format!(".entry {name}(")), "kernels/block.cu defines no {name}");
        }
    }
    let source = fegpu::sparse::block::cuda::SOURCE;
    compiled_alone_as_in_the_whole_file("block", source, &block, &["bsr_spmv_k3_tpr8", "bilu0_sweep_k2", "bilu0_level_k4"]);
    // the small systems' cluster over BSR (src/krylov/cuda.rs queue_cluster_iteration)
    let Some(krylov) = ptx("krylov", fegpu::krylov::cuda::SOURCE) else { return };
    for k in 2..=fegpu::sparse::block::MAX_BLOCK {
        assert!(
            krylov.contains(&format!(".entry bicgstab_cluster_bsr_k{k}(")),
            "kernels/krylov.cu defines no bicgstab_cluster_bsr_k{k}"
        );
    }
}

/// Every AMG product a re-setup asks for by name (lanes a row, rows at
/// once, tiles, A T a node at once: src/amg/cuda.rs product) exists, the coarsest inverse, and
/// the cycle's kernels over f64 and f32 values (LevelMatrix::kernel_name,
/// sparse::cuda::spmv_with), the re-setup's Lanczos product and symmetry check.
#[test]
fn every_amg_product_kernel_name_is_defined() {
    let Some(amg) = ptx("amg", fegpu::amg::cuda::SOURCE) else { return };
    let tiles = fegpu::amg::host::TILES.iter().map(|(s, k, j)| format!("amg_product_t{s}x{k}x{j}"));
    let tentative = fegpu::amg::host::TENTATIVE_TILES.iter().map(|(s, k)| format!("amg_times_tentative_s{s}_k{k}"));
    for name in ["amg_dense_inverse".to_string(), "amg_round_to_f32".to_string()].into_iter().chain(tiles).chain(tentative) {
        assert!(amg.contains(&format!(".entry {name}(")), "kernels/amg.cu defines no {name}");
    }
    for group in [1, 2, 4, 8, 16, 32] {
        let mut names = vec![format!("amg_product_g{group}")];
        for stem in ["amg_smooth", "amg_residual", "amg_smooth_f32", "amg_residual_f32", "amg_lanczos_product", "amg_asymmetry"] {
            names.push(format!("{stem}_tpr{group}"));
        }
        names.extend(fegpu::amg::host::ROW_BLOCKS.iter().map(|s| format!("amg_product_g{group}_s{s}")));
        for name in names {
            assert!(amg.contains(&format!(".entry {name}(")), "kernels/amg.cu defines no {name}");
        }
    }
    // the cycle's transfers: sparse.cu's SpMV over f64 or f32 values (sparse::cuda::SpmvValues)
    let Some(sparse) = ptx("sparse", fegpu::sparse::cuda::SOURCE) else { return };
    for group in [1, 2, 4, 8, 16, 32] {
        for name in [format!("spmv_tpr{group}"), format!("spmv_f32_tpr{group}")] {
            assert!(sparse.contains(&format!(".entry {name}(")), "kernels/sparse.cu defines no {name}");
        }
    }
}

/// The on-disk kernel cache (gpu::kernel_cache) gives back what NVRTC
/// compiled: a miss compiles and stores, the next lookup loads the same PTX
/// without compiling, another architecture misses.
#[test]
fn a_compiled_file_is_cached_on_disk() {
    let (module, source) = fegpu::KERNEL_SOURCES[0];
    if ptx(module, source).is_none() {
        return;
    }
    let dir = std::env::temp_dir().join(format!("fegpu-kernel-cache-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let cached = |arch: &str, reuse: bool| {
        let (p, hit) = fegpu::gpu::compile_cached(module, source, arch, Some(&dir), reuse).unwrap();
        (p.to_src(), hit)
    };
    let (first, hit) = cached("sm_90", true);
    assert!(!hit, "an empty cache misses");
    let (again, hit) = cached("sm_90", true);
    assert!(hit && again == first, "the stored PTX comes back as compiled");
    assert!(first.contains(".target sm_90"));
    assert!(!cached("sm_80", true).1, "another architecture is another entry");
    assert!(!cached("sm_90", false).1, "not looked up: compiled");
    assert!(cached("sm_80", true).1);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Every kernel the library looks up by a literal name (`.kernel("module",
/// SOURCE, "name")` anywhere in src/) is defined in that module's file: an
/// edit that drops a kernel fails here, on any machine with NVRTC, not only
/// on a GPU in the path that launches it (stop 58's long-row change lost
/// spmv_rows_add, which only the distributed drivers launch).
#[test]
fn every_kernel_looked_up_by_name_is_defined() {
    let mut wanted: std::collections::BTreeMap<String, std::collections::BTreeSet<String>> = Default::default();
    let mut files = vec![std::path::PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/src"))];
    while let Some(path) = files.pop() {
        if path.is_dir() {
            files.extend(std::fs::read_dir(&path).unwrap().map(|e| e.unwrap().path()));
            continue;
        }
        if path.extension().is_none_or(|e| e != "rs") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        for call in text.split("kernel(\"").skip(1) {
            // "module", SOURCE, "name") with the name a literal
            let Some((module, rest)) = call.split_once('"') else { continue };
            let args: Vec<&str> = rest.splitn(3, ',').collect();
            if let Some(name) = args.get(2).and_then(|a| a.trim().strip_prefix('"')).and_then(|a| a.split_once('"')) {
                wanted.entry(module.to_string()).or_default().insert(name.0.to_string());
            }
        }
    }
    assert!(wanted.values().map(|v| v.len()).sum::<usize>() > 30, "the scan found too few kernel look-ups: {wanted:?}");
    for (module, source) in fegpu::KERNEL_SOURCES {
        let Some(names) = wanted.get(*module) else { continue };
        let Some(ptx) = ptx(module, source) else { return };
        for name in names {
            assert!(ptx.contains(&format!(".entry {name}(")), "src/ looks up {name}, which kernels/{module}.cu does not define");
        }
    }
}
