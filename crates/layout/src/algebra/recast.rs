//! `upcast` / `downcast`: view a layout of elements as a layout of wider or narrower ones.

use crate::error::{ErrorKind, Result};
use crate::int::{gcd, s, Int};
use crate::layout::Layout;
use crate::lerr;

impl Layout {
    /// CuTe's `upcast<N>`: group `N` elements into one; the stride-1 mode shrinks by `N`
    /// and other strides are divided by `N`.
    ///
    /// ```
    /// use rcute_layout::{tuple, Layout};
    /// let l = Layout::new(tuple!(8, 4), tuple!(1, 8)).unwrap();
    /// assert_eq!(l.upcast(2).unwrap().to_string(), "(4,4):(1,4)");
    /// ```
    pub fn upcast(&self, n: i64) -> Result<Layout> {
        if n <= 0 {
            return Err(lerr!(
                "upcast",
                [self, n],
                ErrorKind::Invalid("N must be positive".into())
            ));
        }
        let nn = s(n);
        let mut err = None;
        let mut f = |sh: &Int, d: &Int| -> (Int, Int) {
            if d.is_const(0) {
                return (sh.clone(), d.clone());
            }
            match d.as_static() {
                Some(dv) => {
                    if dv.wrapping_rem(n) != 0 && n.wrapping_rem(dv) != 0 {
                        err = Some(lerr!(
                            "upcast",
                            [self, n],
                            ErrorKind::Divisibility(format!("stride {dv} and {n} do not divide each other"))
                        ));
                        return (sh.clone(), d.clone());
                    }
                    // |dv| and ceil(|dv| / n) in i128: exact for every i64 stride.
                    let mag = (dv as i128).abs();
                    let k = nn.ceil_div(&s(mag.min(i64::MAX as i128) as i64)).unwrap_or(s(1));
                    let new_sh = sh.ceil_div(&k).unwrap_or_else(|| sh.clone());
                    let q = (mag + n as i128 - 1) / n as i128;
                    (new_sh, s(dv.signum() * q.min(i64::MAX as i128) as i64))
                }
                None => (sh.clone(), d.div(&nn).unwrap_or_else(|| d.clone())),
            }
        };
        let pairs = self.shape().zip_with(self.stride(), &mut |a, b| f(a, b));
        if let Some(e) = err {
            return Err(e);
        }
        let pairs = pairs.ok_or_else(|| lerr!("upcast", [self], ErrorKind::NotCongruent))?;
        Ok(Layout::raw(
            pairs.map(&mut |p| p.0.clone()),
            pairs.map(&mut |p| p.1.clone()),
        ))
    }

    /// CuTe's `downcast<N>`: split each element into `N`; the stride-±1 modes grow by `N`
    /// and other strides are multiplied by `N`. Needs a static stride-1 mode.
    ///
    /// ```
    /// use rcute_layout::{tuple, Layout};
    /// let l = Layout::new(tuple!(4, 4), tuple!(1, 4)).unwrap();
    /// assert_eq!(l.downcast(2).unwrap().to_string(), "(8,4):(1,8)");
    /// ```
    pub fn downcast(&self, n: i64) -> Result<Layout> {
        if n <= 0 {
            return Err(lerr!(
                "downcast",
                [self, n],
                ErrorKind::Invalid("N must be positive".into())
            ));
        }
        if !self.stride().leaves().iter().any(|d| d.is_const(1)) {
            return Err(lerr!(
                "downcast",
                [self, n],
                ErrorKind::Invalid("downcast requires adjacent elements (a static stride-1 mode)".into())
            ));
        }
        let nn = s(n);
        let pairs = self
            .shape()
            .zip_with(self.stride(), &mut |sh, d| {
                if d.is_const(1) || d.is_const(-1) {
                    (sh.mul(&nn), d.clone())
                } else {
                    (sh.clone(), d.mul(&nn))
                }
            })
            .ok_or_else(|| lerr!("downcast", [self], ErrorKind::NotCongruent))?;
        Ok(Layout::raw(
            pairs.map(&mut |p| p.0.clone()),
            pairs.map(&mut |p| p.1.clone()),
        ))
    }

    /// CuTe's `recast_layout<Old, New>` by bit widths: the layout of `new_bits`-wide
    /// elements over the same memory as `self`'s `old_bits`-wide elements.
    ///
    /// ```
    /// use rcute_layout::{tuple, Layout};
    /// let halfs = Layout::new(tuple!(8, 4), tuple!(1, 8)).unwrap();
    /// assert_eq!(halfs.recast(16, 128).unwrap().to_string(), "(1,4):(1,1)");
    /// ```
    pub fn recast(&self, old_bits: i64, new_bits: i64) -> Result<Layout> {
        if old_bits <= 0 || new_bits <= 0 {
            return Err(lerr!(
                "recast_layout",
                [self, old_bits, new_bits],
                ErrorKind::Invalid("bit widths must be positive".into())
            ));
        }
        let g = gcd(old_bits, new_bits);
        let (num, den) = (new_bits / g, old_bits / g);
        match (num, den) {
            (1, 1) => Ok(self.clone()),
            (1, _) => self.downcast(den),
            (_, 1) => self.upcast(num),
            _ => self.upcast(num)?.downcast(den),
        }
    }
}
