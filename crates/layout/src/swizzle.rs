//! [`Swizzle`]: CuTe's `Swizzle<B,M,S>`, the XOR permutation of offsets used to avoid
//! shared-memory bank conflicts.
//!
//! An offset is read as bit fields `...YYY...ZZZ[M bits]`: the `B` bits starting at bit
//! `M + max(0,S)` (the Y mask) are XOR-ed into the `B` bits starting at bit `M - min(0,S)`
//! (the Z mask). `|S| >= B` keeps the two masks disjoint, so a swizzle is an involution:
//! applying it twice gives the offset back.
//!
//! ```
//! use rcute_layout::Swizzle;
//! let sw = Swizzle::new(3, 3, 3).unwrap();
//! assert_eq!(sw.to_string(), "Sw<3,3,3>");
//! assert_eq!(sw.apply(64 + 8), 64);       // Y bit 6 flips Z bit 3
//! assert_eq!(sw.apply(sw.apply(1234)), 1234);
//! ```

use crate::error::{ErrorKind, Result};
use crate::expr::Expr;
use crate::int::Int;
use crate::lerr;
use std::fmt;
use std::str::FromStr;

/// CuTe's `Swizzle<B,M,S>`: XOR the `B` bits at `M + max(0,S)` into the `B` bits at
/// `M - min(0,S)`. Built with [`Swizzle::new`], which enforces CuTe's conditions.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Swizzle {
    bits: u32,
    base: u32,
    shift: i32,
}

/// The largest bit position a swizzle may touch (offsets are `i64`).
const MAX_BIT: i64 = 62;

