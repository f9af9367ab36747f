//! Expert parallelism's host-side rejections (cargo feature `nccl`), without a GPU and
//! without NCCL: slices that are not the even split, ranks past the world, a missing or
//! broken NCCL library (a typed error naming what was tried, no panic), workspace sizes.

use rcute_ops::ep::{ep_moe_workspace_bytes, validate_ep_slice, Communicator, EpCombine, Nccl};
use rcute_ops::moe::fused_moe_workspace_bytes;
use rcute_ops::{DType, OpsError};

#[test]
fn even_split_accepted() {
    for (rank, world, local) in [(0, 1, 8), (0, 2, 4), (1, 2, 4), (3, 4, 16)] {
        validate_ep_slice(rank, world, rank * local, local, Some(world * local)).unwrap();
        validate_ep_slice(rank, world, rank * local, local, None).unwrap();
    }
}

#[test]
fn bad_rank_offset_or_slice_rejected() {
    let shape = |r: Result<(), OpsError>| assert!(matches!(r, Err(OpsError::Shape(_))), "{r:?}");
    shape(validate_ep_slice(2, 2, 8, 4, None)); // rank past the world
    shape(validate_ep_slice(5, 2, 20, 4, None));
    shape(validate_ep_slice(1, 2, 0, 4, None)); // rank 1 starting at expert 0
    shape(validate_ep_slice(0, 2, 4, 4, None)); // rank 0 starting at expert 4
    shape(validate_ep_slice(1, 2, 4, 4, Some(6))); // 2 x 4 experts for a routing of 6
    shape(validate_ep_slice(1, 2, 4, 4, Some(16)));
    shape(validate_ep_slice(1, 2, usize::MAX, 4, None)); // offset overflow
    assert!(matches!(validate_ep_slice(0, 0, 0, 4, None), Err(OpsError::Empty(_))));
    assert!(matches!(validate_ep_slice(0, 2, 0, 0, None), Err(OpsError::Empty(_))));
}

#[test]
fn missing_nccl_library_is_a_typed_error() {
    let e = Nccl::load_from(&["/nonexistent/dir/libnccl.so.2".into()]).unwrap_err();
    let OpsError::Nccl(msg) = &e else { panic!("{e:?}") };
    assert!(msg.contains("/nonexistent/dir/libnccl.so.2"), "{msg}");
    assert!(msg.contains("RCUTE_NCCL_LIB"), "{msg}");
    // A file that is not a shared library.
    let not_lib = concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml");
    let e = Nccl::load_from(&[not_lib.into()]).unwrap_err();
    assert!(matches!(e, OpsError::Nccl(ref m) if m.contains("Cargo.toml")), "{e:?}");
    // No candidate at all.
    assert!(matches!(Nccl::load_from(&[]), Err(OpsError::Nccl(_))));
}

#[test]
fn no_stream_no_communicator() {
    assert!(matches!(Communicator::from_streams(&[]), Err(OpsError::Empty(_))));
}

#[test]
fn workspace_sizes() {
    let (t, k, l, w, h, i) = (100, 2, 4, 2, 256, 512);
    let one = fused_moe_workspace_bytes(t, k, l, h, i, DType::BF16).unwrap();
    assert_eq!(
        ep_moe_workspace_bytes(EpCombine::AllReduce, t, k, l, w, h, i, DType::BF16).unwrap(),
        one
    );
    let rs = ep_moe_workspace_bytes(EpCombine::ReduceScatter, t, k, l, w, h, i, DType::BF16).unwrap();
    assert!(rs >= one + t * h * 2);
    assert!(ep_moe_workspace_bytes(EpCombine::AllReduce, t, k, 0, w, h, i, DType::BF16).is_err());
    // The dispatch: the fused MoE of the W * T received rows, plus send / receive / result
    // rows [W, T, H] (three of them) and their routing.
    let d = ep_moe_workspace_bytes(EpCombine::Dispatch, t, k, l, w, h, i, DType::BF16).unwrap();
    let recv = fused_moe_workspace_bytes(w * t, k, l, h, i, DType::BF16).unwrap();
    assert!(d >= recv + 3 * w * t * h * 2 + 4 * w * t * k * 4, "{d}");
    assert!(ep_moe_workspace_bytes(EpCombine::Dispatch, usize::MAX / 2, k, l, w, h, i, DType::BF16).is_err());
}

/// Where NCCL is installed (`RCUTE_NCCL_LIB`, `LD_LIBRARY_PATH`, a Python package), it
/// loads without a GPU, reports a 2.x version and makes a bootstrap id; elsewhere
/// `Nccl::get` is a typed error (this test then says so and passes).
#[test]
fn nccl_loads_where_installed() {
    match Nccl::get() {
        Ok(n) => {
            let v = n.version().unwrap();
            eprintln!("NCCL {v} from {}", n.path);
            assert!((20000..100000).contains(&v), "version code {v}");
            let id = rcute_ops::ep::UniqueId::new().unwrap();
            assert!(id.0.iter().any(|&b| b != 0));
        }
        Err(e) => {
            assert!(matches!(e, OpsError::Nccl(_)), "{e:?}");
            eprintln!("no NCCL here ({e})");
        }
    }
}

/// The search finds a Python package's NCCL through a `python3` on a `PATH` (a fake
/// virtual environment with an empty `libnccl.so.2` in its site-packages).
#[test]
fn python_package_nccl_is_a_candidate() {
    use rcute_ops::ep::library::{default_candidates, python_prefixes, site_packages_nccl};
    let dir = tempfile::tempdir().unwrap();
    let venv = dir.path();
    std::fs::create_dir_all(venv.join("bin")).unwrap();
    std::fs::write(venv.join("bin/python3"), "").unwrap();
    let lib = venv.join("lib/python3.12/site-packages/nvidia/nccl/lib");
    std::fs::create_dir_all(&lib).unwrap();
    std::fs::write(lib.join("libnccl.so.2"), "").unwrap();
    let path = std::env::join_paths([venv.join("nothing"), venv.join("bin")]).unwrap();
    let prefixes = python_prefixes(&path);
    assert_eq!(prefixes, vec![venv.to_path_buf()]);
    assert_eq!(site_packages_nccl(&prefixes), vec![lib.join("libnccl.so.2")]);
    assert_eq!(default_candidates()[0], std::path::PathBuf::from("libnccl.so.2"));
    // An empty file is no library: a typed error naming it.
    let e = Nccl::load_from(&[lib.join("libnccl.so.2")]).unwrap_err();
    assert!(
        matches!(e, OpsError::Nccl(ref m) if m.contains("site-packages")),
        "{e:?}"
    );
}
