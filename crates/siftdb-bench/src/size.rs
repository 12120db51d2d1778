//! The size of a run: counts as people write them, and the checks that a
//! run fits this machine before anything is allocated.
//!
//! Owns: [`parse_count`] (`20M`, `200k`, `1000000`, `1_000_000`) for the
//! `--n` and `--ops` flags of `siftdb bench` and the peers comparison, and
//! [`check_fits`], which turns a size this machine cannot hold into one
//! line of error instead of an allocation abort an hour later;
//! [`check_before_run`], every refusal `siftdb bench` and the peers
//! comparison make before any work.
//! Must never: allocate in proportion to the sizes it checks.

use std::path::Path;

use super::cold::ColdCache;
use super::data::{KEY_LEN, VALUE_LEN};
use super::phase::harness_bytes;
use super::report::group_digits;

/// A count as written on a command line: decimal digits (`_` and `,` may
/// group them) with an optional SI suffix, `k` (10³), `M` (10⁶) or `G`
/// (10⁹), either case. `20M` is 20,000,000.
pub fn parse_count(text: &str) -> Result<u64, String> {
    let trimmed = text.trim();
    let (digits, scale) = match trimmed.char_indices().last() {
        Some((at, 'k' | 'K')) => (trimmed.get(..at), 1_000),
        Some((at, 'm' | 'M')) => (trimmed.get(..at), 1_000_000),
        Some((at, 'g' | 'G')) => (trimmed.get(..at), 1_000_000_000),
        _ => (Some(trimmed), 1),
    };
    let digits: String = digits
        .unwrap_or_default()
        .chars()
        .filter(|c| !matches!(c, '_' | ','))
        .collect();
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!(
            "{text:?} is not a count (digits with an optional k, M or G, e.g. 200k or 20M)"
        ));
    }
    digits
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(scale))
        .ok_or_else(|| format!("{text:?} is too large a count"))
}

/// Bytes of keys and values `n` keys hold before any engine overhead.
pub fn raw_data_bytes(n: u64) -> u64 {
    n.saturating_mul((KEY_LEN + VALUE_LEN) as u64)
}

/// What a run of `n` keys and `ops` operations per read phase needs of the
/// machine, checked against what it has.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fit {
    /// Physical memory (`None`: unknown, not checked).
    pub memory_bytes: Option<u64>,
    /// Free space where the engine's files go (`None`: unknown, not checked).
    pub free_disk_bytes: Option<u64>,
}

impl Fit {
    /// This machine: its physical memory and the space free in `dir`, or
    /// in its nearest existing ancestor when `dir` is still to be created.
    pub fn of_machine(dir: &Path) -> Fit {
        let existing = dir
            .ancestors()
            .map(|p| {
                if p.as_os_str().is_empty() {
                    Path::new(".")
                } else {
                    p
                }
            })
            .find(|p| p.is_dir())
            .unwrap_or(dir);
        // Unknown where the system has no statvfs (Windows).
        #[cfg(unix)]
        let free_disk_bytes = rustix::fs::statvfs(existing)
            .ok()
            .map(|s| s.f_bavail.saturating_mul(s.f_frsize));
        #[cfg(not(unix))]
        let free_disk_bytes = {
            let _ = existing;
            None
        };
        Fit {
            memory_bytes: super::resident::total_memory_bytes(),
            free_disk_bytes,
        }
    }
}

fn gib(bytes: u64) -> String {
    format!("{:.1} GiB", bytes as f64 / f64::from(1u32 << 30))
}

/// Refuses, in one line, a run whose harness alone would need more memory
/// than the machine has (its orders and draws, [`harness_bytes`]), or
/// whose keys and values alone exceed the free disk space. Engines need
/// more than either; this only catches the sizes that cannot work at all.
pub fn check_fits(n: u64, ops: u64, fit: Fit) -> Result<(), String> {
    let harness = harness_bytes(n, ops);
    if let Some(memory) = fit.memory_bytes {
        if harness > memory {
            return Err(format!(
                "N = {} with {} ops per read phase needs {} for the benchmark's own key orders and draws (8 bytes per key, about 57 per op), more than this machine's {} of memory",
                group_digits(n),
                group_digits(ops),
                gib(harness),
                gib(memory)
            ));
        }
    }
    let data = raw_data_bytes(n);
    if let Some(free) = fit.free_disk_bytes {
        if data > free {
            return Err(format!(
                "N = {} keys of {} bytes are {} of data before any engine overhead, more than the {} free for the database",
                group_digits(n),
                KEY_LEN + VALUE_LEN,
                gib(data),
                gib(free)
            ));
        }
    }
    Ok(())
}

