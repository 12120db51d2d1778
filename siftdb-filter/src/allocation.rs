//! How a budget of filter bits is split across the levels of an LSM tree.
//!
//! Owns: [`allocate_bits`], the level-aware allocation of Dayan,
//! Athanassoulis and Idreos ("Monkey", SIGMOD 2017): a lookup of an absent
//! key asks one table per sorted run it meets, so its expected count of
//! false table probes is `Σ runs_i · FP(b_i)`; for a fixed budget
//! `Σ keys_i · b_i` that sum is least when every level's marginal gain per
//! bit is equal, which gives the small upper levels many more bits per key
//! than the large last level (about `ln T / ln² 2` ≈ 4.8 bits more per level
//! up at a size ratio T = 10 for a standard Bloom filter).
//! [`allocate_filters`] widens the choice for levels whose tables may carry
//! a static filter (a binary fuse filter, [`crate::fuse`]): such a
//! level may also take a fuse filter at its cost in bits per key (which
//! depends on the keys per table) and its rate 2⁻ʷ, so the budget a fuse
//! filter saves on a large level goes to the levels above it.
//! Must never: exceed the budget by more than the grid step allows (1%), or
//! run on the read path — it runs when a table is built.
//!
//! `FP(b)` is the blocked filter's rate at `b` bits per key with its best
//! probe count ([`crate::theory::best_probes`]), tabulated once on a
//! grid of [`GRID_STEP`] bits; `b = 0` is "no filter" (every lookup reads the
//! table, FP = 1). The optimum is found by bisection on the Lagrange
//! multiplier λ: each level takes the `b` that minimises
//! `runs · FP(b) + λ · keys · b` over the grid (found by a binary search
//! along the grid's lower convex hull, where that minimum always lies),
//! and λ is moved until the bits spent meet the budget.

use std::sync::OnceLock;

use crate::fuse::{FingerprintBits, Geometry};
use crate::theory::{best_probes, MIN_BITS_PER_KEY};

/// Grid spacing of the bits-per-key choices, in bits.
pub const GRID_STEP: f64 = 0.05;
/// The largest bits per key the allocation gives a level: beyond it the
/// blocked filter's rate barely moves (0.0002% at 40 bits).
pub const MAX_ALLOCATED_BITS: f64 = 40.0;

/// One level as the allocation sees it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LevelShape {
    /// Keys the level's filters hold.
    pub keys: u64,
    /// Tables of the level a lookup asks (level 0: every table that may
    /// hold the key, i.e. its table count; deeper levels: 1).
    pub runs: u32,
}

/// The filter a level's tables are built with, and what it costs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum FilterChoice {
    /// No filter: every lookup that reaches a table of the level reads it.
    None,
    /// A blocked Bloom filter of this many bits per key, at its best probe
    /// count.
    Bloom {
        /// Bits per key.
        bits_per_key: f64,
    },
    /// A binary fuse filter with fingerprints of `bits`.
    Fuse {
        /// Fingerprint width.
        bits: FingerprintBits,
        /// Its slot bits per key at the level's table size
        /// ([`fuse_bits_per_key`]).
        bits_per_key: f64,
    },
}

impl FilterChoice {
    /// Bits per key the choice costs (0 for no filter).
    pub fn bits_per_key(self) -> f64 {
        match self {
            FilterChoice::None => 0.0,
            FilterChoice::Bloom { bits_per_key } | FilterChoice::Fuse { bits_per_key, .. } => {
                bits_per_key
            }
        }
    }

    /// The expected false-positive rate for an absent key (1 for no filter).
    pub fn fp_rate(self) -> f64 {
        match self {
            FilterChoice::None => 1.0,
            FilterChoice::Bloom { bits_per_key } => best_probes(bits_per_key).1,
            FilterChoice::Fuse { bits, .. } => bits.fp_rate(),
        }
    }

    /// A Bloom filter of `bits_per_key`, or none at 0 or below.
    pub fn bloom(bits_per_key: f64) -> FilterChoice {
        if bits_per_key > 0.0 {
            FilterChoice::Bloom { bits_per_key }
        } else {
            FilterChoice::None
        }
    }
}

