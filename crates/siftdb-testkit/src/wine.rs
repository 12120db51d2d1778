//! Tests that Wine cannot host: CI runs the Windows build of the tests
//! under Debian's Wine, which lacks a few things real Windows has.
//!
//! Owns: [`under_wine`] and [`skip_under_wine`], the one way a test steps
//! aside there, printing a line `.ci/run` counts and shows.
//! Must never: skip anything on Linux, macOS or real Windows, or skip for
//! a siftdb bug (only for a named gap of Wine's).

/// True when this process is a Windows build running under Wine (Wine puts
/// `WINELOADER` into every process's environment; Windows never does).
pub fn under_wine() -> bool {
    cfg!(windows) && std::env::var_os("WINELOADER").is_some()
}

/// Under Wine, prints `skipped under Wine: TEST: REASON` and returns true
/// (the test then returns at once); elsewhere returns false.
pub fn skip_under_wine(test: &str, reason: &str) -> bool {
    if !under_wine() {
        return false;
    }
    eprintln!("skipped under Wine: {test}: {reason}");
    true
}
