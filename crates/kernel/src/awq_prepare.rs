//! The one-time reorder of AutoAWQ's `qweight [K, N/8]` into the prepared layout of
//! [`rcute_collective::awq_prepared`] (what the prepared AWQ GEMM streams): one thread per
//! 16-byte chunk of the output, i.e. per lane `(g, t)` of one (k16 block, 8-word block),
//! gathering the words of rows `16 kb + 2t + (0, 1, 8, 9)` in word column `8 wb + g`,
//! redistributing their nibbles into the lane's four words
//! ([`rcute_collective::awq_prepared::prepare_lane_words`]) and storing them with one
//! 16-byte store (consecutive threads write consecutive chunks). Nibbles are moved, never
//! changed, so the kernel serves f16 and bf16 checkpoints alike.
//!
//! ```
//! use rcute_kernel::awq_prepare::generate;
//! let g = generate().unwrap();
//! assert_eq!(g.name, "rc_awq_prepare");
//! assert!(g.source.contains("uint4"));
//! assert_eq!(g.launch_config(4096, 14336).block.x, 256);
//! ```

use crate::emit::{index_expr, unit_preamble, Function as CFunction, Item, Stmt, Unit};
use crate::gemm_sm80::GemmError;
use crate::launch::{Dim3, KernelArgs, LaunchConfig};
use rcute_layout::{tuple, Layout};

pub use rcute_collective::awq_prepared::{prepared_nibble, prepared_qweight_layout, PREPARED_K, PREPARED_N};

/// Threads per block.
pub const THREADS: u32 = 256;

/// The generated reorder kernel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GeneratedAwqPrepare {
    /// Kernel (and unit) name.
    pub name: String,
    /// CUDA C++ source.
    pub source: String,
}

impl GeneratedAwqPrepare {
    /// One thread per 16-byte output chunk (`K N / 32` of them) along `x`; the kernel
    /// strides over any chunks beyond `2^31 - 1` blocks.
    pub fn launch_config(&self, k: i32, n: i32) -> LaunchConfig {
        let chunks = (k.max(0) as u64) * (n.max(0) as u64) / 32;
        let blocks = chunks.div_ceil(u64::from(THREADS)).clamp(1, i32::MAX as u64) as u32;
        LaunchConfig::new(Dim3::new(blocks, 1, 1), THREADS)
    }

    /// Arguments: `qweight`, the prepared output (both `K N / 8` words), `K`, `N`.
    pub fn args(&self, qweight: u64, out: u64, k: i32, n: i32) -> KernelArgs {
        KernelArgs::new().u64(qweight).u64(out).i32(k).i32(n / 8)
    }
}

/// Generates the reorder kernel.
pub fn generate() -> Result<GeneratedAwqPrepare, GemmError> {
    let name = "rc_awq_prepare".to_string();
    let cfg = |e: rcute_layout::LayoutError| GemmError::Config(e.to_string());
    let packed = Layout::new(tuple!("K", "N8"), tuple!("ld_q", 1)).map_err(cfg)?;
    let rows = ["(k0)", "(k0 + 1)", "(k0 + 8)", "(k0 + 9)"];
    let mut body = vec![
        Stmt::decl("const long long", "ld_q", "N8"),
        Stmt::decl("const long long", "chunks", "(long long)(K >> 4) * (N8 >> 3) * 32"),
        Stmt::decl("const int", "blocks_n", "N8 >> 3"),
    ];
    let mut chunk = vec![
        Stmt::Comment("chunk c = (kb * N/64 + wb) * 32 + lane: words 4c .. 4c + 4 of ((2,4,2,K/16),(2,4,8,N/64)):((4,32,1,16N),(2,8,128,1024)) (nibble offsets)".into()),
        Stmt::decl("const int", "lane", "(int)(c & 31)"),
        Stmt::decl("const long long", "blk", "c >> 5"),
        Stmt::decl("const int", "wb", "(int)(blk % blocks_n)"),
        Stmt::decl("const int", "kb", "(int)(blk / blocks_n)"),
        Stmt::decl("const int", "j", "8 * wb + (lane >> 2)"),
        Stmt::decl("const int", "k0", "16 * kb + 2 * (lane & 3)"),
    ];
    let mut loads = Vec::new();
    for (r, row) in rows.iter().enumerate() {
        let e = index_expr(&packed, &[row, "j"]).map_err(|e| GemmError::Config(e.to_string()))?;
        chunk.push(Stmt::Comment(e.comment));
        loads.push(format!("w{r}"));
        chunk.push(Stmt::decl(
            "const uint32_t",
            &format!("w{r}"),
            format!("qweight[{}]", e.expr),
        ));
    }
    chunk.push(Stmt::Comment(
        "word r of the lane: columns 2r (AutoAWQ nibble r) and 2r + 1 (nibble r + 4) of rows 2t, 2t+8 | 2t+1, 2t+9 (prepare_lane_words)".into(),
    ));
    chunk.push(Stmt::Array {
        ty: "uint32_t".into(),
        name: "o".into(),
        len: 4,
        comment: None,
    });
    let [w0, w1, w2, w3] = [&loads[0], &loads[1], &loads[2], &loads[3]];
    chunk.push(Stmt::unrolled(
        "r",
        4,
        vec![
            Stmt::decl("const int", "lo", "4 * r"),
            Stmt::decl("const int", "hi", "4 * r + 16"),
            Stmt::assign(
                "o[r]",
                format!(
                    "(({w0} >> lo) & 0xf) | ((({w2} >> lo) & 0xf) << 4) | ((({w0} >> hi) & 0xf) << 8) | ((({w2} >> hi) & 0xf) << 12) | ((({w1} >> lo) & 0xf) << 16) | ((({w3} >> lo) & 0xf) << 20) | ((({w1} >> hi) & 0xf) << 24) | ((({w3} >> hi) & 0xf) << 28)"
                ),
            ),
        ],
    ));
    chunk.push(Stmt::assign(
        "reinterpret_cast<uint4*>(out)[c]",
        "make_uint4(o[0], o[1], o[2], o[3])",
    ));
    body.push(Stmt::Loop {
        init: "long long c = (long long)blockIdx.x * blockDim.x + threadIdx.x".into(),
        cond: "c < chunks".into(),
        step: "c += (long long)gridDim.x * blockDim.x".into(),
        body: chunk,
    });
    let f = CFunction {
        qualifiers: format!("extern \"C\" __global__ __launch_bounds__({THREADS})"),
        ret: "void".into(),
        name: name.clone(),
        params: vec![
            ("const uint32_t* __restrict__".into(), "qweight".into()),
            ("uint32_t* __restrict__".into(), "out".into()),
            ("int".into(), "K".into()),
            ("int".into(), "N8".into()),
        ],
        doc: vec!["out = qweight reordered into the prepared AWQ layout (K % 16 == 0, N % 64 == 0).".into()],
        body,
    };
    let unit = Unit {
        header: vec![
            format!("{name}: AutoAWQ qweight [K, N/8] -> the prepared layout of rcute_collective::awq_prepared"),
            "Generated by rcute (crates/kernel/src/awq_prepare.rs); do not edit.".into(),
        ],
        includes: vec![],
        items: {
            let mut items = unit_preamble(&[], "");
            items.push(Item::Function(f));
            items
        },
    };
    Ok(GeneratedAwqPrepare {
        name,
        source: unit.render(),
    })
}
