//! HyperLogLog sketches of visitors, small enough to live in roll-up documents and merged by the
//! database itself. No crate was used: the maintained HLL crates keep their registers as opaque
//! serialised bytes, which an aggregation pipeline cannot merge, and the roll-ups merge sketches
//! in `$group` stages (see [`super::rollup`]). The sketch here is the textbook one (Flajolet et
//! al. 2007, with the linear-counting correction for small counts), tested against exact counts
//! below and in `tests/traffic.rs`.
//!
//! A visitor's 64-bit hash picks one of [`REGISTERS`] registers (its top [`PRECISION`] bits) and
//! a rank (1 + the leading zeros of the rest). An event stores both packed into one integer,
//! `register × 64 + rank` ([`packed`]); a sketch is the list of packed values with the highest
//! rank per register (sparse: a page seen by three visitors keeps three numbers). Merging two
//! sketches is keeping, per register, the larger packed value: in a pipeline, `$group` by
//! `floor(packed / 64)` with `$max`. The relative standard error is 1.04 / √4096 ≈ 1.6 %.

/// Bits of the hash that choose the register.
pub const PRECISION: u32 = 12;
/// 4096 registers.
pub const REGISTERS: usize = 1 << PRECISION;
/// A packed value's register is `packed / RANK_SPAN`.
pub const RANK_SPAN: i32 = 64;
/// The sketch's relative standard error, 1.04 / √m.
pub const STANDARD_ERROR: f64 = 1.04 / 64.0;

/// The register and rank of `hash`, packed as `register × 64 + rank` (rank 1 to 53).
pub fn packed(hash: u64) -> i32 {
    let register = (hash >> (64 - PRECISION)) as i32;
    // The remaining 52 bits, with a stop bit so an all-zero remainder ranks 53.
    let rest = (hash << PRECISION) | (1 << (PRECISION - 1));
    let rank = rest.leading_zeros() as i32 + 1;
    register * RANK_SPAN + rank
}

/// Merge sketches (lists of packed values, in any order, with repeats): per register the
/// highest rank, sorted by register.
pub fn merge<'a>(sketches: impl IntoIterator<Item = &'a [i32]>) -> Vec<i32> {
    let mut registers = vec![0_i32; REGISTERS];
    for sketch in sketches {
        for &p in sketch {
            let (register, rank) = split(p);
            if let Some(slot) = registers.get_mut(register) {
                *slot = (*slot).max(rank);
            }
        }
    }
    registers
        .iter()
        .enumerate()
        .filter(|(_, r)| **r > 0)
        .map(|(i, r)| i as i32 * RANK_SPAN + r)
        .collect()
}

fn split(packed: i32) -> (usize, i32) {
    (
        usize::try_from(packed / RANK_SPAN).unwrap_or(usize::MAX),
        packed % RANK_SPAN,
    )
}

/// The estimated number of distinct visitors of a sketch (a list of packed values; repeats and
/// lower ranks of a register are ignored).
pub fn estimate(sketch: &[i32]) -> u64 {
    let mut registers = vec![0_i32; REGISTERS];
    for &p in sketch {
        let (register, rank) = split(p);
        if let Some(slot) = registers.get_mut(register) {
            *slot = (*slot).max(rank);
        }
    }
    let m = REGISTERS as f64;
    let alpha = 0.7213 / (1.0 + 1.079 / m);
    let sum: f64 = registers.iter().map(|r| 2f64.powi(-r)).sum();
    let raw = alpha * m * m / sum;
    let zeros = registers.iter().filter(|r| **r == 0).count();
    let estimate = if raw <= 2.5 * m && zeros > 0 {
        // Linear counting: exact enough while many registers are still empty.
        m * (m / zeros as f64).ln()
    } else {
        raw
    };
    estimate.round() as u64
}

#[cfg(test)]
mod tests {
    use super::*;
    use sha2::{Digest, Sha256};

    fn hash(n: u64) -> u64 {
        let digest = Sha256::digest(n.to_le_bytes());
        let mut bytes = [0u8; 8];
        bytes.copy_from_slice(&digest[..8]);
        u64::from_le_bytes(bytes)
    }

    #[test]
    fn a_packed_value_holds_the_register_and_a_rank_from_1_to_53() {
        assert_eq!(packed(0), 53);
        assert_eq!(packed(u64::MAX), (REGISTERS as i32 - 1) * 64 + 1);
        assert_eq!(packed(1 << 51), 1);
        assert_eq!(packed(1 << 50), 2);
    }

    #[test]
    fn estimates_stay_within_three_standard_errors_of_the_exact_count() {
        for n in [0_u64, 1, 10, 1_000, 20_000, 300_000] {
            let sketch: Vec<i32> = (0..n).map(|i| packed(hash(i))).collect();
            let estimate = estimate(&sketch) as f64;
            let allowed = (3.0 * STANDARD_ERROR * n as f64).max(1.0);
            assert!(
                (estimate - n as f64).abs() <= allowed,
                "{n} distinct estimated as {estimate}"
            );
        }
    }

    #[test]
    fn merging_sketches_estimates_the_union_not_the_sum() {
        let a: Vec<i32> = (0..6_000).map(|i| packed(hash(i))).collect();
        let b: Vec<i32> = (4_000..10_000).map(|i| packed(hash(i))).collect();
        let merged = merge([a.as_slice(), b.as_slice()]);
        assert!(merged.len() <= REGISTERS);
        let estimate = estimate(&merged) as f64;
        assert!((estimate - 10_000.0).abs() <= 3.0 * STANDARD_ERROR * 10_000.0);
        assert_eq!(merge([merged.as_slice(), a.as_slice()]), merged);
    }
}
