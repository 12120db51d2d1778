//! CPU time the whole process used (every thread: the caller and the
//! engine's background flushes and compactions).
//!
//! Owns: [`process_cpu_seconds`]. On a shared machine wall time swings with
//! other processes' load; CPU time per phase does far less, so every phase
//! report carries it beside ops/s ([`crate::PhaseReport::cpu_seconds`]).
//! Must never: be read inside a timed section, or around the page-cache
//! drop of a cold phase (the kernel charges that drop to this process).

/// Clock ticks per second of `/proc/<pid>/stat` (`USER_HZ`, fixed at 100
/// by the Linux ABI on x86-64 and arm64).
const USER_HZ: f64 = 100.0;

/// User plus system CPU seconds of this process so far (all threads, exited
/// ones included), at 10 ms resolution; `None` where `/proc` is missing.
pub fn process_cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // The command name (field 2) may hold spaces; fields after its closing
    // parenthesis are plain. utime and stime are fields 14 and 15.
    let (_, rest) = stat.rsplit_once(')')?;
    let mut fields = rest.split_whitespace().skip(11);
    let utime: u64 = fields.next()?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some((utime + stime) as f64 / USER_HZ)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_time_grows_with_work() {
        let before = process_cpu_seconds().unwrap();
        let mut x = 0u64;
        let start = std::time::Instant::now();
        while start.elapsed().as_millis() < 300 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
        }
        std::hint::black_box(x);
        let after = process_cpu_seconds().unwrap();
        assert!(after >= before, "{before} -> {after}");
    }
}
