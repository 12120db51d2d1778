//! The benchmark's data: keys, values, the generator behind them, and shuffles.
//!
//! Owns: [`key`], [`value`], [`versioned_value`] and [`shuffle`], exactly as
//! `WORKLOADS.md` ("Data") defines them (over `splitmix64`, which the testkit
//! owns as [`SplitMix64`]), so every
//! engine — siftdb here, RocksDB and fjall in the peers crate — reads and
//! writes byte-identical data.
//! Must never: allocate per key or per value (the run loops call these once
//! per operation), or change an output: a change makes figures taken before
//! and after incomparable.

pub use siftdb_testkit::{SplitMix64, GOLDEN_GAMMA};

/// Bytes in every benchmark key.
pub const KEY_LEN: usize = 16;

/// Bytes in every benchmark value.
pub const VALUE_LEN: usize = 100;

/// Decimal digits after the leading `k` of a key.
const KEY_DIGITS: usize = KEY_LEN - 1;

/// The largest key index [`key`] formats exactly like `format!("k{:015}", j)`.
pub const MAX_KEY_INDEX: u64 = 999_999_999_999_999;

/// Outputs of the generator that one value consumes (the last one in part).
pub const OUTPUTS_PER_VALUE: u64 = VALUE_LEN.div_ceil(8) as u64;

/// Two ASCII digits for every number below 100, so a key takes eight
/// table lookups rather than fifteen divisions.
#[expect(
    clippy::indexing_slicing,
    clippy::cast_possible_truncation,
    reason = "const evaluation over 0..100: an index out of range fails the build"
)]
const DIGIT_PAIRS: [[u8; 2]; 100] = {
    let mut pairs = [[0u8; 2]; 100];
    let mut i = 0;
    while i < 100 {
        pairs[i] = [b'0' + (i / 10) as u8, b'0' + (i % 10) as u8];
        i += 1;
    }
    pairs
};

/// Key number `j`: the 16 ASCII bytes of `format!("k{:015}", j)`, built on
/// the stack. Only the low 15 decimal digits of `j` are kept, so indices
/// above [`MAX_KEY_INDEX`] wrap; [`super::Workload`] refuses sizes that
/// would reach them.
#[inline]
pub fn key(j: u64) -> [u8; KEY_LEN] {
    let mut out = [b'0'; KEY_LEN];
    let mut rest = j;
    // Fill the digits from the right, two at a time; index 1 is the odd one.
    let (head, pairs) = out.split_at_mut(KEY_LEN - 2 * (KEY_DIGITS / 2));
    for pair in pairs.as_chunks_mut::<2>().0.iter_mut().rev() {
        let below_100 = usize::try_from(rest % 100).unwrap_or_default();
        *pair = DIGIT_PAIRS.get(below_100).copied().unwrap_or_default();
        rest /= 100;
    }
    if let [letter, odd_digit] = head {
        *letter = b'k';
        *odd_digit = b'0' + u8::try_from(rest % 10).unwrap_or_default();
    }
    out
}

/// The value that belongs to key number `j`: successive `splitmix64`
/// outputs seeded with `j`, little-endian, truncated to 100 bytes.
#[inline]
pub fn value(j: u64) -> [u8; VALUE_LEN] {
    value_from_seed(j)
}

/// Version `v` of key `j`'s value, written by the mixed phase's `v`-th put
/// to that key: the generator seeded with `j + 13·v·gamma` (wrapping), i.e.
/// `value(j)`'s stream advanced by `13·v` outputs. Version 0 is `value(j)`.
#[inline]
pub fn versioned_value(j: u64, v: u64) -> [u8; VALUE_LEN] {
    value_from_seed(version_seed(j, v))
}

/// True when `bytes` is exactly `versioned_value(j, v)`, computed without
/// building the expected value; stops at the first differing word.
#[inline]
pub fn is_versioned_value(bytes: &[u8], j: u64, v: u64) -> bool {
    is_sized_value(bytes, j, v, VALUE_LEN)
}

