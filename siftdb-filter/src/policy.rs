//! [`FilterPolicy`]: how many filter bits each table of a tree gets, and of
//! which kind.
//!
//! Three rules, set with `Options::filter_policy`:
//!
//! - [`FilterPolicy::bits_per_key`]: every table a Bloom filter of the same
//!   bits per key (what every LSM engine in use does).
//! - [`FilterPolicy::level_aware`]: a budget of `avg × keys` bits split
//!   across the levels to minimise the false probes of a lookup that finds
//!   nothing ([`crate::allocation`], after Monkey): small upper levels
//!   get many more bits per key than the large last level. The split is
//!   recomputed from the tree's shape each time a table is built; each table
//!   records what it was built with. Level 0, which compaction empties
//!   within a few flushes, takes its bits on top: the levels below it split
//!   the budget of their own keys.
//! - [`FilterPolicy::static_filters_from_level`]: tables of that level and
//!   deeper, whose key set is final when they are written, may take a binary
//!   fuse filter where it is better than a Bloom filter for the bits
//!   ([`crate::allocation::best_within`], or the allocation itself
//!   for the level-aware rule).
//!
//! and a switch, [`FilterPolicy::optimize_for_hits`]: no filter on the last
//! level, for workloads whose gets almost always find their key (the last
//! level holds most keys, so its filter is most of the memory and, for a
//! key that is there, never saves a read).
//!
//! Owns: the policies and [`FilterPolicy::choose`], which turns a policy and
//! the tree's shape into the filter one table is built with.
//! Must never: run on the read path (it runs once per flush or compaction),
//! or decide anything a reader depends on — a table's filter block says
//! what it is, whatever the policy that chose it.

use std::fmt;

use crate::allocation::{allocate_filters, best_within, FilterChoice, LevelShape};
use crate::error::{Error, Result};

/// The largest bits per key a policy accepts.
pub const MAX_POLICY_BITS_PER_KEY: f64 = 64.0;
/// The smallest non-zero bits per key a policy accepts.
pub const MIN_POLICY_BITS_PER_KEY: f64 = 0.5;

/// Keys per table assumed for a level when no table of the tree says more
/// (the size of a binary fuse filter per key depends on it, a little).
const ASSUMED_KEYS_PER_TABLE: u64 = 250_000;

/// How bits are spread.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Rule {
    Uniform { bits_per_key: f64 },
    LevelAware { avg_bits_per_key: f64 },
}

/// How the tables of a database get their filters. See the module docs.
///
/// ```
/// use siftdb_filter::FilterPolicy;
/// let policy = FilterPolicy::level_aware(10.0).static_filters_from_level(1);
/// assert_eq!(policy.average_bits_per_key(), 10.0);
/// assert_eq!(policy.to_string(), "level-aware 10 bits/key, static filters from level 1");
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FilterPolicy {
    rule: Rule,
    optimize_for_hits: bool,
    static_from_level: Option<u32>,
}

/// One level of a tree as a policy sees it (the manifest's view).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LevelTables {
    /// Tables in the level.
    pub tables: u64,
    /// Entries in them.
    pub keys: u64,
}

impl FilterPolicy {
    /// Every table a blocked Bloom filter of `bits` bits per key; 0: no
    /// filters.
    pub fn bits_per_key(bits: f64) -> FilterPolicy {
        FilterPolicy {
            rule: Rule::Uniform { bits_per_key: bits },
            optimize_for_hits: false,
            static_from_level: None,
        }
    }

    /// An average of `avg_bits_per_key` over every key of the tree, split
    /// across the levels so that a lookup of an absent key reads the fewest
    /// tables it does not need (level 0 and flushes count as the top level).
    pub fn level_aware(avg_bits_per_key: f64) -> FilterPolicy {
        FilterPolicy {
            rule: Rule::LevelAware { avg_bits_per_key },
            optimize_for_hits: false,
            static_from_level: None,
        }
    }

    /// When true, tables written to the last level get no filter (level 0
    /// always keeps its filters). Saves most of the filter memory; each
    /// lookup of a key that is absent from the whole tree then reads one
    /// data block of the last level.
    pub fn optimize_for_hits(mut self, on: bool) -> FilterPolicy {
        self.optimize_for_hits = on;
        self
    }

