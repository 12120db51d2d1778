//! Waiting until an engine's background work has drained.
//!
//! Owns: [`wait_until`], the polling loop every peer's `flush_and_wait`
//! uses after it asked for a flush, and its limits.
//! Must never: wait forever — an engine that never settles is an error the
//! phase reports, not a hung benchmark.

use std::time::{Duration, Instant};

/// How often background state is polled.
pub const POLL_EVERY: Duration = Duration::from_millis(2);

/// Longest wait before giving up (a 1M-key load settles in seconds).
pub const GIVE_UP_AFTER: Duration = Duration::from_secs(3600);

/// Polls `idle` every [`POLL_EVERY`] until it has answered `Ok(true)` for
/// `quiet_polls` polls in a row; an engine error ends the wait at once.
pub fn wait_until(
    what: &str,
    quiet_polls: u32,
    mut idle: impl FnMut() -> Result<bool, String>,
) -> Result<(), String> {
    let start = Instant::now();
    let mut quiet = 0;
    loop {
        if idle()? {
            quiet += 1;
            if quiet >= quiet_polls {
                return Ok(());
            }
        } else {
            quiet = 0;
        }
        if start.elapsed() > GIVE_UP_AFTER {
            return Err(format!(
                "{what}: background work still pending after {} s",
                GIVE_UP_AFTER.as_secs()
            ));
        }
        std::thread::sleep(POLL_EVERY);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn needs_consecutive_quiet_polls() {
        let answers = [true, false, true, true, true];
        let mut calls = 0;
        wait_until("test", 3, || {
            calls += 1;
            Ok(answers[calls - 1])
        })
        .unwrap();
        assert_eq!(calls, 5);
    }

    #[test]
    fn engine_errors_end_the_wait() {
        let err = wait_until("test", 1, || Err("boom".to_string())).unwrap_err();
        assert_eq!(err, "boom");
    }
}
