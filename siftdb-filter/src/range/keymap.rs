//! The order-preserving map from byte-string keys to `u64` that the range
//! filter works on.
//!
//! Owns: the map's definition (shared by the builder and the query path, so
//! the two cannot disagree), the statistics it is planned from, and the
//! checks of its description in a range filter block.
//! Must never: map a larger string below a smaller one (the filter's "no
//! false negative" rests on `x ≤ y ⇒ f(x) ≤ f(y)` for *every* pair of
//! strings, keys or not), panic, or index out of bounds.
//!
//! # The map
//!
//! All keys of a set lie between its smallest and largest key, so they share
//! `P`, the longest common prefix of those two. The map strips `P` and reads
//! the next `W` bytes of the tail as digits of a mixed-radix number whose
//! radix at position `i` is the number of *symbols* position `i` needs:
//!
//! - "low" symbols for "the string ends here" and "a byte below every key's
//!   byte here": one shared symbol, two when some key ends exactly at `i` and
//!   the keys' lowest byte `lo_i` is above 0, none when `lo_i = 0` and no key
//!   ends at `i` (an ending string then shares `lo_i`'s symbol);
//! - one symbol per byte value from `lo_i` to `hi_i`, the keys' lowest and
//!   highest byte at `i`;
//! - one "above" symbol for bytes above `hi_i` (none when `hi_i = 255`).
//!
//! After an end or below symbol the remaining digits are the lowest (0),
//! after an above symbol the highest: a string that leaves the keys' alphabet
//! sorts as the gap it falls into, which keeps the map monotone. Positions
//! are taken while the product of the radices before them is below 2^64
//! and some key still has a byte there; a product past 2^64 is shifted right
//! to fit. Eight positions of 256 symbols (fixed-length binary keys) make
//! 2^64 exactly: 8-byte big-endian integers map to themselves.
//!
//! A bound string also learns whether keys other than itself can share its
//! value ([`Mapped::Value`]); where none can, an exclusive bound steps past
//! the value, so `range(key(j)..key(j+1))` asks exactly the values between.
//!
//! Compressing each position's alphabet matters for ASCII keys: the digits
//! of `k000000001234568` take 11 or 12 symbols per position instead of 256,
//! so the gap between two adjacent keys spans a handful of values (see the
//! parent module) and 17 digit positions fit in a `u64` where plain bytes
//! fit 8.

use crate::error::{Error, Result};

/// The most tail positions a map reads. Every radix is at least 2, so the
/// capacity rule (product below 2^64 before each position) stops by 65.
pub const MAX_POSITIONS: usize = 64;

/// Position flag: some key's tail ends exactly at this position.
pub(crate) const ENDS: u8 = 1;

/// One position as the block stores it: the keys' lowest and highest byte
/// there and the flags above.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Position {
    pub lo: u8,
    pub hi: u8,
    pub flags: u8,
}

/// One position ready for mapping.
#[derive(Debug, Clone, Copy, Default)]
struct Digit {
    lo: u8,
    hi: u8,
    /// Some key ends here.
    ends: bool,
    /// 0, 1 or 2 (see the module docs).
    low_syms: u64,
    radix: u64,
}

impl Digit {
    fn of(p: Position) -> Digit {
        let ends = p.flags & ENDS != 0;
        let low_syms = match (ends, p.lo) {
            (true, 1..) => 2,
            (false, 0) => 0,
            _ => 1,
        };
        let above = u64::from(p.hi < u8::MAX);
        let span = u64::from(p.hi) - u64::from(p.lo) + 1;
        Digit {
            lo: p.lo,
            hi: p.hi,
            ends,
            low_syms,
            radix: low_syms + span + above,
        }
    }
}

/// A string's place relative to the map.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mapped {
    /// Before every string that starts with the prefix (so before every key).
    Below,
    /// After every string that starts with the prefix.
    After,
    /// Mapped to `value`. The flags say which keys may share that value:
    /// the string itself (`may_be_key`), keys smaller than it
    /// (`keys_below`), keys larger than it (`keys_above`). Where none can,
    /// a bound steps past the value.
    Value {
        value: u64,
        may_be_key: bool,
        keys_below: bool,
        keys_above: bool,
    },
}

impl Mapped {
    /// The least value a key `≥ x` (`> x` when `exclusive`) can map to;
    /// `None` when none can exist.
    pub(crate) fn lower(self, exclusive: bool) -> Option<u64> {
        match self {
            Mapped::Below => Some(0),
            Mapped::After => None,
            Mapped::Value {
                value,
                may_be_key,
                keys_above,
                ..
            } => {
                if keys_above || (may_be_key && !exclusive) {
                    Some(value)
                } else {
                    value.checked_add(1)
                }
            }
        }
    }

