//! The shared-memory staged epilogue: accumulators to a padded / swizzled smem buffer slab
//! by slab, then 16-byte output vectors to the split-K workspace or, through the epilogue
//! operation, to D.

use super::stmt::{c, d, dc, e, if_, if_else};
use crate::emit::{index_expr, IndexExpr, Stmt};
use rcute_atom::Element;
use rcute_collective::epilogue::{convert_from_f32, convert_to_f32};
use rcute_collective::{Sm80Mainloop, SmemEpilogue, StorageOrder};
use rcute_layout::{tuple, Layout};

/// `v[e] += beta * C[e]` for the `vec` elements of one full, aligned vector of C at `ptr`.
fn c_vector_add(ce: Element, vec: i64, ptr: &str) -> Vec<Stmt> {
    let bytes = vec * ce.bytes() as i64;
    let mut out = Vec::new();
    match ce {
        Element::F32 => {
            for j in 0..vec / 4 {
                out.push(d(
                    "const float4",
                    &format!("c{j}"),
                    deref_vec(&format!("reinterpret_cast<const float4*>({ptr})"), j),
                ));
                for (x, f) in ["x", "y", "z", "w"].iter().enumerate() {
                    out.push(e(format!("v[{}] += beta * c{j}.{f}", 4 * j + x as i64)));
                }
            }
        }
        _ => {
            // 16-bit C: 32-bit words of two elements, loaded as uint4 (16 B) or uint2 (8 B).
            let words = bytes / 4;
            let (vt, per) = if bytes >= 16 { ("uint4", 4) } else { ("uint2", 2) };
            let fields = ["x", "y", "z", "w"];
            for j in 0..words / per {
                out.push(d(
                    &format!("const {vt}"),
                    &format!("c{j}"),
                    deref_vec(&format!("reinterpret_cast<const {vt}*>({ptr})"), j),
                ));
                for w in 0..per {
                    let word = format!("c{j}.{}", fields[w as usize]);
                    let (lo, hi) = match ce {
                        Element::BF16 => (
                            format!("__uint_as_float({word} << 16)"),
                            format!("__uint_as_float({word} & 0xffff0000u)"),
                        ),
                        _ => (
                            format!("__half2float(__ushort_as_half((unsigned short)({word} & 0xffffu)))"),
                            format!("__half2float(__ushort_as_half((unsigned short)({word} >> 16)))"),
                        ),
                    };
                    let base = 2 * (j * per + w);
                    out.push(e(format!("v[{base}] += beta * {lo}")));
                    out.push(e(format!("v[{}] += beta * {hi}", base + 1)));
                }
            }
        }
    }
    out
}

/// Store `v[0..vec]` converted to D as one 16-byte vector at `ptr`.
fn d_vector_store(de: Element, vec: i64, ptr: &str) -> Stmt {
    d_vector_store_from(de, vec, ptr, "v")
}

/// Store the floats `arr[0..vec]` converted to D as one 16-byte vector at `ptr`.
fn d_vector_store_from(de: Element, vec: i64, ptr: &str, arr: &str) -> Stmt {
    let v = arr;
    match de {
        Element::F32 => e(format!(
            "*reinterpret_cast<float4*>({ptr}) = make_float4({v}[0], {v}[1], {v}[2], {v}[3])"
        )),
        _ => {
            let h = |i: i64| match de {
                Element::BF16 => format!("(unsigned)__bfloat16_as_ushort(__float2bfloat16_rn({v}[{i}]))"),
                _ => format!("(unsigned)__half_as_ushort(__float2half_rn({v}[{i}]))"),
            };
            let words: Vec<String> = (0..vec / 2)
                .map(|w| format!("{} | ({} << 16)", h(2 * w), h(2 * w + 1)))
                .collect();
            e(format!(
                "*reinterpret_cast<uint4*>({ptr}) = make_uint4({})",
                words.join(", ")
            ))
        }
    }
}

