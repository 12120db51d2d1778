//! The false-positive mathematics of Bloom filters, standard and blocked.
//!
//! Owns: the formulas the filter is sized by and tested against.
//! Must never: be used on the query path — everything here runs once, when a
//! filter is sized.
//!
//! A blocked Bloom filter (Putze, Sanders, Singler 2007) puts all `k` probes
//! of a key into one 512-bit line. The number of keys landing in a line is
//! Poisson-distributed with mean `λ = 512 / bits_per_key`, and a line holding
//! `i` keys answers a random absent key falsely with probability
//! `(1 − (1 − 1/512)^(k·i))^k`, so
//!
//! ```text
//! FP_blocked(b, k) = Σ_i  P(i; λ) · (1 − (1 − 1/512)^(k·i))^k ,   λ = 512 / b
//! ```
//!
//! The standard (unblocked) filter has `FP = (1 − e^(−k·n/m))^k`.

/// Bits in one cache line of the blocked layout.
pub const LINE_BITS: u32 = 512;
/// The largest probe count any filter uses.
pub const MAX_PROBES: u32 = 32;
/// The smallest bits per key accepted.
pub const MIN_BITS_PER_KEY: f64 = 0.5;
/// The largest bits per key accepted (beyond it a blocked filter gains nothing).
pub const MAX_BITS_PER_KEY: f64 = 128.0;

/// False-positive rate of a standard Bloom filter with `m` bits, `n` keys, `k` probes.
pub fn standard_fp_rate(m: f64, n: f64, k: u32) -> f64 {
    if m <= 0.0 {
        return 1.0;
    }
    (1.0 - (-(k as f64) * n / m).exp()).powi(k as i32)
}

/// False-positive rate of a filter blocked into 512-bit lines (Putze et al. 2007).
pub fn blocked_fp_rate(bits_per_key: f64, k: u32) -> f64 {
    let lambda = LINE_BITS as f64 / bits_per_key;
    let spread = 12.0 * lambda.sqrt() + 16.0;
    #[expect(
        clippy::cast_possible_truncation,
        reason = "float-to-int casts saturate; both bounds are a few hundred at most"
    )]
    let (lo, hi) = (
        (lambda - spread).max(0.0).floor() as u64,
        (lambda + spread).ceil() as u64,
    );
    let per_probe_miss = 1.0 - 1.0 / LINE_BITS as f64;
    // Poisson terms and (1 − 1/512)^(k·i) are both carried from one i to
    // the next by a multiplication: this runs once per table built.
    let mut pmf = (lo as f64 * lambda.ln() - lambda - ln_factorial(lo)).exp();
    let miss_per_key = per_probe_miss.powf(k as f64);
    let mut miss = miss_per_key.powf(lo as f64);
    let mut total = 0.0;
    for i in lo..=hi {
        total += pmf * (1.0 - miss).powi(k as i32);
        pmf *= lambda / (i + 1) as f64;
        miss *= miss_per_key;
    }
    total
}

fn ln_factorial(n: u64) -> f64 {
    (2..=n).map(|i| (i as f64).ln()).sum()
}

/// The probe count with the lowest blocked false-positive rate at `bits_per_key`,
/// and that rate.
pub fn best_probes(bits_per_key: f64) -> (u32, f64) {
    let mut best = (1, blocked_fp_rate(bits_per_key, 1));
    for k in 2..=MAX_PROBES {
        let fp = blocked_fp_rate(bits_per_key, k);
        if fp < best.1 {
            best = (k, fp);
        } else if fp > best.1 * 1.5 {
            // The rate is unimodal in k: once clearly past the minimum, stop.
            break;
        }
    }
    best
}

/// The fewest bits per key (to 1/64 bit) whose best blocked rate is at most
/// `fp_rate`, or `None` when even `MAX_BITS_PER_KEY` cannot reach it.
pub fn bits_per_key_for_rate(fp_rate: f64) -> Option<f64> {
    if best_probes(MAX_BITS_PER_KEY).1 > fp_rate {
        return None;
    }
    let (mut lo, mut hi) = (MIN_BITS_PER_KEY, MAX_BITS_PER_KEY);
    if best_probes(lo).1 <= fp_rate {
        return Some(lo);
    }
    while hi - lo > 1.0 / 64.0 {
        let mid = (lo + hi) / 2.0;
        if best_probes(mid).1 <= fp_rate {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    Some(hi)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocked_rates_match_the_published_values() {
        // Best-k blocked rates at 6/8/10/12/16/20 bits per key (REFERENCES.md).
        let published = [
            (6.0, 0.0575),
            (8.0, 0.0231),
            (10.0, 0.00957),
            (12.0, 0.00407),
            (16.0, 0.00082),
            (20.0, 0.00019),
        ];
        for (bpk, want) in published {
            let (_, got) = best_probes(bpk);
            assert!(
                (got / want - 1.0).abs() < 0.03,
                "{bpk} bits/key: {got} vs published {want}"
            );
        }
    }

    #[test]
    fn blocking_costs_more_at_higher_bits_per_key() {
        let penalty = |b: f64| {
            let k = if b < 15.0 { 7 } else { 14 };
            best_probes(b).1 / standard_fp_rate(b, 1.0, k)
        };
        assert!(penalty(10.0) > 1.05 && penalty(10.0) < 1.4);
        assert!(penalty(20.0) > penalty(10.0));
    }

    #[test]
    fn standard_rate_at_ten_bits_is_point_eight_two_percent() {
        let fp = standard_fp_rate(10.0, 1.0, 7);
        assert!((fp - 0.00819).abs() < 0.0001, "{fp}");
    }

    #[test]
    fn sizing_for_a_rate_is_tight() {
        for p in [0.05, 0.01, 0.001, 1e-5] {
            let b = bits_per_key_for_rate(p).unwrap();
            assert!(best_probes(b).1 <= p);
            assert!(best_probes(b - 0.05).1 > p, "{p}: {b} is not the least");
        }
        assert!(bits_per_key_for_rate(1e-30).is_none());
    }
}