    /// The greatest value a key `≤ x` (`< x` when `exclusive`) can map to;
    /// `None` when none can exist.
    pub(crate) fn upper(self, exclusive: bool) -> Option<u64> {
        match self {
            Mapped::Below => None,
            Mapped::After => Some(u64::MAX),
            Mapped::Value {
                value,
                may_be_key,
                keys_below,
                ..
            } => {
                if keys_below || (may_be_key && !exclusive) {
                    Some(value)
                } else {
                    value.checked_sub(1)
                }
            }
        }
    }
}

/// The map, checked and ready to use (the prefix itself stays in the
/// block; callers pass it in).
#[derive(Debug, Clone, Copy)]
pub(crate) struct KeyMap {
    digits: [Digit; MAX_POSITIONS],
    width: usize,
    /// Right shift that brings the mixed-radix value into a `u64`.
    shift: u32,
    /// No key's tail is longer than `width`.
    keys_fit: bool,
}

impl KeyMap {
    /// Checks a stored description; `what` names the block in errors.
    pub(crate) fn new(positions: &[Position], keys_fit: bool, what: &str) -> Result<KeyMap> {
        if positions.len() > MAX_POSITIONS {
            return Err(Error::corruption(
                what,
                format!("key map width {} above {MAX_POSITIONS}", positions.len()),
            ));
        }
        let mut digits = [Digit::default(); MAX_POSITIONS];
        let mut product: u128 = 1;
        for (i, (slot, p)) in digits.iter_mut().zip(positions).enumerate() {
            if p.flags & !ENDS != 0 {
                return Err(Error::corruption(
                    what,
                    format!("key map position {i}: unknown flags {:#04x}", p.flags),
                ));
            }
            if p.lo > p.hi {
                return Err(Error::corruption(
                    what,
                    format!("key map position {i}: lo {} above hi {}", p.lo, p.hi),
                ));
            }
            if product >= 1 << 64 {
                return Err(Error::corruption(
                    what,
                    format!("key map position {i} lies past the 64-bit capacity"),
                ));
            }
            *slot = Digit::of(*p);
            // product ≤ 2^64 and radix ≤ 258: no overflow.
            product *= u128::from(slot.radix);
        }
        let top_bits = 128 - (product - 1).leading_zeros();
        Ok(KeyMap {
            digits,
            width: positions.len(),
            shift: top_bits.saturating_sub(64),
            keys_fit,
        })
    }

    /// Where `x` falls, for a key set whose common prefix is `prefix`.
    #[inline]
    pub(crate) fn map(&self, prefix: &[u8], x: &[u8]) -> Mapped {
        let Some(tail) = x.strip_prefix(prefix) else {
            // Not prefixed by P: below or after every P-prefixed string.
            return if x < prefix {
                Mapped::Below
            } else {
                Mapped::After
            };
        };
        #[derive(PartialEq)]
        enum Fill {
            No,
            Lowest,
            Highest,
        }
        let mut fill = Fill::No;
        // Which keys may share x's value, decided where x leaves the keys'
        // alphabet (see `Mapped::Value`).
        let mut sharing = (false, false, false);
        // Below 2^64 in all (no shift), u64 arithmetic cannot overflow and
        // is the shorter dependency chain; u128 only when shifting.
        let wide = self.shift > 0;
        let (mut narrow, mut value) = (0u64, 0u128);
        let digits = self.digits.get(..self.width).unwrap_or_default();
        for (i, d) in digits.iter().enumerate() {
            let symbol = match fill {
                Fill::Lowest => 0,
                Fill::Highest => d.radix - 1,
                Fill::No => match tail.get(i) {
                    None => {
                        fill = Fill::Lowest;
                        // x itself, if a key ends here; longer keys through
                        // `lo`'s symbol when the end shares it.
                        sharing = (d.ends, false, d.low_syms == 0);
                        0
                    }
                    Some(&c) if c > d.hi => {
                        fill = Fill::Highest;
                        d.radix - 1
                    }
                    Some(&c) if c < d.lo => {
                        fill = Fill::Lowest;
                        d.low_syms - 1
                    }
                    Some(&c) => d.low_syms + u64::from(c - d.lo),
                },
            };
            if wide {
                value = value * u128::from(d.radix) + u128::from(symbol);
            } else {
                narrow = narrow.wrapping_mul(d.radix).wrapping_add(symbol);
            }
        }
        let (may_be_key, keys_below, keys_above) = if fill != Fill::No {
            sharing
        } else if tail.len() == self.width {
            // x and the keys it prefixes, unless no key is that long.
            (true, false, !self.keys_fit)
        } else {
            // Read to the end of the window: x[..W] and keys sharing it.
            (!self.keys_fit, true, !self.keys_fit)
        };
        // A shifted value also stands for its neighbours.
        Mapped::Value {
            value: if wide {
                u64::try_from(value >> self.shift).unwrap_or(u64::MAX)
            } else {
                narrow
            },
            may_be_key: may_be_key || wide,
            keys_below: keys_below || wide,
            keys_above: keys_above || wide,
        }
    }

