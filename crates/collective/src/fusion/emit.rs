//! C++ emission of a fusion: the parameter struct and the per-element visit function
//! ([`FusionCode`]), and the staged form that reads broadcast vectors from a per-tile
//! staging area ([`StagedCode`]).

use std::fmt::Write as _;

use rcute_atom::Element;

use super::error::FusionError;
use super::node::{ComputeOp, Node};
use super::tree::Fusion;
use super::validate::{check_ident, SourceUse};
use crate::epilogue::{convert_from_f32, convert_to_f32};

/// The generated C++ of a fusion (see [`Fusion::emit`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FusionCode {
    /// `struct {prefix}_params { alignas(8) ... };`, every field in an 8-byte slot.
    pub params_struct: String,
    /// `__device__ __forceinline__ float {prefix}_visit(const {prefix}_params& p, float acc,
    /// float c, int m, int n, int l)`: the tree's value at `(m, n, l)`, with the aux stores as
    /// side effects. Call it for in-bounds elements only, with `c = 0.0f` when
    /// [`FusionCode::source_needed`] is false.
    pub device_fn: String,
    /// A C++ `bool` expression on `p`: whether C must be read (`"false"` without a source,
    /// `"p.beta != 0.0f"` for the linear combination).
    pub source_needed: String,
    /// `{prefix}_visit`.
    pub fn_name: String,
    /// `{prefix}_params`.
    pub struct_name: String,
    /// With [`Fusion::emit_staged`]: the functions that read broadcast vectors from a
    /// per-tile staging area instead of device memory.
    pub staged: Option<StagedCode>,
}

/// A broadcast vector of a fusion tree (see [`Fusion::broadcasts`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Broadcast {
    /// Field name of the pointer.
    pub name: String,
    /// Element type in memory.
    pub elem: Element,
    /// Which coordinate indexes it.
    pub axis: BroadcastAxis,
    /// Whether it has a batch stride.
    pub batch_stride: bool,
}

/// Which coordinate a broadcast vector is indexed by.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BroadcastAxis {
    /// Along N (indexed by the column `n`): [`Node::RowBroadcast`].
    Row,
    /// Along M (indexed by the row `m`): [`Node::ColBroadcast`].
    Col,
}

/// One broadcast vector's slot in a tile's staging area: `extent` floats at `offset`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StagedBroadcast {
    /// The vector.
    pub broadcast: Broadcast,
    /// First float of its slot.
    pub offset: i64,
    /// Floats in the slot: the tile's BN (row) or BM (column).
    pub extent: i64,
}

/// The staged form of a fusion (see [`Fusion::emit_staged`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StagedCode {
    /// `__device__ __forceinline__ float {prefix}_visit_staged(const {prefix}_params& p,
    /// float acc, float c, int m, int n, int l, const float* bc, int lm, int ln)`: the tree
    /// with broadcast `k` read as `bc[offset_k + ln]` (row) or `bc[offset_k + lm]`
    /// (column), where `(lm, ln)` is the element's position in its tile.
    pub visit_fn: String,
    /// `__device__ __forceinline__ float {prefix}_broadcast(const {prefix}_params& p, int k,
    /// int i, int l)`: element `i` (a global row or column) of broadcast `k` of batch `l`,
    /// as a float, read from device memory: what a kernel stages.
    pub fetch_fn: String,
    /// `{prefix}_visit_staged`.
    pub visit_name: String,
    /// `{prefix}_broadcast`.
    pub fetch_name: String,
    /// The slots, in the order of `k`.
    pub layout: Vec<StagedBroadcast>,
    /// Floats in the whole staging area of one tile.
    pub floats: i64,
}

impl FusionCode {
    /// The struct and the function, ready to paste after the three CUDA type headers.
    pub fn source(&self) -> String {
        match &self.staged {
            None => format!("{}\n{}", self.params_struct, self.device_fn),
            Some(st) => format!("{}\n{}\n{}", self.params_struct, self.device_fn, st.source()),
        }
    }
}

impl StagedCode {
    /// The fetch and staged visit functions.
    pub fn source(&self) -> String {
        format!("{}\n{}", self.fetch_fn, self.visit_fn)
    }
}

