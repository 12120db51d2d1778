//! The bytes the benchmark process has handed to the kernel to write, as
//! the kernel counts them (`wchar` in `/proc/self/io`): logs, tables,
//! manifests — whatever an engine writes, through whichever API, so the
//! figure means the same for every engine run in the process.
//!
//! Owns: reading that counter.
//! Must never: be read inside a timed section, or fail a run: where `/proc`
//! is missing or says something else, the figure is `None`.

const IO: &str = "/proc/self/io";

/// The `wchar:` line's value from the text of `/proc/self/io`.
fn wchar(text: &str) -> Option<u64> {
    text.lines()
        .find_map(|line| line.strip_prefix("wchar:"))
        .and_then(|rest| rest.trim().parse().ok())
}

/// Bytes this process has passed to write calls since it started.
pub fn bytes_written() -> Option<u64> {
    wchar(&std::fs::read_to_string(IO).ok()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_counter() {
        let text = "rchar: 10\nwchar: 12345\nsyscr: 3\n";
        assert_eq!(wchar(text), Some(12345));
        assert_eq!(wchar("rchar: 1\n"), None);
        assert_eq!(wchar("wchar: x\n"), None);
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn grows_with_a_write() {
        let dir = tempfile::tempdir().unwrap();
        let before = bytes_written().unwrap();
        std::fs::write(dir.path().join("f"), [0u8; 10_000]).unwrap();
        assert!(bytes_written().unwrap() >= before + 10_000);
    }
}
