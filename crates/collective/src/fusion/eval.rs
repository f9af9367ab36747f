//! The CPU reference of a fusion ([`Fusion::eval`]) and its host inputs ([`HostInputs`]).

use std::collections::BTreeMap;

use super::args::FusionArgs;
use super::element::round_to_element;
use super::error::FusionError;
use super::node::{ComputeOp, Node};
use super::tree::Fusion;

/// Host data for [`Fusion::eval`]: the accumulator and C as dense `(L, M, N)` arrays
/// (index `(l * M + m) * N + n`), and the contents of every pointer field by name, indexed
/// exactly as the device indexes them (strides and leading dimensions from the
/// [`FusionArgs`]; a [`Node::ScalarPtr`] reads element 0). Values are the decoded
/// elements; loads round them to f32 as the device does.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct HostInputs {
    /// `(M, N, L)`.
    pub shape: [i64; 3],
    /// The accumulator, `M * N * L` values.
    pub acc: Vec<f64>,
    /// C, `M * N * L` values (may be empty when C is not read).
    pub c: Vec<f64>,
    /// Pointer contents by field name.
    pub tensors: BTreeMap<String, Vec<f64>>,
}

impl HostInputs {
    /// Empty inputs of shape `(m, n, l)`.
    pub fn new(m: i64, n: i64, l: i64) -> HostInputs {
        HostInputs {
            shape: [m, n, l],
            ..HostInputs::default()
        }
    }

    /// Sets the accumulator.
    pub fn with_acc(mut self, acc: Vec<f64>) -> HostInputs {
        self.acc = acc;
        self
    }

    /// Sets C.
    pub fn with_c(mut self, c: Vec<f64>) -> HostInputs {
        self.c = c;
        self
    }

    /// Sets the contents of the pointer field `name`.
    pub fn with_tensor(mut self, name: impl Into<String>, values: Vec<f64>) -> HostInputs {
        self.tensors.insert(name.into(), values);
        self
    }

    pub(super) fn read(name: &str, data: &[f64], index: i64) -> Result<f64, FusionError> {
        usize::try_from(index)
            .ok()
            .and_then(|i| data.get(i))
            .map(|&v| v as f32 as f64)
            .ok_or(FusionError::HostIndex {
                name: name.into(),
                index,
                len: data.len(),
            })
    }

    pub(super) fn tensor(&self, name: &str, index: i64) -> Result<f64, FusionError> {
        let data = self
            .tensors
            .get(name)
            .ok_or_else(|| FusionError::MissingHostInput { name: name.into() })?;
        Self::read(name, data, index)
    }
}

impl Fusion {
    /// The CPU reference of the visit function at `(m, n, l)`, in f64: loads, the
    /// accumulator, C and scalars are rounded to f32 as the device sees them, compute is
    /// exact-ish f64, [`ComputeOp::Convert`] rounds through f32 to the type
    /// ([`round_to_element`]). C counts as 0 when it is not needed ([`Fusion::needs_source`]).
    /// Pointer arguments are not needed; floats and strides are.
    pub fn eval(&self, args: &FusionArgs, host: &HostInputs, m: i64, n: i64, l: i64) -> Result<f64, FusionError> {
        self.eval_with_stores(args, host, m, n, l).map(|(v, _)| v)
    }

    /// [`Fusion::eval`], and the values the aux stores write (decoded, after rounding to
    /// their types), in evaluation order.
    pub fn eval_with_stores(
        &self,
        args: &FusionArgs,
        host: &HostInputs,
        m: i64,
        n: i64,
        l: i64,
    ) -> Result<(f64, Vec<(String, f64)>), FusionError> {
        let [mm, nn, ll] = host.shape;
        for (name, v, ext) in [("m", m, mm), ("n", n, nn), ("l", l, ll)] {
            if v < 0 || v >= ext {
                return Err(FusionError::HostIndex {
                    name: name.into(),
                    index: v,
                    len: ext.max(0) as usize,
                });
            }
        }
        let at = (l * mm + m) * nn + n;
        if host.acc.is_empty() {
            return Err(FusionError::MissingHostInput { name: "acc".into() });
        }
        let acc = HostInputs::read("acc", &host.acc, at)?;
        let c = if self.needs_source(args)? {
            if host.c.is_empty() {
                return Err(FusionError::MissingHostInput { name: "c".into() });
            }
            HostInputs::read("c", &host.c, at)?
        } else {
            0.0
        };
        let mut ev = Eval {
            args,
            host,
            acc,
            c,
            m,
            n,
            l,
            stores: Vec::new(),
        };
        let v = ev.node(&self.root)?;
        Ok((v, ev.stores))
    }
}