impl Fusion {
    /// The C++ of the fusion with names prefixed by `prefix` (a C identifier): the struct
    /// `{prefix}_params` and the function `{prefix}_visit`. Deterministic; each line of the
    /// function names the node it comes from.
    pub fn emit(&self, prefix: &str) -> Result<FusionCode, FusionError> {
        check_ident(prefix)?;
        let struct_name = format!("{prefix}_params");
        let fn_name = format!("{prefix}_visit");
        let header = format!("// rcute fusion {}: {}\n", self.name, self.describe());
        let mut s = header.clone();
        let _ = writeln!(s, "struct {struct_name} {{");
        for p in &self.params {
            let _ = writeln!(s, "  alignas(8) {} {};  // {}", p.kind.cpp_type(), p.name, p.node);
        }
        s.push_str("};\n");
        let f = self.visit_fn(
            header,
            &format!("{fn_name}(const {struct_name}& p, float acc, float c, int m, int n, int l)"),
            None,
        );
        let source_needed = match &self.source {
            SourceUse::Never => "false".into(),
            SourceUse::Always => "true".into(),
            SourceUse::WhenNonZero(names) => names
                .iter()
                .map(|n| format!("p.{n} != 0.0f"))
                .collect::<Vec<_>>()
                .join(" || "),
        };
        Ok(FusionCode {
            params_struct: s,
            device_fn: f,
            source_needed,
            fn_name,
            struct_name,
            staged: None,
        })
    }
    /// `header`, then `__device__ __forceinline__ float {signature} { ... }`: the tree's
    /// statements, one per node, with broadcasts read as `staged` says.
    fn visit_fn(&self, header: String, signature: &str, staged: Option<Vec<StagedBroadcast>>) -> String {
        let mut f = header;
        let _ = writeln!(f, "__device__ __forceinline__ float {signature} {{");
        let mut em = Emitter {
            lines: Vec::new(),
            next: 0,
            staged,
        };
        let v = em.node(&self.root);
        for line in &em.lines {
            let _ = writeln!(f, "  {line}");
        }
        let _ = writeln!(f, "  return {v};");
        f.push_str("}\n");
        f
    }

    /// The tree's broadcast vectors, each once, in the order [`Fusion::emit`] first reads them.
    pub fn broadcasts(&self) -> Vec<Broadcast> {
        fn walk(n: &Node, out: &mut Vec<Broadcast>) {
            let b = match n {
                Node::RowBroadcast {
                    name,
                    elem,
                    batch_stride,
                } => Some((name, elem, BroadcastAxis::Row, batch_stride)),
                Node::ColBroadcast {
                    name,
                    elem,
                    batch_stride,
                } => Some((name, elem, BroadcastAxis::Col, batch_stride)),
                _ => None,
            };
            if let Some((name, elem, axis, batch_stride)) = b {
                if !out.iter().any(|x| &x.name == name) {
                    out.push(Broadcast {
                        name: name.clone(),
                        elem: *elem,
                        axis,
                        batch_stride: *batch_stride,
                    });
                }
            }
            for c in n.children() {
                walk(c, out);
            }
        }
        let mut out = Vec::new();
        walk(&self.root, &mut out);
        out
    }

    /// The staging area of a `bm x bn` tile: one slot of `bn` floats per row broadcast and
    /// of `bm` floats per column broadcast, in [`Fusion::broadcasts`] order.
    pub fn staging_layout(&self, bm: i64, bn: i64) -> Vec<StagedBroadcast> {
        let mut offset = 0;
        self.broadcasts()
            .into_iter()
            .map(|b| {
                let extent = match b.axis {
                    BroadcastAxis::Row => bn,
                    BroadcastAxis::Col => bm,
                };
                let slot = StagedBroadcast {
                    broadcast: b,
                    offset,
                    extent,
                };
                offset += extent;
                slot
            })
            .collect()
    }

