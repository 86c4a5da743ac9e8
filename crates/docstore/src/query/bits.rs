//! The bitwise query operators `$bitsAllSet`, `$bitsAnySet`, `$bitsAllClear` and
//! `$bitsAnyClear`, with MongoDB 7.0's rules: the argument is a non-negative integer bitmask,
//! an array of non-negative bit positions, or a BinData bitmask; a field matches when it holds
//! an integral number representable as a 64-bit integer (negative ones in two's complement, so
//! their bits above 63 count as set) or BinData (bits past its end count as clear).

use crate::error::{Error, Result};
use crate::printing::fmt_value;
use bson::Bson;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BitOp {
    AllSet,
    AnySet,
    AllClear,
    AnyClear,
}

/// A parsed bit test: the operator and the bit positions it tests.
#[derive(Debug, Clone)]
pub(super) struct BitTest {
    op: BitOp,
    positions: Vec<u32>,
}

impl BitTest {
    /// Parse `{<op>: <argument>}`; `op` is one of the four operator names.
    pub(super) fn parse(op: &str, arg: &Bson) -> Result<BitTest> {
        let bit_op = match op {
            "$bitsAllSet" => BitOp::AllSet,
            "$bitsAnySet" => BitOp::AnySet,
            "$bitsAllClear" => BitOp::AllClear,
            _ => BitOp::AnyClear,
        };
        let positions = match arg {
            Bson::Array(items) => items.iter().map(position).collect::<Result<Vec<u32>>>()?,
            Bson::Int32(_) | Bson::Int64(_) | Bson::Double(_) | Bson::Decimal128(_) => {
                mask_positions(non_negative_mask(op, arg)?)
            }
            Bson::Binary(b) => binary_positions(&b.bytes),
            other => {
                return Err(Error::bad_value(format!(
                    "{op} takes an Array, a number, or a BinData but received: {op}: {}",
                    fmt_value(other)
                )))
            }
        };
        Ok(BitTest {
            op: bit_op,
            positions,
        })
    }

    /// Whether one value (not an array: the matcher walks arrays) passes the test.
    pub(super) fn matches(&self, value: &Bson) -> bool {
        let bits = match value {
            Bson::Binary(b) => Bits::Bytes(&b.bytes),
            other => match integral(other) {
                Some(n) => Bits::Int(n),
                None => return false,
            },
        };
        let bit = |p: u32| bits.is_set(p);
        match self.op {
            BitOp::AllSet => self.positions.iter().all(|p| bit(*p)),
            BitOp::AnySet => self.positions.iter().any(|p| bit(*p)),
            BitOp::AllClear => self.positions.iter().all(|p| !bit(*p)),
            BitOp::AnyClear => self.positions.iter().any(|p| !bit(*p)),
        }
    }
}

/// The bits of a field value that can be tested.
enum Bits<'a> {
    Bytes(&'a [u8]),
    Int(i64),
}

impl Bits<'_> {
    fn is_set(&self, p: u32) -> bool {
        match self {
            Bits::Bytes(bytes) => bytes
                .get((p / 8) as usize)
                .is_some_and(|byte| byte >> (p % 8) & 1 == 1),
            // Two's complement: a negative number's bits above 63 are its sign.
            Bits::Int(n) if p >= 64 => *n < 0,
            Bits::Int(n) => n >> p & 1 == 1,
        }
    }
}

/// A field value as a 64-bit integer when it is an integral number in range (NaN, fractions
/// and out-of-range doubles never match, as in mongod).
fn integral(v: &Bson) -> Option<i64> {
    match v {
        Bson::Int32(n) => Some(i64::from(*n)),
        Bson::Int64(n) => Some(*n),
        Bson::Double(_) | Bson::Decimal128(_) => {
            let d = crate::value::to_f64(v)?;
            // 2^63 is the first double past i64::MAX (NaN and infinities are outside too).
            const TWO_POW_63: f64 = 9_223_372_036_854_775_808.0;
            let in_range = (-TWO_POW_63..TWO_POW_63).contains(&d);
            (in_range && d.fract() == 0.0).then_some(d as i64)
        }
        _ => None,
    }
}

/// A numeric bitmask argument: a non-negative integer representable in 64 bits.
fn non_negative_mask(op: &str, arg: &Bson) -> Result<i64> {
    let shown = || format!("{op}: {}", fmt_value(arg));
    if let Bson::Double(_) | Bson::Decimal128(_) = arg {
        let d = crate::value::to_f64(arg).unwrap_or(f64::NAN);
        if !d.is_finite() || d.fract() != 0.0 {
            return Err(Error::bad_value(format!(
                "Expected an integer: {}",
                shown()
            )));
        }
    }
    let n = integral(arg).ok_or_else(|| {
        Error::bad_value(format!("Cannot represent as a 64-bit integer: {}", shown()))
    })?;
    if n < 0 {
        return Err(Error::bad_value(format!(
            "Expected a positive number in: {}",
            shown()
        )));
    }
    Ok(n)
}