/// Version `v` of key `j`'s value at `len` bytes (`--value-size`), into
/// `out` (cleared first, reused so no operation allocates once it has
/// grown): the stream [`versioned_value`] truncates to 100 bytes,
/// truncated to `len` instead, so at 100 bytes the two are the same bytes.
#[inline]
pub fn sized_value_into(j: u64, v: u64, len: usize, out: &mut Vec<u8>) {
    out.clear();
    let mut rng = SplitMix64::new(version_seed(j, v));
    while out.len() < len {
        let word = rng.next().to_le_bytes();
        let take = (len - out.len()).min(word.len());
        out.extend_from_slice(word.get(..take).unwrap_or_default());
    }
}

/// True when `bytes` is exactly version `v` of key `j`'s value at `len`
/// bytes ([`sized_value_into`]), computed without building it.
#[inline]
pub fn is_sized_value(bytes: &[u8], j: u64, v: u64, len: usize) -> bool {
    if bytes.len() != len {
        return false;
    }
    let mut rng = SplitMix64::new(version_seed(j, v));
    bytes
        .chunks(8)
        .all(|chunk| rng.next().to_le_bytes().get(..chunk.len()) == Some(chunk))
}

fn version_seed(j: u64, v: u64) -> u64 {
    j.wrapping_add(OUTPUTS_PER_VALUE.wrapping_mul(v).wrapping_mul(GOLDEN_GAMMA))
}

fn value_from_seed(seed: u64) -> [u8; VALUE_LEN] {
    let mut rng = SplitMix64::new(seed);
    let mut out = [0u8; VALUE_LEN];
    let (words, tail) = out.as_chunks_mut::<8>();
    for word in words {
        *word = rng.next().to_le_bytes();
    }
    for (byte, last) in tail.iter_mut().zip(rng.next().to_le_bytes()) {
        *byte = last;
    }
    out
}

