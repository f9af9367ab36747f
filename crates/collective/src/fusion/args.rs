//! Host-side arguments of a fusion ([`FusionArgs`]) and their packing into the bytes of the
//! parameter struct.

use std::collections::BTreeMap;

use super::error::FusionError;
use super::params::{FusionParam, ParamKind};
use super::tree::Fusion;
use super::validate::SourceUse;

/// A value of [`FusionArgs`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ArgValue {
    /// For a `float` field.
    F32(f32),
    /// A device address, for a pointer field.
    Ptr(u64),
    /// For a `long long` field.
    I64(i64),
}

impl ArgValue {
    fn word(self) -> &'static str {
        match self {
            ArgValue::F32(_) => "f32",
            ArgValue::Ptr(_) => "pointer",
            ArgValue::I64(_) => "i64",
        }
    }
}

/// Host-side values of the parameter struct's fields, by field name.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FusionArgs {
    values: BTreeMap<String, ArgValue>,
}

impl FusionArgs {
    /// No values.
    pub fn new() -> FusionArgs {
        FusionArgs::default()
    }

    /// Sets `name` to `v` (replacing an earlier value).
    pub fn set(&mut self, name: impl Into<String>, v: ArgValue) {
        self.values.insert(name.into(), v);
    }

    /// Sets the float field `name`.
    pub fn f32(mut self, name: impl Into<String>, v: f32) -> FusionArgs {
        self.set(name, ArgValue::F32(v));
        self
    }

    /// Sets the pointer field `name` to the device address `v`.
    pub fn ptr(mut self, name: impl Into<String>, v: u64) -> FusionArgs {
        self.set(name, ArgValue::Ptr(v));
        self
    }

    /// Sets the `long long` field `name` (a stride or leading dimension, in elements).
    pub fn i64(mut self, name: impl Into<String>, v: i64) -> FusionArgs {
        self.set(name, ArgValue::I64(v));
        self
    }

    /// The value of `name`, if set.
    pub fn get(&self, name: &str) -> Option<ArgValue> {
        self.values.get(name).copied()
    }

    fn typed(&self, p: &FusionParam) -> Result<ArgValue, FusionError> {
        let v = self
            .get(&p.name)
            .ok_or_else(|| FusionError::MissingArg { name: p.name.clone() })?;
        let ok = matches!(
            (p.kind, v),
            (ParamKind::F32, ArgValue::F32(_))
                | (ParamKind::Ptr { .. }, ArgValue::Ptr(_))
                | (ParamKind::I64, ArgValue::I64(_))
        );
        if !ok {
            return Err(FusionError::ArgType {
                name: p.name.clone(),
                expected: p.kind.word(),
                got: v.word(),
            });
        }
        Ok(v)
    }

    pub(super) fn f32_of(&self, name: &str) -> Result<f32, FusionError> {
        match self.get(name) {
            Some(ArgValue::F32(v)) => Ok(v),
            Some(v) => Err(FusionError::ArgType {
                name: name.into(),
                expected: "f32",
                got: v.word(),
            }),
            None => Err(FusionError::MissingArg { name: name.into() }),
        }
    }

    pub(super) fn i64_of(&self, name: &str) -> Result<i64, FusionError> {
        match self.get(name) {
            Some(ArgValue::I64(v)) => Ok(v),
            Some(v) => Err(FusionError::ArgType {
                name: name.into(),
                expected: "i64",
                got: v.word(),
            }),
            None => Err(FusionError::MissingArg { name: name.into() }),
        }
    }

    /// The bytes of `fusion`'s parameter struct: 8 bytes per field in [`Fusion::params`]
    /// order, little endian (a float in the low 4 bytes, the high 4 zero). Pass them with
    /// `rcute_kernel::KernelArgs::blob`. Every field must be set with its kind, no other
    /// name may be set, and pointers must be non-null and aligned to their element.
    pub fn pack(&self, fusion: &Fusion) -> Result<Vec<u8>, FusionError> {
        let mut out = Vec::with_capacity(8 * fusion.params.len());
        for p in &fusion.params {
            match (p.kind, self.typed(p)?) {
                (_, ArgValue::F32(v)) => {
                    out.extend_from_slice(&v.to_le_bytes());
                    out.extend_from_slice(&[0; 4]);
                }
                (ParamKind::Ptr { elem, .. }, ArgValue::Ptr(v)) => {
                    if v == 0 {
                        return Err(FusionError::NullPointer { name: p.name.clone() });
                    }
                    if v % elem.bytes() as u64 != 0 {
                        return Err(FusionError::Misaligned {
                            name: p.name.clone(),
                            ptr: v,
                            align: elem.bytes(),
                        });
                    }
                    out.extend_from_slice(&v.to_le_bytes());
                }
                (_, ArgValue::Ptr(v)) => out.extend_from_slice(&v.to_le_bytes()),
                (_, ArgValue::I64(v)) => out.extend_from_slice(&v.to_le_bytes()),
            }
        }
        if let Some(extra) = self
            .values
            .keys()
            .find(|k| !fusion.params.iter().any(|p| &p.name == *k))
        {
            return Err(FusionError::UnknownArg { name: extra.clone() });
        }
        Ok(out)
    }
}

impl Fusion {
    /// Whether C must be read with these arguments (the host side of
    /// [`FusionCode::source_needed`](super::FusionCode::source_needed)).
    pub fn needs_source(&self, args: &FusionArgs) -> Result<bool, FusionError> {
        match &self.source {
            SourceUse::Never => Ok(false),
            SourceUse::Always => Ok(true),
            SourceUse::WhenNonZero(names) => {
                for n in names {
                    if args.f32_of(n)? != 0.0 {
                        return Ok(true);
                    }
                }
                Ok(false)
            }
        }
    }
}
