//! The modifiers of a dotted opcode, consumed one by one so that any modifier the decoder
//! did not consume is reported instead of silently ignored.

use super::op::{FTy, IntTy};

/// `ld.global.v4.u32` → base `ld`, modifiers `global`, `v4`, `u32`.
pub struct Mods<'a> {
    /// The mnemonic before the first dot.
    pub base: &'a str,
    rest: Vec<&'a str>,
}

impl<'a> Mods<'a> {
    /// Splits an opcode.
    pub fn new(opcode: &'a str) -> Self {
        let mut parts = opcode.split('.');
        let base = parts.next().unwrap_or_default();
        Self { base, rest: parts.collect() }
    }

    /// Removes `m` if present; returns whether it was.
    pub fn has(&mut self, m: &str) -> bool {
        match self.rest.iter().position(|x| *x == m) {
            Some(i) => {
                self.rest.remove(i);
                true
            }
            None => false,
        }
    }

    /// Removes and returns the first modifier that is one of `options`.
    pub fn one_of<'o>(&mut self, options: &[&'o str]) -> Option<&'o str> {
        let (i, o) = self
            .rest
            .iter()
            .enumerate()
            .find_map(|(i, x)| options.iter().find(|o| **o == *x).map(|o| (i, *o)))?;
        self.rest.remove(i);
        Some(o)
    }

    /// Removes every modifier that is one of `options` (qualifiers without effect in the
    /// model, such as cache operators).
    pub fn ignore(&mut self, options: &[&str]) {
        self.rest.retain(|x| !options.contains(x));
    }

    /// Removes every modifier starting with `prefix` (e.g. `L2::`) and returns them.
    pub fn ignore_prefixed(&mut self, prefix: &str) -> Vec<&'a str> {
        let (taken, kept) = self.rest.iter().partition(|x| x.starts_with(prefix));
        self.rest = kept;
        taken
    }

    /// Removes and returns all type modifiers (`u32`, `f32`, `bf16x2`, ...), in order.
    pub fn types(&mut self) -> Vec<&'a str> {
        let (types, rest) = self.rest.iter().partition(|x| is_type(x));
        self.rest = rest;
        types
    }

    /// Fails naming the modifiers left over.
    pub fn finish(self) -> Result<(), String> {
        if self.rest.is_empty() {
            return Ok(());
        }
        let left: Vec<String> = self.rest.iter().map(|m| format!(".{m}")).collect();
        Err(format!("unsupported modifier(s) {} of `{}`", left.join(" "), self.base))
    }
}

fn is_type(m: &str) -> bool {
    matches!(
        m,
        "b8" | "b16"
            | "b32"
            | "b64"
            | "b128"
            | "u8"
            | "u16"
            | "u32"
            | "u64"
            | "s8"
            | "s16"
            | "s32"
            | "s64"
            | "f16"
            | "f16x2"
            | "bf16"
            | "bf16x2"
            | "tf32"
            | "f32"
            | "f64"
            | "pred"
    )
}

/// An integer type name → [`IntTy`] (`pred` is 1 bit).
pub fn int_ty(t: &str) -> Option<IntTy> {
    let (signed, bits) = match t {
        "pred" => return Some(IntTy { bits: 1, signed: false }),
        _ if t.starts_with('s') => (true, &t[1..]),
        _ if t.starts_with('u') || t.starts_with('b') => (false, &t[1..]),
        _ => return None,
    };
    let bits: u8 = bits.parse().ok()?;
    matches!(bits, 8 | 16 | 32 | 64).then_some(IntTy { bits, signed })
}

/// `f32` / `f64` → [`FTy`].
pub fn float_ty(t: &str) -> Option<FTy> {
    match t {
        "f32" => Some(FTy::F32),
        "f64" => Some(FTy::F64),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn consumes_modifiers_and_reports_leftovers() {
        let mut m = Mods::new("ld.global.nc.v4.u32");
        assert_eq!(m.base, "ld");
        assert_eq!(m.one_of(&["global", "shared"]), Some("global"));
        assert!(m.has("nc"));
        assert_eq!(m.types(), ["u32"]);
        assert!(!m.has("v2"));
        assert_eq!(m.finish().unwrap_err(), "unsupported modifier(s) .v4 of `ld`");
        assert_eq!(int_ty("s32"), Some(IntTy { bits: 32, signed: true }));
        assert_eq!(int_ty("b64"), Some(IntTy { bits: 64, signed: false }));
        assert_eq!(int_ty("f32"), None);
    }
}