    /// [`Fusion::emit`] plus the staged form for `bm x bn` tiles ([`StagedCode`]): a kernel
    /// loads each tile's broadcast vectors once (with `{prefix}_broadcast`), keeps them in
    /// shared memory, and calls `{prefix}_visit_staged` per element, instead of reading the
    /// vectors from device memory at every element. Same values as `{prefix}_visit`.
    ///
    /// ```
    /// use rcute_collective::fusion::{Fusion, ScaleKind};
    /// use rcute_atom::Element;
    /// let f = Fusion::scaled_mm(ScaleKind::PerRow, ScaleKind::PerCol, Some(Element::BF16)).unwrap();
    /// let code = f.emit_staged("ep", 128, 256).unwrap();
    /// let st = code.staged.unwrap();
    /// // a_scale (a column of 128 floats), b_scale and bias (rows of 256 floats each)
    /// assert_eq!(st.floats, 128 + 256 + 256);
    /// assert!(st.visit_fn.contains("bc[0 + lm]"));
    /// assert!(st.fetch_fn.contains("case 2: return"));
    /// ```
    pub fn emit_staged(&self, prefix: &str, bm: i64, bn: i64) -> Result<FusionCode, FusionError> {
        let mut code = self.emit(prefix)?;
        let layout = self.staging_layout(bm, bn);
        let floats = layout.iter().map(|b| b.extent).sum();
        let struct_name = &code.struct_name;
        let header = format!("// rcute fusion {} (broadcasts staged per {bm}x{bn} tile)\n", self.name);
        let mut fetch = header.clone();
        let _ = writeln!(fetch, "// Staging area of a tile (floats):");
        for b in &layout {
            let _ = writeln!(
                fetch,
                "//   [{}, {}) {} {:?} ({})",
                b.offset,
                b.offset + b.extent,
                b.broadcast.name,
                b.broadcast.axis,
                b.broadcast.elem
            );
        }
        let _ = writeln!(
            fetch,
            "__device__ __forceinline__ float {prefix}_broadcast(const {struct_name}& p, int k, int i, int l) {{"
        );
        fetch.push_str("  switch (k) {\n");
        for (k, b) in layout.iter().enumerate() {
            let bc = &b.broadcast;
            let idx = vector_index("i", &bc.name, bc.batch_stride);
            let _ = writeln!(
                fetch,
                "    case {k}: return {};",
                load_cpp(bc.elem, &format!("p.{}", bc.name), Some(&idx))
            );
        }
        fetch.push_str("  }\n  return 0.0f;\n}\n");
        let f = self.visit_fn(
            header,
            &format!(
                "{prefix}_visit_staged(const {struct_name}& p, float acc, float c, int m, int n, int l, const float* bc, int lm, int ln)"
            ),
            Some(layout.clone()),
        );
        code.staged = Some(StagedCode {
            visit_fn: f,
            fetch_fn: fetch,
            visit_name: format!("{prefix}_visit_staged"),
            fetch_name: format!("{prefix}_broadcast"),
            layout,
            floats,
        });
        Ok(code)
    }
}

/// A float literal that C++ parses to exactly `v`.
fn f32_lit(v: f32) -> String {
    if v.is_infinite() {
        let inf = "__int_as_float(0x7f800000)";
        return if v > 0.0 { inf.into() } else { format!("(-{inf})") };
    }
    format!("{v:?}f")
}

/// `float` from element `e` at `ptr + idx` through `__ldg`.
fn load_cpp(e: Element, ptr: &str, idx: Option<&str>) -> String {
    let at = |p: String| match idx {
        None => p,
        Some(i) if i.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') => format!("{p} + {i}"),
        Some(i) => format!("{p} + ({i})"),
    };
    match e {
        Element::E4M3 | Element::E5M2 => {
            let kind = if e == Element::E4M3 { "__NV_E4M3" } else { "__NV_E5M2" };
            let byte = at(format!("reinterpret_cast<const unsigned char*>({ptr})"));
            format!("__half2float(__half(__nv_cvt_fp8_to_halfraw(__ldg({byte}), {kind})))")
        }
        Element::S8 | Element::U8 | Element::S32 => format!("(float)__ldg({})", at(ptr.into())),
        _ => convert_to_f32(e, &format!("__ldg({})", at(ptr.into()))),
    }
}

/// `x` (a float expression) converted to element `e` as stored.
fn store_cpp(e: Element, x: &str) -> String {
    match e {
        Element::E4M3 => format!("__nv_fp8_e4m3({x})"),
        Element::E5M2 => format!("__nv_fp8_e5m2({x})"),
        Element::S8 => format!("(signed char)max(-128, min(127, __float2int_rn({x})))"),
        Element::U8 => format!("(unsigned char)max(0, min(255, __float2int_rn({x})))"),
        Element::S32 => format!("__float2int_rn({x})"),
        _ => convert_from_f32(e, x),
    }
}

/// `x` rounded to `e` and back to float.
fn convert_cpp(e: Element, x: &str) -> String {
    match e {
        Element::E4M3 | Element::E5M2 => format!("static_cast<float>({})", store_cpp(e, x)),
        Element::S8 => format!("(float)max(-128, min(127, __float2int_rn({x})))"),
        Element::U8 => format!("(float)max(0, min(255, __float2int_rn({x})))"),
        Element::S32 => format!("(float)__float2int_rn({x})"),
        _ => convert_to_f32(e, &convert_from_f32(e, x)),
    }
}