    /// The value a key maps to (keys are always prefixed and in the alphabet).
    pub(crate) fn key_value(&self, prefix: &[u8], key: &[u8]) -> u64 {
        match self.map(prefix, key) {
            Mapped::Value { value, .. } => value,
            Mapped::Below => 0,
            Mapped::After => u64::MAX,
        }
    }
}

/// Statistics of a sorted key set's tails, gathered in one pass, from which
/// the map is planned.
#[derive(Debug, Clone)]
pub(crate) struct TailStats {
    positions: [Position; MAX_POSITIONS],
    /// Longest tail, capped at `MAX_POSITIONS + 1`.
    longest: usize,
}

impl TailStats {
    pub(crate) fn new() -> TailStats {
        TailStats {
            positions: [Position::default(); MAX_POSITIONS],
            longest: 0,
        }
    }

    /// Accounts one key's tail (the key without the common prefix).
    pub(crate) fn add(&mut self, tail: &[u8]) {
        let len = tail.len().min(MAX_POSITIONS + 1);
        if let Some(p) = self.positions.get_mut(len) {
            p.flags |= ENDS;
        }
        for (i, (p, &c)) in self.positions.iter_mut().zip(tail).enumerate() {
            if i >= self.longest {
                // The first key to reach position i.
                (p.lo, p.hi) = (c, c);
            } else {
                p.lo = p.lo.min(c);
                p.hi = p.hi.max(c);
            }
        }
        self.longest = self.longest.max(len);
    }

    /// The positions the map reads (capacity rule in the module docs) and
    /// whether every tail fits in them.
    pub(crate) fn plan(&self) -> (Vec<Position>, bool) {
        let mut out = Vec::new();
        let mut product: u128 = 1;
        for p in self.positions.iter().take(self.longest) {
            if product >= 1 << 64 {
                break;
            }
            product *= u128::from(Digit::of(*p).radix);
            out.push(*p);
        }
        let keys_fit = self.longest <= out.len();
        (out, keys_fit)
    }
}