/// What the staged epilogue computes from the (complete) accumulator sum of an element.
pub(crate) enum EpilogueOp<'a> {
    /// `D = convert(alpha * acc + beta * C)`, C of type `c` read only when `beta != 0`
    /// (kernel parameters `C`, `ldc`, `batch_stride_c`, `alpha`, `beta`).
    LinearCombination {
        /// C's element type.
        c: Element,
    },
    /// `D = convert(visit(ep, (float)acc, 0.0f, m, n, batch))`: a fusion that reads no C,
    /// its parameter struct in the kernel parameter `ep`. The visit function is called for
    /// in-bounds elements only.
    Visit {
        /// The fusion's visit function.
        visit_fn: &'a str,
    },
}

/// The shared-memory staged epilogue (see [`SmemEpilogue`]): slab by slab, the
/// accumulators are written to shared memory, then each thread reads 16-byte output
/// vectors and (by mode) stores its partial (of the accumulator type: f32, or s32 for
/// integer GEMMs, so that split-K sums stay exact) to the workspace (parallel split-K, or
/// a serial split that is not the last), or adds the workspace partial (serial split > 0)
/// and applies the epilogue `op` and the conversion to D (kernel parameters `D`, `ldd`,
/// `batch_stride_d`, `workspace` of the accumulator type).
pub(crate) fn staged_epilogue(
    p: &Sm80Mainloop,
    se: &SmemEpilogue,
    d_elem: Element,
    order: StorageOrder,
    op: &EpilogueOp,
) -> Vec<Stmt> {
    let int_acc = p.config.acc == Element::S32;
    let (at, at2, at4) = if int_acc {
        ("int", "int2", "int4")
    } else {
        ("float", "float2", "float4")
    };
    let ep = Staged {
        p,
        se,
        d_elem,
        row_major: order == StorageOrder::RowMajor,
        v: se.vec,
        at,
        at2,
        at4,
        op,
    };
    let mut b = ep.setup();
    for q in 0..se.passes {
        let mut pass = Vec::new();
        if q > 0 {
            pass.push(c("every thread is done reading the previous slab"));
            pass.push(e("__syncthreads()"));
        }
        pass.extend(ep.stage_slab(q));
        if q == 0 {
            pass.push(c(
                "serial split-K: wait until splits 0..split-1 of this tile are done (acquire)",
            ));
            pass.push(if_(
                "add_ws && tid == 0",
                vec![Stmt::While {
                    cond: "rc_ld_acquire_gpu(sem) != split".into(),
                    body: vec![e("__nanosleep(64)")],
                }],
            ));
        }
        pass.push(e("__syncthreads()"));
        pass.push(ep.read_back(q));
        b.push(Stmt::Block(pass));
    }
    b.push(c(
        "serial split-K: publish this split's partial (release); the last split resets the counter to 0",
    ));
    b.push(if_(
        "serial_k",
        vec![
            e("__syncthreads()"),
            if_(
                "tid == 0",
                vec![
                    e("__threadfence()"),
                    e("rc_st_release_gpu(sem, split == split_k - 1 ? 0 : split + 1)"),
                ],
            ),
        ],
    ));
    b
}

/// What the staged epilogue's emitters share.
struct Staged<'a> {
    p: &'a Sm80Mainloop,
    se: &'a SmemEpilogue,
    d_elem: Element,
    row_major: bool,
    /// Elements per output vector (16 bytes of D).
    v: i64,
    /// The accumulator type and its 2- and 4-vectors.
    at: &'static str,
    at2: &'static str,
    at4: &'static str,
    op: &'a EpilogueOp<'a>,
}