impl Swizzle {
    /// `Swizzle<B,M,S>`, rejecting what CuTe's `static_assert`s reject (`B < 0`, `M < 0`,
    /// `|S| < B`) and masks that do not fit in a 64-bit offset.
    ///
    /// ```
    /// use rcute_layout::Swizzle;
    /// assert!(Swizzle::new(3, 4, 3).is_ok());
    /// assert!(Swizzle::new(3, 4, 2).is_err()); // |S| < B: masks overlap
    /// assert!(Swizzle::new(-1, 4, 3).is_err());
    /// ```
    pub fn new(bits: i32, base: i32, shift: i32) -> Result<Swizzle> {
        let bad = |why: &str| Err(lerr!("Swizzle", [bits, base, shift], ErrorKind::Invalid(why.into())));
        if bits < 0 {
            return bad("BBits must be non-negative");
        }
        if base < 0 {
            return bad("MBase must be non-negative");
        }
        if (shift as i64).abs() < bits as i64 {
            return bad("abs(SShift) must be at least BBits");
        }
        if bits as i64 + base as i64 + (shift as i64).abs() > MAX_BIT {
            return bad("swizzle masks do not fit in a 64-bit offset");
        }
        Ok(Swizzle {
            bits: bits as u32,
            base: base as u32,
            shift,
        })
    }
    /// The identity swizzle CuTe uses for non-swizzled layouts (`Swizzle<0,4,3>`).
    pub const fn identity() -> Swizzle {
        Swizzle {
            bits: 0,
            base: 4,
            shift: 3,
        }
    }
    /// `B`: the number of bits in each mask.
    pub fn bits(&self) -> u32 {
        self.bits
    }
    /// `M`: the number of least-significant bits left alone.
    pub fn base(&self) -> u32 {
        self.base
    }
    /// `S`: the distance from the Y mask down to the Z mask (negative: Y is below Z).
    pub fn shift(&self) -> i32 {
        self.shift
    }
    /// True when the swizzle is the identity function (`B == 0`).
    pub fn is_identity(&self) -> bool {
        self.bits == 0
    }
    /// `(1 << B) - 1` (CuTe's `bit_msk`).
    pub fn bit_mask(&self) -> i64 {
        (1i64 << self.bits) - 1
    }
    /// The bits that are read (CuTe's `yyy_msk`).
    ///
    /// ```
    /// use rcute_layout::Swizzle;
    /// let sw = Swizzle::new(3, 3, 3).unwrap();
    /// assert_eq!((sw.yyy_mask(), sw.zzz_mask()), (0b111_000_000, 0b000_111_000));
    /// let neg = Swizzle::new(2, 1, -3).unwrap();
    /// assert_eq!((neg.yyy_mask(), neg.zzz_mask()), (0b0_00_110, 0b1_10_000));
    /// ```
    pub fn yyy_mask(&self) -> i64 {
        self.bit_mask() << (self.base as i64 + (self.shift as i64).max(0))
    }
    /// The bits that are flipped (CuTe's `zzz_msk`).
    pub fn zzz_mask(&self) -> i64 {
        self.bit_mask() << (self.base as i64 - (self.shift as i64).min(0))
    }
    /// `yyy_mask | zzz_mask` (CuTe's `swizzle_code`).
    pub fn swizzle_code(&self) -> i64 {
        self.yyy_mask() | self.zzz_mask()
    }
    /// Apply to an offset: `offset ^ shiftr(offset & yyy_mask, S)`.
    ///
    /// ```
    /// use rcute_layout::Swizzle;
    /// let sw = Swizzle::new(2, 0, -2).unwrap(); // Y = bits 0..2, Z = bits 2..4
    /// assert_eq!(sw.apply(0b0011), 0b1111);
    /// ```
    pub fn apply(&self, offset: i64) -> i64 {
        offset ^ shiftr(offset & self.yyy_mask(), self.shift)
    }
    /// Apply to a static or symbolic offset. Known values are swizzled now; a symbolic
    /// offset `x` becomes the expression `x ^ ((x & yyy) >> S)` (`<< -S` for negative `S`).
    ///
    /// ```
    /// use rcute_layout::{d, s, Swizzle};
    /// let sw = Swizzle::new(3, 4, 3).unwrap();
    /// assert_eq!(sw.apply_expr(&s(0x80)), s(0x80 ^ 0x10));
    /// assert_eq!(sw.apply_expr(&d("x")).to_cpp(), "x ^ ((x & 896) >> 3)");
    /// assert_eq!(Swizzle::new(0, 4, 3).unwrap().apply_expr(&d("x")), d("x"));
    /// ```
    pub fn apply_expr(&self, offset: &Int) -> Int {
        match offset {
            Int::Static(v) => Int::Static(self.apply(*v)),
            Int::Dynamic(e) => match e.as_lit() {
                Some(v) => Int::dyn_lit(self.apply(v)),
                None if self.is_identity() => offset.clone(),
                None => {
                    let y = e.and(&Expr::lit(self.yyy_mask()));
                    let moved = if self.shift >= 0 {
                        y.shr(&Expr::lit(self.shift as i64))
                    } else {
                        y.shl(&Expr::lit(-(self.shift as i64)))
                    };
                    Int::Dynamic(e.xor(&moved))
                }
            },
        }
    }
    /// CuTe's `make_swizzle<Y, Z>()`: the swizzle whose Y and Z masks are `y` and `z`.
    ///
    /// ```
    /// use rcute_layout::Swizzle;
    /// assert_eq!(Swizzle::from_masks(0b1000, 0b0100).unwrap().to_string(), "Sw<1,2,1>");
    /// assert_eq!(Swizzle::from_masks(0b1100_0000, 0b0000_0110).unwrap().to_string(), "Sw<2,1,5>");
    /// ```
    pub fn from_masks(y: i64, z: i64) -> Result<Swizzle> {
        let err = |why: String| lerr!("make_swizzle", [y, z], ErrorKind::Invalid(why));
        if y < 0 || z < 0 {
            return Err(err("masks must be non-negative".into()));
        }
        let (by, bz) = (y.count_ones(), z.count_ones());
        if by != bz {
            return Err(err(format!("number of bits in Y ({by}) and Z ({bz}) differ")));
        }
        if by == 0 {
            // No active bits: the identity swizzle (as CuTe's make_swizzle<0,0> gives Sw<0,0,0>).
            return Swizzle::new(0, 0, 0);
        }
        let (ty, tz) = (y.trailing_zeros() as i32, z.trailing_zeros() as i32);
        let sw = Swizzle::new(by as i32, ty.min(tz), ty - tz)?;
        if (y | z) != sw.swizzle_code() {
            return Err(err("the masks are not contiguous bit fields of a swizzle".into()));
        }
        Ok(sw)
    }
    /// CuTe's `composition(Swizzle, Swizzle)`: merge two swizzles of the same shift.
    pub fn compose(&self, other: &Swizzle) -> Result<Swizzle> {
        if self.shift != other.shift {
            return Err(lerr!(
                "composition",
                [self, other],
                ErrorKind::Invalid("can only merge swizzles of the same shift".into())
            ));
        }
        Swizzle::from_masks(self.yyy_mask() ^ other.yyy_mask(), self.zzz_mask() ^ other.zzz_mask())
            .map_err(|e| e.within("composition", vec![self.to_string(), other.to_string()]))
    }
    /// CuTe's `upcast<N>(Swizzle)`: the swizzle of elements `N` times wider
    /// (`N` a power of two).
    ///
    /// ```
    /// use rcute_layout::Swizzle;
    /// let sw = Swizzle::new(3, 3, 3).unwrap();
    /// assert_eq!(sw.upcast(8).unwrap().to_string(), "Sw<3,0,3>");
    /// assert_eq!(sw.upcast(16).unwrap().to_string(), "Sw<2,0,3>");
    /// assert_eq!(sw.downcast(2).unwrap().to_string(), "Sw<3,4,3>");
    /// ```
    pub fn upcast(&self, n: i64) -> Result<Swizzle> {
        let log2 = log2_pow2("upcast", self, n)?;
        let m = self.base as i32 - log2;
        if m >= 0 {
            Swizzle::new(self.bits as i32, m, self.shift)
        } else {
            Swizzle::new((self.bits as i32 + m).max(0), 0, self.shift)
        }
    }
    /// CuTe's `downcast<N>(Swizzle)`: the swizzle of elements `N` times narrower.
    pub fn downcast(&self, n: i64) -> Result<Swizzle> {
        let log2 = log2_pow2("downcast", self, n)?;
        Swizzle::new(self.bits as i32, self.base as i32 + log2, self.shift)
    }
    /// CuTe's `recast_layout<Old,New>(Swizzle)` by bit widths.
    pub fn recast(&self, old_bits: i64, new_bits: i64) -> Result<Swizzle> {
        if old_bits <= 0 || new_bits <= 0 {
            return Err(lerr!(
                "recast_layout",
                [self, old_bits, new_bits],
                ErrorKind::Invalid("bit widths must be positive".into())
            ));
        }
        let g = crate::int::gcd(old_bits, new_bits);
        let (num, den) = (new_bits / g, old_bits / g);
        self.upcast(num)?.downcast(den)
    }
    /// CuTe's `max_alignment(Swizzle)`: `1 << M`, the longest run left contiguous.
    pub fn max_alignment(&self) -> i64 {
        1i64 << self.base
    }
}