/// Length of the longest common prefix of `a` and `b`.
pub(crate) fn common_prefix_len(a: &[u8], b: &[u8]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map_of(keys: &[&[u8]]) -> (Vec<u8>, KeyMap) {
        let mut sorted: Vec<&[u8]> = keys.to_vec();
        sorted.sort();
        let prefix_len = common_prefix_len(sorted[0], sorted[sorted.len() - 1]);
        let prefix = sorted[0][..prefix_len].to_vec();
        let mut stats = TailStats::new();
        for k in &sorted {
            stats.add(&k[prefix_len..]);
        }
        let (positions, fit) = stats.plan();
        (prefix, KeyMap::new(&positions, fit, "test").unwrap())
    }

    fn value(m: &KeyMap, prefix: &[u8], x: &[u8]) -> u64 {
        match m.map(prefix, x) {
            Mapped::Below => 0,
            Mapped::After => u64::MAX,
            Mapped::Value { value, .. } => value,
        }
    }

    /// Every string over a small alphabet up to length 4, in order.
    fn all_strings(alphabet: &[u8], max_len: usize) -> Vec<Vec<u8>> {
        let mut out = vec![Vec::new()];
        let mut frontier = vec![Vec::new()];
        for _ in 0..max_len {
            let mut next = Vec::new();
            for s in &frontier {
                for &c in alphabet {
                    let mut t: Vec<u8> = s.clone();
                    t.push(c);
                    next.push(t);
                }
            }
            out.extend(next.iter().cloned());
            frontier = next;
        }
        out.sort();
        out
    }

    #[test]
    fn the_map_is_monotone_over_every_short_string() {
        let sets: [&[&[u8]]; 5] = [
            &[b"b", b"bc", b"bcc", b"d"],
            &[b"", b"a", b"ab", b"b\x00"],
            &[b"cc", b"cd"],
            &[b"\x00\x00", b"\xff\xff\xff"],
            &[b"abc"],
        ];
        let strings = all_strings(&[0, b'a', b'b', b'c', b'd', b'e', 0xff], 4);
        for keys in sets {
            let (prefix, m) = map_of(keys);
            let values: Vec<u64> = strings.iter().map(|s| value(&m, &prefix, s)).collect();
            for (w, s) in values.windows(2).zip(strings.windows(2)) {
                assert!(w[0] <= w[1], "{keys:?}: {:?} > {:?}", s[0], s[1]);
            }
            // Distinct keys stay distinct (all fit in the window here).
            let mut kv: Vec<u64> = keys.iter().map(|k| value(&m, &prefix, k)).collect();
            kv.sort();
            kv.dedup();
            assert_eq!(kv.len(), keys.len(), "{keys:?}");
        }
    }

    #[test]
    fn sharing_flags_are_truthful() {
        // For every string x and every key k mapping to x's value, the flags
        // must own up to k: as x itself, below x, or above x.
        let sets: [&[&[u8]]; 5] = [
            &[b"b", b"bc", b"bcc", b"d"],
            &[b"", b"a", b"ab", b"b\x00"],
            &[b"aaaa", b"aaab", b"abbb"],
            &[b"\x00\x00", b"\x00\x01", b"\x01"],
            &[b"a\x00", b"b\x00\x00"],
        ];
        let strings = all_strings(&[0, 1, b'a', b'b', b'c', b'd'], 4);
        for keys in sets {
            let (prefix, m) = map_of(keys);
            for x in &strings {
                let Mapped::Value {
                    value: at,
                    may_be_key,
                    keys_below,
                    keys_above,
                } = m.map(&prefix, x)
                else {
                    continue;
                };
                for k in keys {
                    if value(&m, &prefix, k) != at {
                        continue;
                    }
                    let owned = match (*k).cmp(&x[..]) {
                        std::cmp::Ordering::Less => keys_below,
                        std::cmp::Ordering::Equal => may_be_key,
                        std::cmp::Ordering::Greater => keys_above,
                    };
                    assert!(owned, "{keys:?}: x {x:?} hides key {k:?}");
                }
            }
        }
    }

    #[test]
    fn digits_take_eleven_or_twelve_symbols_and_longer_bounds_step_past() {
        let keys: Vec<String> = (0..50u64).map(|j| format!("k{:015}", 2 * j)).collect();
        let refs: Vec<&[u8]> = keys.iter().map(|k| k.as_bytes()).collect();
        let (prefix, m) = map_of(&refs);
        assert_eq!(prefix, b"k0000000000000");
        assert_eq!(m.width, 2);
        // Tens: end-or-below, '0'..='9', above. Units: '0'..='8' only.
        let radices: Vec<u64> = m.digits[..2].iter().map(|d| d.radix).collect();
        assert_eq!(radices, [12, 11]);
        let v = |s: &str| value(&m, &prefix, s.as_bytes());
        assert_eq!(v("k000000000000004") - v("k000000000000002"), 2);
        assert_eq!(v("k000000000000010") - v("k000000000000008"), 3);
        // key ++ [0] shares key's value, but only key (below it) can.
        let longer = m.map(&prefix, b"k000000000000008\0");
        assert_eq!(longer.lower(false), Some(v("k000000000000008") + 1));
        assert_eq!(longer.upper(true), Some(v("k000000000000008")));
    }

    #[test]
    fn wide_binary_keys_are_shifted_into_64_bits() {
        // Eight positions of 256 symbols: 2^64 exactly, no shift; big-endian
        // integers map to themselves.
        let keys: [&[u8]; 2] = [&[0u8; 8], &[0xffu8; 8]];
        let (prefix, m) = map_of(&keys);
        assert_eq!((m.width, m.shift, m.keys_fit), (8, 0, true));
        for x in [0u64, 1, 0x0102_0304_0506_0708, u64::MAX] {
            assert_eq!(value(&m, &prefix, &x.to_be_bytes()), x);
        }
        // A ninth byte, and a key ending early (its end needs a symbol).
        let keys: [&[u8]; 3] = [&[0u8; 9], &[0u8; 3], &[0xffu8; 9]];
        let (_, m) = map_of(&keys);
        assert_eq!(m.width, 8);
        assert_eq!(m.shift, 1);
        assert!(!m.keys_fit);
    }

    #[test]
    fn descriptions_are_checked() {
        let ok = Position {
            lo: 1,
            hi: 2,
            flags: ENDS,
        };
        assert!(KeyMap::new(&[ok], true, "t").is_ok());
        assert!(KeyMap::new(&[], true, "t").is_ok());
        let bad_flags = Position { flags: 2, ..ok };
        assert!(KeyMap::new(&[bad_flags], true, "t").is_err());
        let inverted = Position { lo: 3, ..ok };
        assert!(KeyMap::new(&[inverted], true, "t").is_err());
        let full = Position {
            lo: 0,
            hi: 255,
            flags: 0,
        };
        assert!(KeyMap::new(&[full; 8], true, "t").is_ok());
        assert!(KeyMap::new(&[full; 9], true, "t").is_err());
        assert!(KeyMap::new(&[ok; 65], true, "t").is_err());
    }
}