    /// Tables written to `level` or deeper may carry a binary fuse filter
    /// (about 9 bits per key for a 0.39% rate, where a Bloom filter needs
    /// 12) when it is the better filter for the bits. Building one costs
    /// about 1.5× a Bloom filter's CPU, paid by background compaction
    /// (level 0: by the flush). Construction that fails falls back to a
    /// Bloom filter.
    pub fn static_filters_from_level(mut self, level: u32) -> FilterPolicy {
        self.static_from_level = Some(level);
        self
    }

    /// No static filters: every filter is a Bloom filter.
    pub fn without_static_filters(mut self) -> FilterPolicy {
        self.static_from_level = None;
        self
    }

    /// Bits per key on average (uniform: every table's).
    pub fn average_bits_per_key(&self) -> f64 {
        match self.rule {
            Rule::Uniform { bits_per_key } => bits_per_key,
            Rule::LevelAware { avg_bits_per_key } => avg_bits_per_key,
        }
    }

    /// Whether the bits are split across levels.
    pub fn is_level_aware(&self) -> bool {
        matches!(self.rule, Rule::LevelAware { .. })
    }

    /// Whether the last level goes without filters.
    pub fn optimizes_for_hits(&self) -> bool {
        self.optimize_for_hits
    }

    /// The first level whose tables may carry static filters, if any.
    pub fn static_filters_level(&self) -> Option<u32> {
        self.static_from_level
    }

    /// `InvalidArgument` unless the bits are 0 or within [0.5, 64].
    pub fn validate(&self) -> Result<()> {
        let b = self.average_bits_per_key();
        if b.is_finite()
            && (b == 0.0 || (MIN_POLICY_BITS_PER_KEY..=MAX_POLICY_BITS_PER_KEY).contains(&b))
        {
            Ok(())
        } else {
            Err(Error::invalid(format!(
                "filter bits per key must be 0 or within [{MIN_POLICY_BITS_PER_KEY}, \
                 {MAX_POLICY_BITS_PER_KEY}], got {b}"
            )))
        }
    }

    /// The filter for a table written to `level` of a tree shaped as `tree`
    /// (`tree[i]`: level i as it will be once the table is in place, the
    /// table counted). Level-aware: a level-0 table takes its share of the
    /// split over the whole tree (its runs are its tables); a deeper table
    /// its share of the split of `avg ×` the keys of levels 1 and deeper,
    /// so the levels that persist meet the budget on their own.
    pub fn choose(&self, tree: &[LevelTables], level: usize) -> FilterChoice {
        let avg = self.average_bits_per_key();
        if avg <= 0.0 {
            return FilterChoice::None;
        }
        let deepest = tree.iter().rposition(|l| l.tables > 0).unwrap_or(0);
        let last = deepest.max(level);
        if self.optimize_for_hits && level >= 1 && level == last {
            return FilterChoice::None;
        }
        let statics: Vec<Option<u64>> = (0..=last)
            .map(|i| {
                let allowed = self
                    .static_from_level
                    .is_some_and(|from| u64::try_from(i).is_ok_and(|i| i >= u64::from(from)));
                allowed.then(|| keys_per_table(tree, i))
            })
            .collect();
        match self.rule {
            Rule::Uniform { bits_per_key } => {
                best_within(bits_per_key, statics.get(level).copied().flatten())
            }
            Rule::LevelAware { avg_bits_per_key } => {
                let shapes: Vec<LevelShape> = (0..=last)
                    .map(|i| {
                        let at = tree.get(i).copied().unwrap_or_default();
                        // Level 0 is transient: its tables are merged
                        // away within a few flushes, so bits it is given
                        // are not taken from the levels that stay (their
                        // split meets the budget of their own keys, also
                        // once level 0 is empty); level 0's own choice is
                        // made against the whole tree, its runs counted.
                        let skipped = (self.optimize_for_hits && i == last && i >= 1)
                            || (i == 0 && level >= 1);
                        if skipped {
                            return LevelShape { keys: 0, runs: 0 };
                        }
                        let tables = at.tables.max(u64::from(i == level));
                        let runs = if i == 0 { tables } else { tables.min(1) };
                        LevelShape {
                            keys: at.keys,
                            runs: u32::try_from(runs).unwrap_or(u32::MAX),
                        }
                    })
                    .collect();
                allocate_filters(&shapes, &statics, avg_bits_per_key)
                    .get(level)
                    .copied()
                    .unwrap_or(FilterChoice::None)
            }
        }
    }
}