fn matrix_index(name: &str) -> String {
    format!("(long long)l * p.{name}_batch_stride + (long long)m * p.{name}_ld + n")
}

fn vector_index(coord: &str, name: &str, batch_stride: bool) -> String {
    if batch_stride {
        format!("{coord} + (long long)l * p.{name}_batch_stride")
    } else {
        coord.into()
    }
}

struct Emitter {
    lines: Vec<String>,
    next: usize,
    /// Where broadcast vectors are read from: `None` for device memory (`__ldg`), or the
    /// staging layout (`bc[offset + lm | ln]` in shared memory).
    staged: Option<Vec<StagedBroadcast>>,
}

impl Emitter {
    fn def(&mut self, expr: String, node: &Node) -> String {
        let v = format!("v{}", self.next);
        self.next += 1;
        self.lines
            .push(format!("const float {v} = {expr};  // {}", node.label()));
        v
    }

    /// Emits `node` (operands first) and returns the variable holding its value.
    fn node(&mut self, node: &Node) -> String {
        match node {
            Node::Accumulator => self.def("acc".into(), node),
            Node::Source => self.def("c".into(), node),
            Node::Scalar { name } => self.def(format!("p.{name}"), node),
            Node::ScalarPtr { name, elem } => self.def(load_cpp(*elem, &format!("p.{name}"), None), node),
            Node::RowBroadcast { name, .. } | Node::ColBroadcast { name, .. } if self.staged.is_some() => {
                let slot = self
                    .staged
                    .as_ref()
                    .and_then(|v| v.iter().find(|b| &b.broadcast.name == name))
                    .expect("every broadcast of the tree has a staging slot");
                let local = match slot.broadcast.axis {
                    BroadcastAxis::Row => "ln",
                    BroadcastAxis::Col => "lm",
                };
                self.def(format!("bc[{} + {local}]", slot.offset), node)
            }
            Node::RowBroadcast {
                name,
                elem,
                batch_stride,
            } => {
                let idx = vector_index("n", name, *batch_stride);
                self.def(load_cpp(*elem, &format!("p.{name}"), Some(&idx)), node)
            }
            Node::ColBroadcast {
                name,
                elem,
                batch_stride,
            } => {
                let idx = vector_index("m", name, *batch_stride);
                self.def(load_cpp(*elem, &format!("p.{name}"), Some(&idx)), node)
            }
            Node::AuxLoad { name, elem } => {
                self.def(load_cpp(*elem, &format!("p.{name}"), Some(&matrix_index(name))), node)
            }
            Node::AuxStore { name, elem, child } => {
                let v = self.node(child);
                self.lines.push(format!(
                    "p.{name}[{}] = {};  // {}",
                    matrix_index(name),
                    store_cpp(*elem, &v),
                    node.label()
                ));
                v
            }
            Node::Compute { op, args } => {
                let a: Vec<String> = args.iter().map(|x| self.node(x)).collect();
                let x = a[0].as_str();
                let expr = match *op {
                    ComputeOp::Multiply => a.join(" * "),
                    ComputeOp::Add => a.join(" + "),
                    ComputeOp::Subtract => format!("{} - {}", a[0], a[1]),
                    ComputeOp::MultiplyAdd => format!("fmaf({}, {}, {})", a[0], a[1], a[2]),
                    ComputeOp::Negate => format!("-{x}"),
                    ComputeOp::ReLU => format!("fmaxf({x}, 0.0f)"),
                    ComputeOp::Gelu => format!("0.5f * {x} * (1.0f + erff({x} * 0.70710678f))"),
                    ComputeOp::GeluTanh => {
                        format!("0.5f * {x} * (1.0f + tanhf(0.7978845608f * ({x} + 0.044715f * {x} * {x} * {x})))")
                    }
                    ComputeOp::Silu => format!("{x} / (1.0f + expf(-{x}))"),
                    ComputeOp::Sigmoid => format!("1.0f / (1.0f + expf(-{x}))"),
                    ComputeOp::Clamp { lo, hi } => format!("fminf(fmaxf({x}, {}), {})", f32_lit(lo), f32_lit(hi)),
                    ComputeOp::Convert(e) => convert_cpp(e, x),
                };
                self.def(expr, node)
            }
        }
    }
}