/// Slot bits per key of a binary fuse filter of width `bits` built over
/// `keys` keys (the geometry [`Geometry::for_keys`] gives: about 10.2 bits
/// for 8-bit fingerprints at 10,000 keys, 9.0 from 10⁶ keys on); infinite
/// when no such filter can be built.
pub fn fuse_bits_per_key(keys: u64, bits: FingerprintBits) -> f64 {
    let keys = keys.max(2);
    let geometry = usize::try_from(keys)
        .ok()
        .and_then(|n| Geometry::for_keys(n).ok());
    geometry.map_or(f64::INFINITY, |g| {
        g.slots() as f64 * f64::from(bits.bits()) / keys as f64
    })
}

/// The binary fuse filters a table of `keys_per_table` keys may get.
fn fuse_choices(keys_per_table: u64) -> [FilterChoice; 2] {
    [FingerprintBits::Eight, FingerprintBits::Sixteen].map(|bits| FilterChoice::Fuse {
        bits,
        bits_per_key: fuse_bits_per_key(keys_per_table, bits),
    })
}

/// The best filter within `bits_per_key` for one level on its own (the
/// uniform policy): a Bloom filter of exactly those bits, or — when the
/// level may take static filters (`static_keys_per_table` is its keys per
/// table) — a binary fuse filter that costs no more bits and has a lower
/// rate. No filter at 0 bits.
pub fn best_within(bits_per_key: f64, static_keys_per_table: Option<u64>) -> FilterChoice {
    let bloom = FilterChoice::bloom(bits_per_key);
    let Some(keys) = static_keys_per_table.filter(|_| bits_per_key > 0.0) else {
        return bloom;
    };
    fuse_choices(keys)
        .into_iter()
        .filter(|c| c.bits_per_key() <= bits_per_key)
        .fold(bloom, |best, c| {
            if c.fp_rate() < best.fp_rate() {
                c
            } else {
                best
            }
        })
}

/// `(bits per key, FP)` on the grid: index 0 is "no filter".
fn fp_table() -> &'static [(f64, f64)] {
    static TABLE: OnceLock<Vec<(f64, f64)>> = OnceLock::new();
    TABLE.get_or_init(|| {
        let mut table = vec![(0.0, 1.0)];
        let mut step = (MIN_BITS_PER_KEY / GRID_STEP).ceil();
        while step * GRID_STEP <= MAX_ALLOCATED_BITS + GRID_STEP / 2.0 {
            let bits = step * GRID_STEP;
            table.push((bits, best_probes(bits).1));
            step += 1.0;
        }
        table
    })
}

/// The points of [`fp_table`] on its lower convex hull, in the table's
/// order (points on a hull edge kept): the only points where a cost
/// `runs · FP(b) + λ · keys · b` with positive weights can be least, since
/// a linear function over a finite set is least at a vertex of its hull,
/// and on its lower side when it grows with both coordinates' weights. So
/// `choose` searches these and picks what a scan of the whole grid picks,
/// ties too: the first least point in the table's order is on the hull
/// (tested).
fn hull_table() -> &'static [(f64, f64)] {
    static HULL: OnceLock<Vec<(f64, f64)>> = OnceLock::new();
    HULL.get_or_init(|| lower_hull(fp_table()))
}

/// Andrew's monotone chain, lower half, over points sorted by x; a point
/// is dropped only when it lies strictly above the segment of its
/// neighbours, so points on an edge stay.
fn lower_hull(points: &[(f64, f64)]) -> Vec<(f64, f64)> {
    let mut hull: Vec<(f64, f64)> = Vec::with_capacity(points.len());
    for &p in points {
        while let [.., o, a] = hull[..] {
            // Cross product of o→a and o→p: negative when a is above the
            // segment o→p (the chain turns clockwise at a).
            let cross = (a.0 - o.0) * (p.1 - o.1) - (a.1 - o.1) * (p.0 - o.0);
            if cross < 0.0 {
                hull.pop();
            } else {
                break;
            }
        }
        hull.push(p);
    }
    hull
}

/// The expected false table probes of one absent-key lookup when level `i`
/// gets `bits[i]` bits per key (`0` = no filter).
pub fn expected_false_probes(levels: &[LevelShape], bits: &[f64]) -> f64 {
    levels
        .iter()
        .zip(bits)
        .map(|(level, &b)| {
            let fp = if b <= 0.0 { 1.0 } else { best_probes(b).1 };
            f64::from(level.runs) * fp
        })
        .sum()
}