/// The keys a table of level `i` holds on average: the level's own tables,
/// else those of the whole tree, else [`ASSUMED_KEYS_PER_TABLE`].
fn keys_per_table(tree: &[LevelTables], i: usize) -> u64 {
    let mean = |levels: &[LevelTables]| {
        let tables: u64 = levels.iter().map(|l| l.tables).sum();
        let keys: u64 = levels.iter().map(|l| l.keys).sum();
        (tables > 0 && keys > 0).then(|| keys / tables)
    };
    tree.get(i..=i)
        .and_then(mean)
        .or_else(|| mean(tree))
        .unwrap_or(ASSUMED_KEYS_PER_TABLE)
}

impl Default for FilterPolicy {
    /// Level-aware 10 bits per key on average, with static (binary fuse)
    /// filters for the tables compaction writes from level 1 down. Measured
    /// against uniform 10 bits per key at N = 10M (`siftdb bench`, two runs
    /// each): 7% less filter memory (11.6 MB against 12.5 MB), a measured
    /// false-positive rate of 0.39% against 0.96% per table asked, half the
    /// data blocks read per absent get (0.005 against 0.011–0.020) and no
    /// loss in fillrandom; the price is CPU in background compaction (a fuse
    /// filter builds at ~120 ns per key, a Bloom filter at ~17).
    fn default() -> Self {
        FilterPolicy::level_aware(10.0).static_filters_from_level(1)
    }
}

