//! Building a range filter from keys streamed in sorted order.
//!
//! Owns: [`RangeFilterBuilder`] — the key buffer, the choice between exact
//! and hashed mode, and the sizing from bits per key.
//! Must never: drop a key from the set it encodes, or accept keys out of
//! order (the key map's prefix and alphabet would then be wrong).
#![deny(clippy::unwrap_used, clippy::indexing_slicing, clippy::panic)]

use crate::error::{Error, Result};
use crate::range::block::{
    block_hash, block_log_of, encode, Parts, RangeFilterHeader, RangeFilterView, RangeMode,
};
use crate::range::elias_fano::{Shape, MAX_UNIVERSE};
use crate::range::keymap::{common_prefix_len, KeyMap, TailStats, MAX_POSITIONS};

/// The smallest bits per key accepted (the reduced universe is then 2 per
/// value, so ranges of one value already see a 50% false-positive bound).
pub const MIN_BITS_PER_KEY: f64 = 3.0;
/// The largest bits per key accepted (an ℓ = 1 bound of 2^−46; beyond it the
/// packed low bits would outgrow their reader).
pub const MAX_BITS_PER_KEY: f64 = 48.0;
/// log2 of the zeros between two select samples: 1/8 bit per key.
pub const DEFAULT_SAMPLE_LOG: u8 = 8;

/// Builds a range filter block from keys added in sorted order (duplicates
/// allowed): the shape a table builder produces them in.
///
/// Keys are buffered until [`RangeFilterBuilder::finish`] (the key map is
/// planned from the whole set), each cut to the bytes the map can read:
/// at most its common prefix with the first key plus 65 bytes.
#[derive(Debug, Clone)]
pub struct RangeFilterBuilder {
    bits_per_key: f64,
    seed: u64,
    /// The buffered keys, back to back; `ends[i]` is where key `i` stops.
    arena: Vec<u8>,
    ends: Vec<usize>,
    /// The last key added, whole, for the order check.
    last: Vec<u8>,
}

impl RangeFilterBuilder {
    /// A builder for a filter of `bits_per_key` bits per key (within
    /// [`MIN_BITS_PER_KEY`]`..=`[`MAX_BITS_PER_KEY`]). Its false-positive rate
    /// on a range of `ℓ` mapped values is at most `ℓ / 2^(bits_per_key − 2)`.
    pub fn new(bits_per_key: f64) -> Result<RangeFilterBuilder> {
        if !(MIN_BITS_PER_KEY..=MAX_BITS_PER_KEY).contains(&bits_per_key) {
            return Err(Error::invalid(format!(
                "range filter bits per key must be within \
                 {MIN_BITS_PER_KEY}..={MAX_BITS_PER_KEY}, got {bits_per_key}"
            )));
        }
        Ok(RangeFilterBuilder {
            bits_per_key,
            seed: 0,
            arena: Vec::new(),
            ends: Vec::new(),
            last: Vec::new(),
        })
    }

    /// The seed of the block hash (hashed mode); 0 by default.
    pub fn with_seed(mut self, seed: u64) -> RangeFilterBuilder {
        self.seed = seed;
        self
    }

    /// Adds `key`, which must not sort before the previous key;
    /// `InvalidArgument` when it does. A repeated key is ignored.
    pub fn add(&mut self, key: &[u8]) -> Result<()> {
        if let Some(&first_end) = self.ends.first() {
            match key.cmp(self.last.as_slice()) {
                std::cmp::Ordering::Less => {
                    return Err(Error::invalid(
                        "range filter keys must be added in sorted order",
                    ))
                }
                std::cmp::Ordering::Equal => return Ok(()),
                std::cmp::Ordering::Greater => {}
            }
            let first = self.arena.get(..first_end).unwrap_or_default();
            let keep = key
                .len()
                .min(common_prefix_len(first, key) + MAX_POSITIONS + 1);
            self.arena.extend_from_slice(key.get(..keep).unwrap_or(key));
        } else {
            self.arena.extend_from_slice(key);
        }
        self.ends.push(self.arena.len());
        self.last.clear();
        self.last.extend_from_slice(key);
        Ok(())
    }

    /// Distinct keys added so far.
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// True when no key was added.
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    fn stored_keys(&self) -> impl Iterator<Item = &[u8]> {
        let starts = std::iter::once(0).chain(self.ends.iter().copied());
        starts
            .zip(self.ends.iter().copied())
            .map(|(start, end)| self.arena.get(start..end).unwrap_or_default())
    }