/// [`expected_false_probes`] for a choice of filter per level.
pub fn expected_false_probes_of(levels: &[LevelShape], choices: &[FilterChoice]) -> f64 {
    levels
        .iter()
        .zip(choices)
        .map(|(level, choice)| f64::from(level.runs) * choice.fp_rate())
        .sum()
}

/// For multiplier `lambda`, each level's best choice (among the Bloom
/// filters of `hull`, [`hull_table`], plus the level's `extra` choices)
/// and the bits spent: the first least of `runs · FP + λ · keys · bits`
/// in the grid's order, then an extra choice only when strictly less —
/// what a scan of the whole grid and then the extras picks (tested).
fn choose(
    levels: &[LevelShape],
    extra: &[Vec<FilterChoice>],
    lambda: f64,
    hull: &[(f64, f64)],
) -> (Vec<FilterChoice>, f64) {
    choose_with(levels, extra, lambda, |cost| least_on_hull(hull, cost))
}

/// [`choose`] with the grid's least point for a cost found by `least`.
fn choose_with(
    levels: &[LevelShape],
    extra: &[Vec<FilterChoice>],
    lambda: f64,
    least: impl Fn(&dyn Fn(f64, f64) -> f64) -> Option<(f64, f64)>,
) -> (Vec<FilterChoice>, f64) {
    let mut spent = 0.0;
    let choice = levels
        .iter()
        .enumerate()
        .map(|(i, level)| {
            let keys = level.keys as f64;
            let runs = f64::from(level.runs);
            let cost = |bits: f64, fp: f64| runs * fp + lambda * keys * bits;
            let grid = least(&cost).map(|(bits, fp)| (FilterChoice::bloom(bits), cost(bits, fp)));
            let others = extra
                .get(i)
                .into_iter()
                .flatten()
                .map(|&c| (c, cost(c.bits_per_key(), c.fp_rate())));
            let best = grid
                .into_iter()
                .chain(others)
                .min_by(|a, b| a.1.total_cmp(&b.1))
                .map_or(FilterChoice::None, |(choice, _)| choice);
            spent += keys * best.bits_per_key();
            best
        })
        .collect();
    (choice, spent)
}

/// The first point of `hull` where `cost` (a positive mix of FP and bits)
/// is least, in a logarithmic number of evaluations: along the lower hull
/// the cost falls, then rises, so the first point not above the next one
/// is where it stops falling (a binary search over neighbouring pairs).
/// Rounding can blur the turn over a point or two where neighbours' costs
/// nearly tie, so the points around it are compared one by one, keeping
/// the first least, as a scan would.
fn least_on_hull(hull: &[(f64, f64)], cost: &dyn Fn(f64, f64) -> f64) -> Option<(f64, f64)> {
    let of = |&(bits, fp): &(f64, f64)| cost(bits, fp);
    let falls_after = |i: usize| match (hull.get(i), hull.get(i + 1)) {
        (Some(here), Some(next)) => of(next) < of(here),
        _ => false,
    };
    let (mut lo, mut hi) = (0, hull.len().saturating_sub(1));
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if falls_after(mid) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    let turn = lo;
    let near = hull.get(turn.saturating_sub(NEAR_TURN)..hull.len().min(turn + NEAR_TURN + 1))?;
    near.iter().copied().min_by(|a, b| of(a).total_cmp(&of(b)))
}

/// Points on each side of the hull's turn [`least_on_hull`] compares.
const NEAR_TURN: usize = 3;

/// Bits per key for each level (`0` = build no filter there) that minimise
/// [`expected_false_probes`] while spending at most `avg_bits_per_key` bits
/// per key over all levels' keys. Levels with no keys get the average (they
/// cost nothing now and their first table is built at that rate).
pub fn allocate_bits(levels: &[LevelShape], avg_bits_per_key: f64) -> Vec<f64> {
    allocate_filters(levels, &[], avg_bits_per_key)
        .into_iter()
        .map(FilterChoice::bits_per_key)
        .collect()
}