impl Staged<'_> {
    /// The staging buffer, the split-K mode flags, the workspace slab, the semaphore and
    /// the output pointers and their vector alignment.
    fn setup(&self) -> Vec<Stmt> {
        let (se, v, at) = (self.se, self.v, self.at);
        let td = self.d_elem.cuda_type();
        let mut b = Vec::new();
        b.push(c(format!(
            "Epilogue through shared memory: {} slab(s) of {} rows, staged ({},{}) f32 {}, ld {} (pad {}), chunk swizzle {}; {}-element (16 B) vectors, {} per thread and slab",
            se.passes,
            se.rows_per_pass,
            se.extents[0],
            se.extents[1],
            if self.row_major { "row-major" } else { "column-major" },
            se.ld,
            se.pad,
            se.swizzle,
            v,
            se.iterations
        )));
        b.push(c(format!(
            "bank wavefronts per tile: writes {} + reads {} (conflict-free: {})",
            se.write_wavefronts, se.read_wavefronts, se.ideal_wavefronts
        )));
        b.push(d(
            &format!("{at}* const"),
            "sE",
            format!("reinterpret_cast<{at}*>(rc_smem)"),
        ));
        b.push(dc(
            "const bool",
            "add_ws",
            "serial_k && split > 0",
            "serial: add the running partial of splits 0..split-1",
        ));
        b.push(dc(
            "const bool",
            "to_ws",
            "split_k > 1 && !(serial_k && split == split_k - 1)",
            format!(
                "store {} partial instead of D",
                if at == "int" { "an s32" } else { "an f32" }
            ),
        ));
        b.push(dc(
            &format!("{at}* const"),
            "W",
            "split_k > 1 ? workspace + (serial_k ? (long long)batch : (long long)batch * split_k + split) * M * N : workspace",
            "parallel: one (M,N) slab per (batch, split); serial: one per batch",
        ));
        b.push(d(
            "int* const",
            "sem",
            "serial_k ? semaphores + 1 + ((long long)batch * tiles_m + tile_m) * tiles_n + tile_n : semaphores",
        ));
        if let EpilogueOp::LinearCombination { c: ce } = self.op {
            b.push(d(
                &format!("const {}* const", ce.cuda_type()),
                "gC",
                "C + batch * batch_stride_c",
            ));
        }
        b.push(d(&format!("{td}* const"), "gD", "D + batch * batch_stride_d"));
        b.push(dc(
            "const bool",
            "d_vec",
            format!("(ldd % {v}) == 0 && (batch_stride_d % {v}) == 0 && (reinterpret_cast<uintptr_t>(D) % 16) == 0"),
            "16-byte D stores",
        ));
        if let EpilogueOp::LinearCombination { c: ce } = self.op {
            let c_align = (v * ce.bytes() as i64).min(16);
            b.push(d(
                "const bool",
                "c_vec",
                format!(
                    "(ldc % {v}) == 0 && (batch_stride_c % {v}) == 0 && (reinterpret_cast<uintptr_t>(C) % {c_align}) == 0"
                ),
            ));
        }
        b.push(dc(
            "const bool",
            "w_vec",
            format!("({} % {v}) == 0", if self.row_major { "N" } else { "M" }),
            "16-byte workspace vectors",
        ));
        b
    }

    /// Slab `q`: every warp writes the accumulators of its M-atoms of the slab to `sE`.
    fn stage_slab(&self, q: i64) -> Vec<Stmt> {
        let (p, se, at2) = (self.p, self.se, self.at2);
        let mut pass = vec![c(format!(
            "slab {q}: M-atoms {}..{} of every warp",
            q * se.mi_per_pass,
            (q + 1) * se.mi_per_pass
        ))];
        let (row, col) = fragment_layouts(p, se.mi_per_pass);
        let row = index_expr(&row, &["lane", "h", "warp_m", "mi"]).expect("rank-matched coordinate");
        let col = index_expr(&col, &["lane", "nj", "warp_n"]).expect("rank-matched coordinate");
        let mi = plus("mi", q * se.mi_per_pass);
        let acc = |x: &str| format!("acc[{mi}][nj][{x}]");
        let mut st = vec![
            dc("const int", "r", row.expr, format!("row: {}", row.comment)),
            dc("const int", "cc", col.expr, format!("column: {}", col.comment)),
        ];
        if self.row_major {
            st.push(e(format!(
                "*reinterpret_cast<{at2}*>(sE + {}) = make_{at2}({}, {})",
                se.offset_cpp("r", "cc"),
                acc("2 * h"),
                acc("2 * h + 1")
            )));
        } else {
            st.push(Stmt::assign(format!("sE[{}]", se.offset_cpp("cc", "r")), acc("2 * h")));
            st.push(Stmt::assign(
                format!("sE[{}]", se.offset_cpp("cc + 1", "r")),
                acc("2 * h + 1"),
            ));
        }
        pass.push(Stmt::unrolled(
            "mi",
            se.mi_per_pass,
            vec![Stmt::unrolled("nj", p.mma_n, vec![Stmt::unrolled("h", 2, st)])],
        ));
        pass
    }

    /// Slab `q`: each thread reads its output vectors back from `sE` and stores them to
    /// the workspace or, through the epilogue operation, to D.
    fn read_back(&self, q: i64) -> Stmt {
        let (se, v, at, at4) = (self.se, self.v, self.at, self.at4);
        let mut it = vec![d("const int", "idx", format!("tid + it * {}", se.threads))];
        let mut body = vec![
            d("const int", "so", format!("idx / {}", se.vectors_per_row)),
            d("const int", "si", format!("idx % {} * {v}", se.vectors_per_row)),
        ];
        if self.row_major {
            body.push(d(
                "const int",
                "m",
                format!("{} + so", plus("m0", q * se.rows_per_pass)),
            ));
            body.push(d("const int", "n", "n0 + si"));
        } else {
            body.push(d(
                "const int",
                "m",
                format!("{} + si", plus("m0", q * se.rows_per_pass)),
            ));
            body.push(d("const int", "n", "n0 + so"));
        }
        let mut inb = vec![Stmt::Array {
            ty: at.into(),
            name: "v".into(),
            len: v as usize,
            comment: None,
        }];
        for j in 0..v / 4 {
            inb.push(d(
                &format!("const {at4}"),
                &format!("s{j}"),
                format!(
                    "*reinterpret_cast<const {at4}*>(sE + {})",
                    se.offset_cpp("so", &plus("si", 4 * j))
                ),
            ));
            for (x, f) in ["x", "y", "z", "w"].iter().enumerate() {
                inb.push(Stmt::assign(format!("v[{}]", 4 * j + x as i64), format!("s{j}.{f}")));
            }
        }
        inb.push(dc(
            "const int",
            "rem",
            if self.row_major { "N - n" } else { "M - m" },
            "elements of the vector inside the matrix",
        ));
        inb.push(d("const bool", "full", format!("rem >= {v}")));
        inb.push(d(
            "const long long",
            "wo",
            if self.row_major {
                "(long long)m * N + n"
            } else {
                "(long long)n * M + m"
            },
        ));
        inb.push(if_("add_ws", vec![self.workspace_add()]));
        inb.push(if_else("to_ws", vec![self.workspace_store()], self.to_d()));
        body.push(if_("m < M && n < N", inb));
        if se.iterations * se.threads > se.vectors_per_pass {
            it.push(if_(format!("idx < {}", se.vectors_per_pass), body));
        } else {
            it.extend(body);
        }
        Stmt::unrolled("it", se.iterations, it)
    }

    /// Serial split-K: add the running partial (L2 loads: written by other CTAs).
    fn workspace_add(&self) -> Stmt {
        let (v, at4) = (self.v, self.at4);
        let mut addw_vec = Vec::new();
        for j in 0..v / 4 {
            addw_vec.push(d(
                &format!("const {at4}"),
                &format!("w{j}"),
                format!(
                    "__ldcg({})",
                    vec_ptr(&format!("reinterpret_cast<const {at4}*>(W + wo)"), j)
                ),
            ));
            for (x, f) in ["x", "y", "z", "w"].iter().enumerate() {
                addw_vec.push(e(format!("v[{}] += w{j}.{f}", 4 * j + x as i64)));
            }
        }
        if_else(
            "full && w_vec",
            addw_vec,
            vec![Stmt::unrolled(
                "x",
                v,
                vec![if_("x < rem", vec![e("v[x] += __ldcg(W + wo + x)")])],
            )],
        )
    }

    /// Store the partial to the workspace (L2 stores: read by other CTAs or the reduction).
    fn workspace_store(&self) -> Stmt {
        let (v, at4) = (self.v, self.at4);
        let mut stw_vec = Vec::new();
        for j in 0..v / 4 {
            stw_vec.push(e(format!(
                "__stcg({}, make_{at4}(v[{}], v[{}], v[{}], v[{}]))",
                vec_ptr(&format!("reinterpret_cast<{at4}*>(W + wo)"), j),
                4 * j,
                4 * j + 1,
                4 * j + 2,
                4 * j + 3
            )));
        }
        if_else(
            "full && w_vec",
            stw_vec,
            vec![Stmt::unrolled(
                "x",
                v,
                vec![if_("x < rem", vec![e("__stcg(W + wo + x, v[x])")])],
            )],
        )
    }

    /// `const long long name = <offset of (m, n)>;` in a C / D matrix with leading
    /// dimension `ld` (see [`gmem_offset`]).
    fn offset_decl(&self, name: &str, ld: &str) -> Stmt {
        let ix = gmem_offset(self.row_major, ld);
        dc("const long long", name, ix.expr, ix.comment)
    }

    /// The epilogue operation on the complete sum and the store to D.
    fn to_d(&self) -> Vec<Stmt> {
        let (v, d_elem) = (self.v, self.d_elem);
        match self.op {
            EpilogueOp::LinearCombination { c: ce } => vec![
                Stmt::unrolled("x", v, vec![e("v[x] *= alpha")]),
                if_(
                    "beta != 0.0f",
                    vec![
                        self.offset_decl("co", "ldc"),
                        if_else(
                            "full && c_vec",
                            c_vector_add(*ce, v, "gC + co"),
                            vec![Stmt::unrolled(
                                "x",
                                v,
                                vec![if_(
                                    "x < rem",
                                    vec![e(format!("v[x] += beta * {}", convert_to_f32(*ce, "gC[co + x]")))],
                                )],
                            )],
                        ),
                    ],
                ),
                self.offset_decl("dof", "ldd"),
                if_else(
                    "full && d_vec",
                    vec![d_vector_store(d_elem, v, "gD + dof")],
                    vec![Stmt::unrolled(
                        "x",
                        v,
                        vec![if_(
                            "x < rem",
                            vec![Stmt::assign("gD[dof + x]", convert_from_f32(d_elem, "v[x]"))],
                        )],
                    )],
                ),
            ],
            EpilogueOp::Visit { visit_fn } => {
                let (vm, vn) = if self.row_major { ("m", "n + x") } else { ("m + x", "n") };
                let call = format!("{visit_fn}(ep, (float)v[x], 0.0f, {vm}, {vn}, batch)");
                vec![
                    self.offset_decl("dof", "ldd"),
                    if_else(
                        "full && d_vec",
                        vec![
                            Stmt::Array {
                                ty: "float".into(),
                                name: "o".into(),
                                len: v as usize,
                                comment: Some("the fusion at each element of the vector".into()),
                            },
                            Stmt::unrolled("x", v, vec![Stmt::assign("o[x]", call.clone())]),
                            d_vector_store_from(d_elem, v, "gD + dof", "o"),
                        ],
                        vec![Stmt::unrolled(
                            "x",
                            v,
                            vec![if_(
                                "x < rem",
                                vec![Stmt::assign("gD[dof + x]", convert_from_f32(d_elem, &call))],
                            )],
                        )],
                    ),
                ]
            }
        }
    }
}