/// A Fisher–Yates shuffle of `0..n` driven by `splitmix64` seeded with
/// `seed`: for `i` from `n-1` down to 1, `j = next() % (i+1)`, swap `i` and `j`.
///
/// The `n` positions are reserved fallibly: a size this process cannot hold
/// is an error, never an allocation abort.
pub fn shuffle(n: u64, seed: u64) -> Result<Vec<u64>, String> {
    let cannot = || {
        format!(
            "cannot allocate a shuffle of {n} positions ({} bytes)",
            u128::from(n) * 8
        )
    };
    let len = usize::try_from(n).map_err(|_| cannot())?;
    let mut order: Vec<u64> = Vec::new();
    order.try_reserve_exact(len).map_err(|_| cannot())?;
    order.extend(0..n);
    let mut rng = SplitMix64::new(seed);
    for i in (1..order.len()).rev() {
        let j = usize::try_from(rng.next() % (i as u64 + 1)).unwrap_or_default();
        order.swap(i, j);
    }
    Ok(order)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_format_k_015() {
        for j in [
            0,
            1,
            9,
            10,
            42,
            99,
            100,
            12_345,
            1_999_999,
            2_000_001,
            123_456_789_012_345,
            MAX_KEY_INDEX,
        ] {
            assert_eq!(key(j).as_slice(), format!("k{j:015}").as_bytes(), "{j}");
        }
        let mut rng = SplitMix64::new(3);
        for _ in 0..10_000 {
            let j = rng.next() % (MAX_KEY_INDEX + 1);
            assert_eq!(key(j).as_slice(), format!("k{j:015}").as_bytes(), "{j}");
        }
        assert_eq!(&key(7), b"k000000000000007");
    }

    #[test]
    fn key_order_is_numeric_order() {
        assert!(key(2) < key(3) && key(3) < key(4));
        assert!(key(99) < key(100));
    }

    #[test]
    fn values_are_the_little_endian_generator_stream() {
        let v = value(0);
        assert_eq!(
            v[..16],
            [
                0xaf, 0xcd, 0x1d, 0x7b, 0x39, 0xa8, 0x20, 0xe2, 0xf4, 0x65, 0xb9, 0xa1, 0x6a, 0x9e,
                0x78, 0x6e
            ]
        );
        assert_eq!(v[96..], [0x7b, 0xdb, 0xbb, 0xe0]);
        // value(7), computed by an independent implementation.
        let expected7 = "d70d3259e4e1cb631c663cf4d73c4c04022ab1ba804098e6cb293e6770eb3a95\
                         da211e6a663bd37311aabecb86beda3ff6d0c233a1c4cb77febe023d51d6fc53\
                         616750997ac05e226953798876a2c369ebfab5059be7821a2c63dd28b74ebaf5\
                         4eb3454a";
        let hex: String = value(7).iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(hex, expected7);
        assert_ne!(value(1), value(2));
    }

    #[test]
    fn version_zero_is_the_plain_value_and_versions_advance_the_stream() {
        for j in [0, 1, 2, 1000, u64::MAX] {
            assert_eq!(versioned_value(j, 0), value(j));
        }
        // Version 1 of key 0 starts with output number 13 of seed 0's stream.
        let mut rng = SplitMix64::new(0);
        for _ in 0..13 {
            rng.next();
        }
        let first = rng.next();
        assert_eq!(first, 0x8e1f7555983aa92f);
        assert_eq!(versioned_value(0, 1)[..8], first.to_le_bytes());
        assert_ne!(versioned_value(10, 1), versioned_value(10, 2));
        assert_ne!(versioned_value(10, 1), value(10));
    }

    #[test]
    fn is_versioned_value_accepts_exactly_the_version() {
        let v3 = versioned_value(44, 3);
        assert!(is_versioned_value(&v3, 44, 3));
        assert!(!is_versioned_value(&v3, 44, 2));
        assert!(!is_versioned_value(&v3, 46, 3));
        assert!(!is_versioned_value(&v3[..99], 44, 3));
        let mut longer = v3.to_vec();
        longer.push(0);
        assert!(!is_versioned_value(&longer, 44, 3));
        let mut flipped = v3;
        flipped[99] ^= 1;
        assert!(!is_versioned_value(&flipped, 44, 3));
        assert!(is_versioned_value(&value(8), 8, 0));
    }

    #[test]
    fn sized_values_extend_the_same_stream() {
        let mut out = Vec::new();
        sized_value_into(44, 3, VALUE_LEN, &mut out);
        assert_eq!(out, versioned_value(44, 3));
        sized_value_into(44, 3, 1000, &mut out);
        assert_eq!(out.len(), 1000);
        assert_eq!(out[..VALUE_LEN], versioned_value(44, 3));
        assert!(is_sized_value(&out, 44, 3, 1000));
        assert!(!is_sized_value(&out, 44, 2, 1000));
        assert!(!is_sized_value(&out[..999], 44, 3, 1000));
        out[999] ^= 1;
        assert!(!is_sized_value(&out, 44, 3, 1000));
        sized_value_into(1, 0, 3, &mut out);
        assert_eq!(out, value(1)[..3]);
    }

    #[test]
    fn shuffle_matches_an_independent_implementation() {
        assert_eq!(shuffle(10, 42).unwrap(), [0, 9, 5, 8, 6, 4, 7, 2, 1, 3]);
        assert_eq!(shuffle(10, 7).unwrap(), [8, 1, 5, 9, 0, 4, 3, 2, 6, 7]);
        // i = 2: 0xe220a8397b1dcdaf % 3 = 0, swap(2, 0); i = 1: even output, swap(1, 0).
        assert_eq!(shuffle(3, 0).unwrap(), [2, 0, 1]);
        assert_eq!(shuffle(0, 1).unwrap(), Vec::<u64>::new());
        assert_eq!(shuffle(1, 1).unwrap(), [0]);
        assert!(shuffle(u64::MAX / 4, 1)
            .unwrap_err()
            .contains("cannot allocate"));
    }

    #[test]
    fn shuffle_is_a_deterministic_permutation() {
        let a = shuffle(5000, 42).unwrap();
        assert_eq!(a, shuffle(5000, 42).unwrap());
        assert_ne!(a, shuffle(5000, 7).unwrap());
        let mut sorted = a.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, (0..5000).collect::<Vec<u64>>());
        // A shuffle that leaves most items in place is not a shuffle.
        let fixed = a
            .iter()
            .enumerate()
            .filter(|(i, &x)| *i as u64 == x)
            .count();
        assert!(fixed < 50, "{fixed} fixed points");
    }
}