/// Spends the budget the multiplier left over: the multiplier only reaches
/// the choices on each level's lower convex hull, and a fuse filter's
/// single point often is not on it, so the bits it saves may sit unused.
/// While some level can move to a better choice within what is left, the
/// move that removes the most false probes is made.
fn spend_what_is_left(
    levels: &[LevelShape],
    extra: &[Vec<FilterChoice>],
    table: &[(f64, f64)],
    budget: f64,
    choices: &mut [FilterChoice],
) {
    let spent = |choices: &[FilterChoice]| -> f64 {
        levels
            .iter()
            .zip(choices.iter())
            .map(|(l, c)| l.keys as f64 * c.bits_per_key())
            .sum()
    };
    // Rates from the table (computing a Bloom rate is not cheap).
    let rate_of = |choice: FilterChoice| match choice {
        FilterChoice::Bloom { bits_per_key } => table
            .iter()
            .find(|&&(bits, _)| bits == bits_per_key)
            .map_or_else(|| choice.fp_rate(), |&(_, fp)| fp),
        other => other.fp_rate(),
    };
    let mut rates: Vec<f64> = choices.iter().map(|&c| rate_of(c)).collect();
    // Each move lowers the false probes, so this ends; the cap is a guard.
    for _ in 0..10_000 {
        let left = budget - spent(choices);
        let mut best: Option<(usize, FilterChoice, f64, f64)> = None;
        for (i, ((level, current), &rate)) in
            levels.iter().zip(choices.iter()).zip(&rates).enumerate()
        {
            let keys = level.keys as f64;
            let runs = f64::from(level.runs);
            let options = table
                .iter()
                .map(|&(bits, fp)| (FilterChoice::bloom(bits), fp))
                .chain(
                    extra
                        .get(i)
                        .into_iter()
                        .flatten()
                        .map(|&c| (c, c.fp_rate())),
                );
            for (option, fp) in options {
                let extra_bits = keys * (option.bits_per_key() - current.bits_per_key());
                let gain = runs * (rate - fp);
                if extra_bits <= left && gain > 0.0 && best.is_none_or(|(.., g)| gain > g) {
                    best = Some((i, option, fp, gain));
                }
            }
        }
        let Some((i, option, fp, _)) = best else {
            return;
        };
        if let (Some(slot), Some(rate)) = (choices.get_mut(i), rates.get_mut(i)) {
            (*slot, *rate) = (option, fp);
        }
    }
}