/// The slab row and tile column of accumulator element `acc[mi][nj][2 * h + x]` (`x` = 0, 1
/// the adjacent column pair) as layouts of the thread's coordinates: the MMA atom's C
/// fragment (`m = lane / 4 + 8 * h`, `n = 2 * (lane % 4)`) tiled by the `(WM, WN)` warps,
/// `mi_per_pass` M-atoms per slab and the N permutation `(8,WN,2):(1,16,8)`:
/// row over `(lane, h, warp_m, mi)` = `((4,8),2,WM,MI):((0,1),8,16,16*WM)`, column over
/// `(lane, nj, warp_n)` = `((4,8),(2,NJ/2),WN):((2,0),(8,16*WN),16)`.
pub(crate) fn fragment_layouts(p: &Sm80Mainloop, mi_per_pass: i64) -> (Layout, Layout) {
    let [wm, wn] = p.config.warps;
    let (mi_stride, nj2, nj2_stride) = (16 * wm, p.mma_n / 2, 16 * wn);
    let row = Layout::new(tuple!((4, 8), 2, wm, mi_per_pass), tuple!((0, 1), 8, 16, mi_stride));
    let col = Layout::new(tuple!((4, 8), (2, nj2), wn), tuple!((2, 0), (8, nj2_stride), 16));
    (
        row.expect("congruent shape and stride"),
        col.expect("congruent shape and stride"),
    )
}

