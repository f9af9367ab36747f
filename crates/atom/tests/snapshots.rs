use rcute_atom::*;

#[test]
fn snippet_mma_sync_bf16() {
    insta::assert_snapshot!(mma_sm80::sm80_16x8x16_f32_bf16_bf16_f32().snippet.source());
}

#[test]
fn snippet_mma_sync_f16_accumulate() {
    insta::assert_snapshot!(mma_sm80::sm80_16x8x16_f16_f16_f16_f16().snippet.code);
}

#[test]
fn snippet_wgmma_rs() {
    let a = mma_sm90::wgmma(
        Element::F32,
        Element::BF16,
        Element::BF16,
        16,
        GmmaSource::RS,
        Major::K,
        Major::MN,
    )
    .unwrap();
    insta::assert_snapshot!(a.snippet.code);
}

#[test]
fn snippet_wgmma_ss_s8() {
    let a = mma_sm90::wgmma(
        Element::S32,
        Element::S8,
        Element::U8,
        8,
        GmmaSource::SS,
        Major::K,
        Major::K,
    )
    .unwrap();
    insta::assert_snapshot!(a.snippet.code);
}

#[test]
fn snippet_ldmatrix_x4_trans() {
    insta::assert_snapshot!(copy_ldsm::ldmatrix(4, true).snippet.code);
}

#[test]
fn snippet_cp_async_zfill() {
    insta::assert_snapshot!(
        copy_cp_async::cp_async(copy_cp_async::CacheOp::CacheGlobal, 16, true)
            .unwrap()
            .snippet
            .code
    );
}

#[test]
fn snippet_tma_load_multicast_3d() {
    insta::assert_snapshot!(copy_tma::tma_load(3, true, 8192).snippet.code);
}

#[test]
fn snippet_mbarrier_wait() {
    insta::assert_snapshot!(sync::mbarrier_wait_parity().code);
}

#[test]
fn harness_mma_kernel() {
    insta::assert_snapshot!(test_kernel(&mma_sm80::sm80_16x8x8_f32_tf32_tf32_f32().snippet).source);
}