impl fmt::Display for FilterPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.rule {
            Rule::Uniform { bits_per_key } => write!(f, "uniform {bits_per_key} bits/key")?,
            Rule::LevelAware { avg_bits_per_key } => {
                write!(f, "level-aware {avg_bits_per_key} bits/key")?;
            }
        }
        if let Some(level) = self.static_from_level {
            write!(f, ", static filters from level {level}")?;
        }
        if self.optimize_for_hits {
            write!(f, ", no filter on the last level")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::FingerprintBits;

    /// A size-ratio-10 tree: four level-0 tables of 500k keys, then 2.2M,
    /// 22M and 60M keys in tables of 300k.
    fn tree() -> Vec<LevelTables> {
        vec![
            LevelTables {
                tables: 4,
                keys: 2_000_000,
            },
            LevelTables {
                tables: 8,
                keys: 2_200_000,
            },
            LevelTables {
                tables: 73,
                keys: 22_000_000,
            },
            LevelTables {
                tables: 200,
                keys: 60_000_000,
            },
        ]
    }

    #[test]
    fn uniform_gives_every_level_the_same_bloom_filter() {
        let policy = FilterPolicy::bits_per_key(10.0);
        for level in 0..5 {
            assert_eq!(
                policy.choose(&tree(), level),
                FilterChoice::Bloom { bits_per_key: 10.0 }
            );
        }
        assert_eq!(
            FilterPolicy::bits_per_key(0.0).choose(&tree(), 2),
            FilterChoice::None
        );
    }

    #[test]
    fn level_aware_gives_upper_levels_more_and_keeps_the_budget() {
        let policy = FilterPolicy::level_aware(10.0);
        let tree = tree();
        let choices: Vec<FilterChoice> = (0..4).map(|l| policy.choose(&tree, l)).collect();
        let bits: Vec<f64> = choices.iter().map(|c| c.bits_per_key()).collect();
        assert!(bits.windows(2).all(|w| w[0] > w[1]), "{bits:?}");
        // The levels below 0 spend the budget of their own keys; level 0's
        // bits come on top.
        let keys: Vec<f64> = tree.iter().map(|l| l.keys as f64).collect();
        let spent: f64 = bits.iter().zip(&keys).skip(1).map(|(b, k)| b * k).sum();
        let budget = 10.0 * keys.iter().skip(1).sum::<f64>();
        assert!((spent / budget - 1.0).abs() < 0.01, "{bits:?}");
        // ... whatever level 0 holds.
        let mut full_level0 = tree.clone();
        full_level0[0] = LevelTables {
            tables: 12,
            keys: 6_000_000,
        };
        for (level, choice) in choices.iter().enumerate().skip(1) {
            assert_eq!(policy.choose(&full_level0, level), *choice, "{level}");
        }
        assert!(choices
            .iter()
            .all(|c| matches!(c, FilterChoice::Bloom { .. })));
    }

    #[test]
    fn static_filters_only_from_their_level_down() {
        let uniform = FilterPolicy::bits_per_key(10.0).static_filters_from_level(2);
        assert!(matches!(
            uniform.choose(&tree(), 1),
            FilterChoice::Bloom { .. }
        ));
        assert!(matches!(
            uniform.choose(&tree(), 2),
            FilterChoice::Fuse {
                bits: FingerprintBits::Eight,
                ..
            }
        ));
        let aware = FilterPolicy::level_aware(10.0).static_filters_from_level(1);
        let last = aware.choose(&tree(), 3);
        assert!(
            matches!(
                last,
                FilterChoice::Fuse {
                    bits: FingerprintBits::Eight,
                    ..
                }
            ),
            "{last:?}"
        );
        assert!(matches!(
            aware.choose(&tree(), 0),
            FilterChoice::Bloom { .. }
        ));
    }

    #[test]
    fn optimize_for_hits_leaves_the_last_level_bare() {
        for policy in [
            FilterPolicy::bits_per_key(10.0),
            FilterPolicy::level_aware(10.0),
        ] {
            let policy = policy.optimize_for_hits(true);
            assert_eq!(policy.choose(&tree(), 3), FilterChoice::None);
            // A level deeper than any in use is the new last level.
            assert_eq!(policy.choose(&tree(), 4), FilterChoice::None);
            assert_ne!(policy.choose(&tree(), 2), FilterChoice::None);
            // Level 0 keeps its filter even when it is all there is.
            let only_level0 = [LevelTables {
                tables: 2,
                keys: 1000,
            }];
            assert_ne!(policy.choose(&only_level0, 0), FilterChoice::None);
        }
        // The budget of the filtered levels is theirs alone (level 0's bits
        // come on top).
        let aware = FilterPolicy::level_aware(10.0).optimize_for_hits(true);
        let bits: Vec<f64> = (1..3)
            .map(|l| aware.choose(&tree(), l).bits_per_key())
            .collect();
        let keys = [2.2e6, 22e6];
        let spent: f64 = bits.iter().zip(keys).map(|(b, k)| b * k).sum();
        let budget = 10.0 * keys.iter().sum::<f64>();
        assert!((spent / budget - 1.0).abs() < 0.01, "{bits:?}");
        assert!(aware.choose(&tree(), 0).bits_per_key() > bits[0]);
    }

    #[test]
    fn an_empty_tree_gets_the_average() {
        let aware = FilterPolicy::level_aware(8.0);
        assert_eq!(
            aware.choose(&[], 0),
            FilterChoice::Bloom { bits_per_key: 8.0 }
        );
        assert_eq!(keys_per_table(&[], 3), ASSUMED_KEYS_PER_TABLE);
        assert_eq!(keys_per_table(&tree(), 9), 86_200_000 / 285);
    }

    #[test]
    fn validation_and_display() {
        FilterPolicy::default().validate().unwrap();
        FilterPolicy::level_aware(0.0).validate().unwrap();
        for bad in [f64::NAN, -1.0, 0.1, 100.0, f64::INFINITY] {
            assert!(FilterPolicy::level_aware(bad).validate().is_err());
            assert!(FilterPolicy::bits_per_key(bad).validate().is_err());
        }
        assert_eq!(
            FilterPolicy::bits_per_key(12.0)
                .optimize_for_hits(true)
                .to_string(),
            "uniform 12 bits/key, no filter on the last level"
        );
        let p = FilterPolicy::level_aware(9.5).static_filters_from_level(1);
        assert!(p.is_level_aware() && !p.optimizes_for_hits());
        assert_eq!(p.static_filters_level(), Some(1));
        assert_eq!(p.without_static_filters().static_filters_level(), None);
    }
}