    /// The encoded block.
    pub fn finish(self) -> Result<Vec<u8>> {
        let Some(&first_end) = self.ends.first() else {
            return Ok(encode(
                &Parts {
                    header: RangeFilterHeader::empty(),
                    keys_fit: false,
                    prefix: &[],
                    positions: &[],
                    values: &[],
                },
                None,
            ));
        };
        let first = self.arena.get(..first_end).unwrap_or_default();
        let prefix_len = common_prefix_len(first, &self.last);
        let prefix = first.get(..prefix_len).unwrap_or_default();
        let prefix_len_u32 = u32::try_from(prefix_len)
            .map_err(|_| Error::invalid("range filter keys share a prefix of 4 GiB or more"))?;

        let mut stats = TailStats::new();
        for key in self.stored_keys() {
            stats.add(key.get(prefix_len..).unwrap_or_default());
        }
        let (positions, keys_fit) = stats.plan();
        let map = KeyMap::new(&positions, keys_fit, "range filter builder")
            .map_err(|e| Error::invalid(format!("planned an invalid key map: {}", e.detail())))?;

        // Mapped values are non-decreasing in key order: dedup in passing.
        let mut values: Vec<u64> = Vec::new();
        values
            .try_reserve_exact(self.ends.len())
            .map_err(|_| Error::invalid("cannot allocate the range filter's values"))?;
        for key in self.stored_keys() {
            let v = map.key_value(prefix, key);
            if values.last() != Some(&v) {
                values.push(v);
            }
        }
        let (Some(&min_value), Some(&max_value)) = (values.first(), values.last()) else {
            return Err(Error::invalid("no mapped value"));
        };
        let reduced = reduced_universe(values.len(), self.bits_per_key);
        let exact_span = (max_value - min_value).checked_add(1);
        let (mode, universe, seed) = match exact_span {
            Some(span) if span <= reduced => {
                for v in &mut values {
                    *v -= min_value;
                }
                (RangeMode::Exact, span, 0)
            }
            _ => {
                let log = block_log_of(reduced);
                for v in &mut values {
                    *v = block_hash(*v, self.seed, reduced, log);
                }
                values.sort_unstable();
                values.dedup();
                (RangeMode::Hashed, reduced, self.seed)
            }
        };
        let shape = Shape::new(values.len() as u64, universe, u32::from(DEFAULT_SAMPLE_LOG))
            .map_err(|e| Error::invalid(format!("range filter too large: {e}")))?;
        let header = RangeFilterHeader {
            mode,
            keys: self.ends.len() as u64,
            values: shape.m,
            universe,
            min_value,
            max_value,
            seed,
            prefix_len: prefix_len_u32,
            width: u8::try_from(positions.len())
                .map_err(|_| Error::invalid("planned a key map wider than 255"))?,
            low_bits: u8::try_from(shape.low_bits)
                .map_err(|_| Error::invalid("more than 255 low bits"))?,
            sample_log: DEFAULT_SAMPLE_LOG,
        };
        Ok(encode(
            &Parts {
                header,
                keys_fit,
                prefix,
                positions: &positions,
                values: &values,
            },
            Some(&shape),
        ))
    }
}

/// Grafite's reduced universe for `values` distinct mapped values at
/// `bits_per_key`: `values · 2^(bits_per_key − 2)`, within `2..=2^62`.
#[expect(
    clippy::cast_possible_truncation,
    reason = "the f64 is checked against 2^62 before the cast; floor() makes it whole"
)]
fn reduced_universe(values: usize, bits_per_key: f64) -> u64 {
    let reduced = (values as f64 * (bits_per_key - 2.0).exp2()).floor();
    if reduced >= MAX_UNIVERSE as f64 {
        MAX_UNIVERSE
    } else {
        (reduced as u64).max(2)
    }
}

/// A range filter owning its block.
pub type RangeFilter = RangeFilterView<Vec<u8>>;

impl RangeFilterView<Vec<u8>> {
    /// Builds a filter from keys in any order (sorted here; duplicates
    /// ignored) at `bits_per_key`.
    pub fn from_keys<K: AsRef<[u8]>>(
        keys: impl IntoIterator<Item = K>,
        bits_per_key: f64,
    ) -> Result<RangeFilter> {
        let mut keys: Vec<K> = keys.into_iter().collect();
        keys.sort_unstable_by(|a, b| a.as_ref().cmp(b.as_ref()));
        let mut builder = RangeFilterBuilder::new(bits_per_key)?;
        for key in &keys {
            builder.add(key.as_ref())?;
        }
        RangeFilterView::parse(builder.finish()?)
    }
}
