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
//! Must never: exceed the budget by more than the grid step allows (1%), or
//! run on the read path — it runs when a table is built.
//!
//! `FP(b)` is the blocked filter's rate at `b` bits per key with its best
//! probe count ([`crate::filter::theory::best_probes`]), tabulated once on a
//! grid of [`GRID_STEP`] bits; `b = 0` is "no filter" (every lookup reads the
//! table, FP = 1). The optimum is found by bisection on the Lagrange
//! multiplier λ: each level takes the `b` that minimises
//! `runs · FP(b) + λ · keys · b` over the grid, and λ is moved until the
//! bits spent meet the budget.

use std::sync::OnceLock;

use crate::filter::theory::{best_probes, MIN_BITS_PER_KEY};

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

/// For multiplier `lambda`, each level's best grid choice and the bits spent.
fn choose(levels: &[LevelShape], lambda: f64, table: &[(f64, f64)]) -> (Vec<f64>, f64) {
    let mut spent = 0.0;
    let choice = levels
        .iter()
        .map(|level| {
            let keys = level.keys as f64;
            let runs = f64::from(level.runs);
            let best = table
                .iter()
                .map(|&(bits, fp)| (bits, runs * fp + lambda * keys * bits))
                .min_by(|a, b| a.1.total_cmp(&b.1))
                .map_or(0.0, |(bits, _)| bits);
            spent += keys * best;
            best
        })
        .collect();
    (choice, spent)
}

/// Bits per key for each level (`0` = build no filter there) that minimise
/// [`expected_false_probes`] while spending at most `avg_bits_per_key` bits
/// per key over all levels' keys. Levels with no keys get the average (they
/// cost nothing now and their first table is built at that rate).
pub fn allocate_bits(levels: &[LevelShape], avg_bits_per_key: f64) -> Vec<f64> {
    let total_keys: f64 = levels.iter().map(|l| l.keys as f64).sum();
    let budget = avg_bits_per_key * total_keys;
    let empty_level_bits = avg_bits_per_key.clamp(0.0, MAX_ALLOCATED_BITS);
    if total_keys <= 0.0 || avg_bits_per_key <= 0.0 {
        return levels
            .iter()
            .map(|_| {
                if avg_bits_per_key <= 0.0 {
                    0.0
                } else {
                    empty_level_bits
                }
            })
            .collect();
    }
    let table = fp_table();
    // λ = 0 spends the most; a huge λ spends nothing. Bisect in log space.
    let (mut lo, mut hi) = (1e-30f64, 1e6f64);
    let (most, spent_most) = choose(levels, lo, table);
    let mut best = if spent_most <= budget {
        most
    } else {
        for _ in 0..200 {
            let mid = (lo * hi).sqrt();
            let (_, spent) = choose(levels, mid, table);
            if spent > budget {
                lo = mid;
            } else {
                hi = mid;
            }
            if hi / lo < 1.000_001 {
                break;
            }
        }
        choose(levels, hi, table).0
    };
    for (bits, level) in best.iter_mut().zip(levels) {
        if level.keys == 0 {
            *bits = empty_level_bits;
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
}