/// One element of a bit-position array: a non-negative integer that fits in 32 bits.
fn position(item: &Bson) -> Result<u32> {
    let shown = || fmt_value(item);
    let n = match item {
        Bson::Int32(_) | Bson::Int64(_) | Bson::Double(_) | Bson::Decimal128(_) => {
            integral(item).ok_or_else(|| {
                Error::bad_value(format!(
                    "bit positions must be an integer but got: {}",
                    shown()
                ))
            })?
        }
        _ => {
            return Err(Error::bad_value(format!(
                "bit positions must be an integer but got: {}",
                shown()
            )))
        }
    };
    if n < 0 {
        return Err(Error::bad_value(format!(
            "bit positions must be >= 0 but got: {}",
            shown()
        )));
    }
    if n > i64::from(i32::MAX) {
        return Err(Error::bad_value(format!(
            "bit positions cannot be represented as a 32-bit signed integer: {}",
            shown()
        )));
    }
    Ok(n as u32)
}

fn mask_positions(mask: i64) -> Vec<u32> {
    (0..63).filter(|p| mask >> p & 1 == 1).collect()
}

/// The positions of the set bits of a BinData mask: byte 0 holds bits 0-7, least significant
/// first.
fn binary_positions(bytes: &[u8]) -> Vec<u32> {
    let mut out = Vec::new();
    for (i, byte) in bytes.iter().enumerate() {
        for bit in 0..8 {
            if byte >> bit & 1 == 1 {
                out.push(i as u32 * 8 + bit);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::{bson, spec::BinarySubtype, Binary};

    fn test(op: &str, arg: Bson, value: Bson) -> bool {
        BitTest::parse(op, &arg).unwrap().matches(&value)
    }

    #[test]
    fn a_mask_and_its_positions_agree() {
        // 54 = 0b110110: bits 1, 2, 4, 5.
        for (mask, positions) in [(bson!(50), bson!([1, 4, 5])), (bson!(35), bson!([0, 1, 5]))] {
            for op in [
                "$bitsAllSet",
                "$bitsAnySet",
                "$bitsAllClear",
                "$bitsAnyClear",
            ] {
                assert_eq!(
                    test(op, mask.clone(), bson!(54)),
                    test(op, positions.clone(), bson!(54)),
                    "{op} {mask}"
                );
            }
        }
        assert!(test("$bitsAllSet", bson!(50), bson!(54)));
        assert!(!test("$bitsAllSet", bson!(35), bson!(54)));
        assert!(test("$bitsAnySet", bson!(35), bson!(54)));
        assert!(test("$bitsAllClear", bson!(9), bson!(54)));
    }

    #[test]
    fn negative_values_have_their_high_bits_set() {
        assert!(test("$bitsAllSet", bson!([63, 64, 200]), bson!(-1_i64)));
        assert!(test("$bitsAllClear", bson!([63, 64]), bson!(5)));
    }

    #[test]
    fn fractions_and_non_numbers_never_match() {
        assert!(!test("$bitsAllClear", bson!([0]), bson!(2.5)));
        assert!(!test("$bitsAllClear", bson!([0]), bson!("2")));
        assert!(test("$bitsAllSet", bson!([1]), bson!(2.0)));
    }

    #[test]
    fn bindata_bits_count_from_the_first_byte() {
        let bin = |b: Vec<u8>| {
            Bson::Binary(Binary {
                subtype: BinarySubtype::Generic,
                bytes: b,
            })
        };
        assert!(test("$bitsAllSet", bson!([0, 9]), bin(vec![1, 2])));
        assert!(test("$bitsAllClear", bson!([100]), bin(vec![255])));
        assert!(test("$bitsAllSet", bin(vec![0b11]), bson!(3)));
    }

    #[test]
    fn bad_arguments_are_bad_values() {
        for arg in [
            bson!(-1),
            bson!(1.5),
            bson!([-1]),
            bson!([0.5]),
            bson!(["a"]),
            bson!("x"),
        ] {
            let e = BitTest::parse("$bitsAllSet", &arg).unwrap_err();
            assert_eq!(e.code, crate::error::ErrorCode::BadValue, "{arg}");
        }
    }
}