/// The element offset of `(m, n)` in an `(M, N)` matrix with leading dimension `ld`, from
/// its layout: row-major `(M,N):(ld,1)`, column-major `(M,N):(1,ld)` (`ld` is a `long long`
/// kernel parameter, so the products are 64-bit).
pub(crate) fn gmem_offset(row_major: bool, ld: &str) -> IndexExpr {
    let l = if row_major {
        Layout::new(tuple!("M", "N"), tuple!(ld, 1))
    } else {
        Layout::new(tuple!("M", "N"), tuple!(1, ld))
    };
    index_expr(&l.expect("congruent shape and stride"), &["m", "n"]).expect("rank-matched coordinate")
}

/// `base + k`, or `base` when `k == 0`.
pub(crate) fn plus(base: &str, k: i64) -> String {
    if k == 0 {
        base.to_string()
    } else {
        format!("{base} + {k}")
    }
}

/// The `j`-th vector after the (vector-typed) pointer `ptr`: `ptr + j`, or `ptr` for 0.
fn vec_ptr(ptr: &str, j: i64) -> String {
    plus(ptr, j)
}

/// The `j`-th vector after `ptr`, loaded: `*(ptr + j)`, or `*ptr` for 0.
fn deref_vec(ptr: &str, j: i64) -> String {
    if j == 0 {
        format!("*{ptr}")
    } else {
        format!("*({ptr} + {j})")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rcute_collective::Sm80MainloopConfig;
    use rcute_layout::{Int, Tuple};

    fn at(l: &Layout, c: &[i64]) -> i64 {
        let coord = Tuple::Node(c.iter().map(|&v| Tuple::Leaf(Int::Static(v))).collect());
        l.crd2idx(&coord).unwrap().as_static().unwrap()
    }

    /// The fragment layouts agree with the plan's accumulator coordinates.
    #[test]
    fn fragment_layouts_match_acc_coord() {
        for (tile, warps) in [
            ([128, 128, 32], [2, 2]),
            ([128, 256, 32], [2, 4]),
            ([16, 64, 128], [1, 4]),
        ] {
            let p = Sm80Mainloop::new(&Sm80MainloopConfig::bf16_tn(tile, warps)).unwrap();
            let (row, col) = fragment_layouts(&p, p.mma_m);
            for t in 0..p.threads {
                let (w_m, w_n) = p.warp_coord(t / 32);
                for mi in 0..p.mma_m {
                    for nj in 0..p.mma_n {
                        for v in 0..4 {
                            let want = p.acc_coord(t, mi, nj, v);
                            let got = (
                                at(&row, &[t % 32, v / 2, w_m, mi]),
                                at(&col, &[t % 32, nj, w_n]) + v % 2,
                            );
                            assert_eq!(got, want, "{tile:?} {warps:?} t={t} mi={mi} nj={nj} v={v}");
                        }
                    }
                }
            }
        }
    }
}