/// [`allocate_bits`] where level `i` may also take a binary fuse filter
/// when `static_keys_per_table[i]` is `Some(keys per table)` (levels past
/// the slice's end may not): the filter per level that minimises the
/// expected false probes within the budget. A level with no keys gets
/// [`best_within`] the average.
pub fn allocate_filters(
    levels: &[LevelShape],
    static_keys_per_table: &[Option<u64>],
    avg_bits_per_key: f64,
) -> Vec<FilterChoice> {
    let statics = |i: usize| static_keys_per_table.get(i).copied().flatten();
    let empty_level = |i: usize| best_within(avg_bits_per_key.min(MAX_ALLOCATED_BITS), statics(i));
    let total_keys: f64 = levels.iter().map(|l| l.keys as f64).sum();
    let budget = avg_bits_per_key * total_keys;
    if total_keys <= 0.0 || avg_bits_per_key <= 0.0 {
        return (0..levels.len()).map(empty_level).collect();
    }
    let extra: Vec<Vec<FilterChoice>> = (0..levels.len())
        .map(|i| {
            statics(i)
                .map(|keys| fuse_choices(keys).to_vec())
                .unwrap_or_default()
        })
        .collect();
    let table = fp_table();
    let hull = hull_table();
    // λ = 0 spends the most; a huge λ spends nothing. Bisect in log space.
    let (mut lo, mut hi) = (1e-30f64, 1e6f64);
    let (most, spent_most) = choose(levels, &extra, lo, hull);
    let mut best = if spent_most <= budget {
        most
    } else {
        for _ in 0..200 {
            let mid = (lo * hi).sqrt();
            let (_, spent) = choose(levels, &extra, mid, hull);
            if spent > budget {
                lo = mid;
            } else {
                hi = mid;
            }
            if hi / lo < 1.000_001 {
                break;
            }
        }
        choose(levels, &extra, hi, hull).0
    };
    spend_what_is_left(levels, &extra, table, budget, &mut best);
    for (i, (choice, level)) in best.iter_mut().zip(levels).enumerate() {
        if level.keys == 0 {
            *choice = empty_level(i);
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spent(levels: &[LevelShape], bits: &[f64]) -> f64 {
        levels
            .iter()
            .zip(bits)
            .map(|(l, b)| l.keys as f64 * b)
            .sum()
    }

    /// The hull keeps the grid's first point, its last, and every point
    /// a linear cost can be least at: for a spread of multipliers and
    /// level shapes (with and without fuse choices), `choose` (a binary
    /// search along the hull) picks exactly what a scan of the whole grid
    /// picks. It fails if the hull dropped a point that is some cost's
    /// first least one, or the search missed it.
    #[test]
    fn the_hull_picks_what_the_grid_picks() {
        let (table, hull) = (fp_table(), hull_table());
        assert_eq!(hull.first(), table.first());
        assert_eq!(hull.last(), table.last());
        assert!(
            hull.len() < table.len(),
            "{} of {}",
            hull.len(),
            table.len()
        );
        let shapes: Vec<LevelShape> = [1u64, 7, 1_000, 65_536, 10_000_000, 3_000_000_000]
            .into_iter()
            .flat_map(|keys| [1u32, 4, 20].map(|runs| LevelShape { keys, runs }))
            .collect();
        let extra: Vec<Vec<FilterChoice>> = shapes
            .iter()
            .enumerate()
            .map(|(i, l)| {
                if i % 2 == 0 {
                    fuse_choices(l.keys.max(2)).to_vec()
                } else {
                    vec![]
                }
            })
            .collect();
        for step in 0..=3_600 {
            let lambda = 10f64.powf(-30.0 + f64::from(step) / 100.0);
            assert_eq!(
                choose(&shapes, &extra, lambda, hull),
                choose_by_scan(&shapes, &extra, lambda, table),
                "lambda {lambda}"
            );
        }
        // A point strictly above its neighbours' segment is dropped.
        let v = lower_hull(&[(0.0, 1.0), (1.0, 0.9), (2.0, 0.2), (3.0, 0.1)]);
        assert_eq!(v, vec![(0.0, 1.0), (2.0, 0.2), (3.0, 0.1)]);
        // A point on the segment stays.
        let v = lower_hull(&[(0.0, 1.0), (1.0, 0.5), (2.0, 0.0)]);
        assert_eq!(v.len(), 3);
    }

    /// `choose` with the grid's least point found by a scan of every
    /// point, the first least kept: the reference the hull's binary
    /// search is held to.
    fn choose_by_scan(
        levels: &[LevelShape],
        extra: &[Vec<FilterChoice>],
        lambda: f64,
        table: &[(f64, f64)],
    ) -> (Vec<FilterChoice>, f64) {
        choose_with(levels, extra, lambda, |cost| {
            table
                .iter()
                .copied()
                .min_by(|a, b| cost(a.0, a.1).total_cmp(&cost(b.0, b.1)))
        })
    }

    /// A tree of size ratio 10: level 0 with four tables, then L1..L3.
    fn tree() -> Vec<LevelShape> {
        vec![
            LevelShape {
                keys: 400_000,
                runs: 4,
            },
            LevelShape {
                keys: 1_000_000,
                runs: 1,
            },
            LevelShape {
                keys: 10_000_000,
                runs: 1,
            },
            LevelShape {
                keys: 100_000_000,
                runs: 1,
            },
        ]
    }

    #[test]
    fn upper_levels_get_more_bits_and_the_budget_is_kept() {
        let levels = tree();
        let bits = allocate_bits(&levels, 10.0);
        let total: f64 = levels.iter().map(|l| l.keys as f64).sum();
        let budget = 10.0 * total;
        assert!(spent(&levels, &bits) <= budget * 1.01, "{bits:?}");
        assert!(spent(&levels, &bits) >= budget * 0.99, "{bits:?}");
        assert!(bits.windows(2).skip(1).all(|w| w[0] > w[1]), "{bits:?}");
        let uniform = expected_false_probes(&levels, &[10.0; 4]);
        let aware = expected_false_probes(&levels, &bits);
        println!("bits {bits:?}: false probes {aware:.5} vs uniform {uniform:.5}");
        assert!(aware < 0.6 * uniform, "aware {aware}, uniform {uniform}");
    }

    /// Brute force over a coarser grid: no allocation within the budget
    /// does better than the computed one (beyond the coarse grid's slack).
    #[test]
    fn the_allocation_beats_every_grid_point_within_the_budget() {
        let cases = [
            vec![
                LevelShape {
                    keys: 1_000,
                    runs: 3,
                },
                LevelShape {
                    keys: 10_000,
                    runs: 1,
                },
                LevelShape {
                    keys: 100_000,
                    runs: 1,
                },
            ],
            vec![
                LevelShape {
                    keys: 50_000,
                    runs: 1,
                },
                LevelShape {
                    keys: 60_000,
                    runs: 1,
                },
                LevelShape {
                    keys: 70_000,
                    runs: 1,
                },
            ],
            vec![
                LevelShape {
                    keys: 5_000,
                    runs: 8,
                },
                LevelShape {
                    keys: 200_000,
                    runs: 1,
                },
                LevelShape {
                    keys: 2_000,
                    runs: 1,
                },
            ],
        ];
        for levels in cases {
            for avg in [2.0, 6.0, 10.0, 14.0] {
                let bits = allocate_bits(&levels, avg);
                let budget = avg * levels.iter().map(|l| l.keys as f64).sum::<f64>();
                assert!(spent(&levels, &bits) <= budget * 1.01);
                let ours = expected_false_probes(&levels, &bits);
                let grid: Vec<(f64, f64)> = std::iter::once((0.0, 1.0))
                    .chain((2..=120).map(|i| {
                        let b = f64::from(i) * 0.25;
                        (b, best_probes(b).1)
                    }))
                    .collect();
                let [l0, l1, l2] = [&levels[0], &levels[1], &levels[2]];
                let mut brute = f64::INFINITY;
                for &(a, fa) in &grid {
                    for &(b, fb) in &grid {
                        for &(c, fc) in &grid {
                            let cost = l0.keys as f64 * a + l1.keys as f64 * b + l2.keys as f64 * c;
                            if cost <= budget {
                                let probes = f64::from(l0.runs) * fa
                                    + f64::from(l1.runs) * fb
                                    + f64::from(l2.runs) * fc;
                                brute = brute.min(probes);
                            }
                        }
                    }
                }
                assert!(
                    ours <= brute * 1.02 + 1e-12,
                    "{levels:?} at {avg}: ours {ours} ({bits:?}), brute force {brute}"
                );
            }
        }
    }

    #[test]
    fn edge_cases_spend_nothing_wrong() {
        assert!(allocate_bits(&[], 10.0).is_empty());
        let levels = tree();
        assert!(allocate_bits(&levels, 0.0).iter().all(|&b| b == 0.0));
        let empty = [
            LevelShape { keys: 0, runs: 0 },
            LevelShape {
                keys: 1000,
                runs: 1,
            },
        ];
        let bits = allocate_bits(&empty, 10.0);
        assert_eq!(bits[0], 10.0);
        assert!((bits[1] - 10.0).abs() <= 0.1 + 1e-9, "within 1%: {bits:?}");
        // A budget beyond what helps: no level past the cap.
        let bits = allocate_bits(&levels, 100.0);
        assert!(bits.iter().all(|&b| b <= MAX_ALLOCATED_BITS + 1e-9));
    }

    fn spent_of(levels: &[LevelShape], choices: &[FilterChoice]) -> f64 {
        levels
            .iter()
            .zip(choices)
            .map(|(l, c)| l.keys as f64 * c.bits_per_key())
            .sum()
    }

    #[test]
    fn the_best_filter_within_a_budget() {
        let million = Some(1_000_000);
        match best_within(10.0, million) {
            FilterChoice::Fuse { bits, bits_per_key } => {
                assert_eq!(bits, FingerprintBits::Eight);
                assert!((9.0..9.1).contains(&bits_per_key), "{bits_per_key}");
            }
            other => panic!("{other:?}"),
        }
        // 14 bits of Bloom beat an 8-bit fuse filter's 2^-8; 16 bits of
        // fingerprint do not fit.
        assert_eq!(
            best_within(14.0, million),
            FilterChoice::Bloom { bits_per_key: 14.0 }
        );
        assert!(matches!(
            best_within(20.0, million),
            FilterChoice::Fuse {
                bits: FingerprintBits::Sixteen,
                ..
            }
        ));
        assert_eq!(
            best_within(10.0, None),
            FilterChoice::Bloom { bits_per_key: 10.0 }
        );
        assert_eq!(best_within(0.0, million), FilterChoice::None);
        // Small tables cost a fuse filter more bits per key.
        assert!(fuse_bits_per_key(10_000, FingerprintBits::Eight) > 10.0);
        assert!(matches!(
            best_within(10.0, Some(10_000)),
            FilterChoice::Bloom { .. }
        ));
        assert_eq!(FilterChoice::None.fp_rate(), 1.0);
    }

    #[test]
    fn static_levels_take_fuse_filters_and_the_saving_goes_up() {
        let levels = tree();
        let statics = [None, Some(300_000), Some(300_000), Some(300_000)];
        let budget = 10.0 * levels.iter().map(|l| l.keys as f64).sum::<f64>();
        let bloom_only = allocate_filters(&levels, &[], 10.0);
        let mixed = allocate_filters(&levels, &statics, 10.0);
        assert!(spent_of(&levels, &mixed) <= budget * 1.01, "{mixed:?}");
        assert!(
            matches!(mixed[3], FilterChoice::Fuse { .. }),
            "the largest level takes the cheap static filter: {mixed:?}"
        );
        assert!(matches!(mixed[0], FilterChoice::Bloom { .. }), "{mixed:?}");
        let before = expected_false_probes_of(&levels, &bloom_only);
        let after = expected_false_probes_of(&levels, &mixed);
        println!("{mixed:?}: {after:.5} vs Bloom only {before:.5}");
        assert!(after < 0.9 * before, "{after} vs {before}");
        // allocate_bits is the Bloom-only allocation.
        let bits: Vec<f64> = bloom_only.iter().map(|c| c.bits_per_key()).collect();
        assert_eq!(bits, allocate_bits(&levels, 10.0));
    }

    /// Brute force with the fuse choices added to a coarse Bloom grid.
    #[test]
    fn the_mixed_allocation_beats_every_grid_point_within_the_budget() {
        let levels = [
            LevelShape {
                keys: 10_000,
                runs: 4,
            },
            LevelShape {
                keys: 100_000,
                runs: 1,
            },
            LevelShape {
                keys: 1_000_000,
                runs: 1,
            },
        ];
        let statics = [None, Some(100_000), Some(250_000)];
        for avg in [4.0, 8.0, 10.0, 12.0, 16.0] {
            let choices = allocate_filters(&levels, &statics, avg);
            let budget = avg * levels.iter().map(|l| l.keys as f64).sum::<f64>();
            assert!(spent_of(&levels, &choices) <= budget * 1.01);
            let ours = expected_false_probes_of(&levels, &choices);
            // (bits per key, rate) of each level's options.
            let options = |i: usize| -> Vec<(f64, f64)> {
                let mut v: Vec<FilterChoice> = std::iter::once(FilterChoice::None)
                    .chain((2..=120).map(|j| FilterChoice::bloom(f64::from(j) * 0.25)))
                    .collect();
                if let Some(keys) = statics[i] {
                    v.extend(fuse_choices(keys));
                }
                v.iter().map(|c| (c.bits_per_key(), c.fp_rate())).collect()
            };
            let (o0, o1, o2) = (options(0), options(1), options(2));
            let k = levels.map(|l| l.keys as f64);
            let r = levels.map(|l| f64::from(l.runs));
            let mut brute = f64::INFINITY;
            for &(a, fa) in &o0 {
                for &(b, fb) in &o1 {
                    for &(c, fc) in &o2 {
                        if k[0] * a + k[1] * b + k[2] * c <= budget {
                            brute = brute.min(r[0] * fa + r[1] * fb + r[2] * fc);
                        }
                    }
                }
            }
            assert!(
                ours <= brute * 1.02 + 1e-12,
                "at {avg}: ours {ours} ({choices:?}), brute force {brute}"
            );
        }
    }
}
