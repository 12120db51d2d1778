//! The memory the benchmark process holds, as the kernel counts it.
//!
//! Owns: reading the process's resident set (`VmRSS`) and its peak
//! (`VmHWM`) from `/proc/self/status`, resetting that peak between phases
//! (`/proc/self/clear_refs`), and the machine's physical memory
//! (`MemTotal` in `/proc/meminfo`) that sizes are checked against.
//! Must never: be read inside a timed section, or fail a run: where `/proc`
//! is missing or says something else, every figure is simply `None`.
//!
//! The memory cgroup's peak (page cache included) is not read here:
//! `run-limited.sh` prints it for the whole command.

use std::path::Path;

const STATUS: &str = "/proc/self/status";
const CLEAR_REFS: &str = "/proc/self/clear_refs";
const MEMINFO: &str = "/proc/meminfo";

/// The value of field `name` (e.g. `VmHWM`) of a `/proc` file whose lines
/// read `Name:   1234 kB`, in bytes.
fn kib_field(text: &str, name: &str) -> Option<u64> {
    text.lines().find_map(|line| {
        let rest = line.strip_prefix(name)?.strip_prefix(':')?;
        let kib = rest.trim().strip_suffix("kB")?.trim().parse::<u64>().ok()?;
        kib.checked_mul(1024)
    })
}

fn read_field(path: &Path, name: &str) -> Option<u64> {
    kib_field(&std::fs::read_to_string(path).ok()?, name)
}

/// Bytes the process has resident now.
pub fn rss_bytes() -> Option<u64> {
    read_field(Path::new(STATUS), "VmRSS")
}

/// The most bytes the process has had resident since it started or since
/// the last [`reset_peak_rss`].
pub fn peak_rss_bytes() -> Option<u64> {
    read_field(Path::new(STATUS), "VmHWM")
}

/// Sets the peak resident figure back to the current one (Linux ≥ 4.0:
/// `5` written to `/proc/self/clear_refs`, which touches nothing else), so
/// the next [`peak_rss_bytes`] is the peak of what ran in between. Returns
/// false where that is not possible; the peak then counts from the start.
pub fn reset_peak_rss() -> bool {
    std::fs::write(CLEAR_REFS, b"5").is_ok()
}

/// The machine's physical memory in bytes.
pub fn total_memory_bytes() -> Option<u64> {
    read_field(Path::new(MEMINFO), "MemTotal")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_are_parsed_in_bytes() {
        let status = "Name:\tbench\nVmPeak:\t    3060 kB\nVmHWM:\t    1640 kB\nVmRSS:\t1500 kB\n";
        assert_eq!(kib_field(status, "VmHWM"), Some(1640 * 1024));
        assert_eq!(kib_field(status, "VmRSS"), Some(1500 * 1024));
        assert_eq!(kib_field(status, "VmData"), None);
        assert_eq!(kib_field(status, "Vm"), None);
        assert_eq!(kib_field("VmHWM: many kB\n", "VmHWM"), None);
        assert_eq!(kib_field("VmHWM: 12\n", "VmHWM"), None);
    }

    #[test]
    fn this_process_has_a_resident_set_and_a_peak_at_least_as_large() {
        let total = total_memory_bytes().unwrap();
        let rss = rss_bytes().unwrap();
        assert!(rss > 0 && rss < total);
        // A reset never lowers the peak below what is resident now.
        reset_peak_rss();
        let peak = peak_rss_bytes().unwrap();
        assert!(peak > 0 && peak <= total);
    }
}