fn log2_pow2(op: &'static str, sw: &Swizzle, n: i64) -> Result<i32> {
    if n <= 0 || n.count_ones() != 1 {
        return Err(lerr!(
            op,
            [sw, n],
            ErrorKind::Invalid("N must be a power of two".into())
        ));
    }
    Ok(n.trailing_zeros() as i32)
}

/// CuTe's `shiftr`: shift right by `s`, or left by `-s` for negative `s`.
fn shiftr(x: i64, s: i32) -> i64 {
    if s >= 0 {
        x >> s
    } else {
        x << (-s)
    }
}

/// `a ^ b` on static/dynamic integers (symbolic when either is symbolic).
pub(crate) fn int_xor(a: &Int, b: &Int) -> Int {
    match (a, b) {
        (Int::Static(x), Int::Static(y)) => Int::Static(x ^ y),
        _ if a.is_const(0) => b.clone(),
        _ if b.is_const(0) => a.clone(),
        _ => Int::Dynamic(a.expr().xor(&b.expr())),
    }
}

impl fmt::Display for Swizzle {
    /// CuTe's print form `Sw<B,M,S>`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Sw<{},{},{}>", self.bits, self.base, self.shift)
    }
}

impl fmt::Debug for Swizzle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self}")
    }
}

impl FromStr for Swizzle {
    type Err = crate::LayoutError;
    /// Parse `Sw<B,M,S>` (also `Swizzle<B,M,S>`; blanks allowed).
    ///
    /// ```
    /// use rcute_layout::Swizzle;
    /// let sw: Swizzle = "Sw<3, 4, 3>".parse().unwrap();
    /// assert_eq!(sw, Swizzle::new(3, 4, 3).unwrap());
    /// assert!("Sw<3,4>".parse::<Swizzle>().is_err());
    /// ```
    fn from_str(text: &str) -> Result<Swizzle> {
        let bad = || lerr!("parse_swizzle", [text], ErrorKind::Invalid("expected Sw<B,M,S>".into()));
        let t: String = text.chars().filter(|c| !c.is_whitespace()).collect();
        let body = t
            .strip_prefix("Sw<")
            .or_else(|| t.strip_prefix("Swizzle<"))
            .and_then(|r| r.strip_suffix('>'))
            .ok_or_else(bad)?;
        let v = body
            .split(',')
            .map(|x| x.parse::<i32>().map_err(|_| bad()))
            .collect::<Result<Vec<_>>>()?;
        match v[..] {
            [b, m, s] => Swizzle::new(b, m, s),
            _ => Err(bad()),
        }
    }
}