/// The checks both benchmark commands make before any work: with `cold`,
/// that this process may drop the page cache (the [`ColdCache`] to use);
/// and that `n` keys with `ops` operations per read phase fit this
/// machine's memory and the disk under `dir` ([`check_fits`]).
pub fn check_before_run(
    n: u64,
    ops: u64,
    cold: bool,
    dir: &Path,
) -> Result<Option<ColdCache>, String> {
    let cold = if cold {
        Some(ColdCache::for_this_machine()?)
    } else {
        None
    };
    check_fits(n, ops, Fit::of_machine(dir))?;
    Ok(cold)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_take_si_suffixes_and_grouping() {
        assert_eq!(parse_count("1"), Ok(1));
        assert_eq!(parse_count("1000000"), Ok(1_000_000));
        assert_eq!(parse_count("1_000_000"), Ok(1_000_000));
        assert_eq!(parse_count("1,000,000"), Ok(1_000_000));
        assert_eq!(parse_count("200k"), Ok(200_000));
        assert_eq!(parse_count("200K"), Ok(200_000));
        assert_eq!(parse_count("20M"), Ok(20_000_000));
        assert_eq!(parse_count("20m"), Ok(20_000_000));
        assert_eq!(parse_count("3G"), Ok(3_000_000_000));
        assert_eq!(parse_count(" 7 "), Ok(7));
        assert_eq!(parse_count("100000000000"), Ok(100_000_000_000));
        for bad in ["", "k", "M", "1.5M", "-3", "12x", "1e6", "0x10", "20MB"] {
            let err = parse_count(bad).unwrap_err();
            assert!(err.contains("not a count"), "{bad}: {err}");
        }
        assert!(parse_count("18446744073709551615").is_ok());
        assert!(parse_count("18446744073709551616")
            .unwrap_err()
            .contains("too large"));
        assert!(parse_count("18446744073709552k")
            .unwrap_err()
            .contains("too large"));
    }

    #[test]
    fn a_run_larger_than_memory_or_disk_is_one_line_of_error() {
        let machine = Fit {
            memory_bytes: Some(24 << 30),
            free_disk_bytes: Some(67 << 30),
        };
        assert_eq!(check_fits(1_000_000, 1_000_000, machine), Ok(()));
        assert_eq!(check_fits(20_000_000, 200_000, machine), Ok(()));
        let err = check_fits(100_000_000_000, 100_000_000_000, machine).unwrap_err();
        assert!(
            err.contains("memory") && err.contains("N = 100,000,000,000"),
            "{err}"
        );
        assert_eq!(err.lines().count(), 1);
        // Enough memory for the orders, not enough disk for the data.
        let err = check_fits(1_000_000_000, 1000, machine).unwrap_err();
        assert!(err.contains("free for the database"), "{err}");
        // Unknown sizes are not checked.
        let unknown = Fit {
            memory_bytes: None,
            free_disk_bytes: None,
        };
        assert_eq!(check_fits(100_000_000_000, 1, unknown), Ok(()));
    }

    #[test]
    fn this_machine_reports_its_memory_and_disk() {
        let dir = tempfile::tempdir().unwrap();
        let fit = Fit::of_machine(dir.path());
        assert!(fit.memory_bytes.unwrap() > 0);
        assert!(fit.free_disk_bytes.is_some());
        let below = Fit::of_machine(&dir.path().join("to/be/created"));
        assert!(below.free_disk_bytes.is_some());
        assert!(Fit::of_machine(Path::new("relative/missing"))
            .free_disk_bytes
            .is_some());
    }
}