struct Eval<'a> {
    args: &'a FusionArgs,
    host: &'a HostInputs,
    acc: f64,
    c: f64,
    m: i64,
    n: i64,
    l: i64,
    stores: Vec<(String, f64)>,
}

impl Eval<'_> {
    fn vector(&self, name: &str, coord: i64, batch_stride: bool) -> Result<f64, FusionError> {
        let idx = if batch_stride {
            coord + self.l * self.args.i64_of(&format!("{name}_batch_stride"))?
        } else {
            coord
        };
        self.host.tensor(name, idx)
    }

    fn matrix_index(&self, name: &str) -> Result<i64, FusionError> {
        let bs = self.args.i64_of(&format!("{name}_batch_stride"))?;
        let ld = self.args.i64_of(&format!("{name}_ld"))?;
        Ok(self.l * bs + self.m * ld + self.n)
    }

    fn node(&mut self, node: &Node) -> Result<f64, FusionError> {
        Ok(match node {
            Node::Accumulator => self.acc,
            Node::Source => self.c,
            Node::Scalar { name } => self.args.f32_of(name)? as f64,
            Node::ScalarPtr { name, .. } => self.host.tensor(name, 0)?,
            Node::RowBroadcast { name, batch_stride, .. } => self.vector(name, self.n, *batch_stride)?,
            Node::ColBroadcast { name, batch_stride, .. } => self.vector(name, self.m, *batch_stride)?,
            Node::AuxLoad { name, .. } => {
                let i = self.matrix_index(name)?;
                self.host.tensor(name, i)?
            }
            Node::AuxStore { name, elem, child } => {
                let v = self.node(child)?;
                self.matrix_index(name)?;
                self.stores
                    .push((name.clone(), round_to_element(*elem, v as f32) as f64));
                v
            }
            Node::Compute { op, args } => {
                let a = args.iter().map(|x| self.node(x)).collect::<Result<Vec<f64>, _>>()?;
                let x = a[0];
                match *op {
                    ComputeOp::Multiply => a.iter().product(),
                    ComputeOp::Add => a.iter().sum(),
                    ComputeOp::Subtract => a[0] - a[1],
                    ComputeOp::MultiplyAdd => a[0] * a[1] + a[2],
                    ComputeOp::Negate => -x,
                    ComputeOp::ReLU => x.max(0.0),
                    ComputeOp::Gelu => 0.5 * x * (1.0 + erf(x * std::f64::consts::FRAC_1_SQRT_2)),
                    ComputeOp::GeluTanh => {
                        let k = (2.0 / std::f64::consts::PI).sqrt();
                        0.5 * x * (1.0 + (k * (x + 0.044715 * x * x * x)).tanh())
                    }
                    ComputeOp::Silu => x / (1.0 + (-x).exp()),
                    ComputeOp::Sigmoid => 1.0 / (1.0 + (-x).exp()),
                    ComputeOp::Clamp { lo, hi } => x.max(lo as f64).min(hi as f64),
                    ComputeOp::Convert(e) => round_to_element(e, x as f32) as f64,
                }
            }
        })
    }
}

/// The error function, to about 1e-15 relative: `2/sqrt(pi) exp(-x^2) sum_k 2^k x^(2k+1) /
/// (2k+1)!!` (all terms positive), and `±1` beyond `|x| = 6`.
fn erf(x: f64) -> f64 {
    if x.is_nan() {
        return x;
    }
    let a = x.abs();
    if a >= 6.0 {
        return 1f64.copysign(x);
    }
    let x2 = a * a;
    let (mut term, mut sum) = (a, a);
    for k in 1..1000 {
        term *= 2.0 * x2 / (2 * k + 1) as f64;
        sum += term;
        if term <= sum * 1e-17 {
            break;
        }
    }
    (std::f64::consts::FRAC_2_SQRT_PI * (-x2).exp() * sum).copysign(x)
}
