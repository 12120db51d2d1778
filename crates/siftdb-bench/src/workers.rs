//! The threads a phase's operations run on, and how far they got.
//!
//! Owns: [`Progress`] (where a running phase reports its operations) and
//! the worker plumbing every runner shares — one worker's loop over its
//! operation numbers ([`drive`]), the split of a phase across scoped
//! threads ([`split_across_threads`], [`across_threads`]) and what each
//! worker brings back ([`WorkerOutcome`]: latency samples and errors).
//! Must never: know what an operation does or checks — that is the
//! runners' (run.rs, ycsb_run.rs) — or allocate per operation.

use std::ops::Range;

use super::latency::Sampler;
use super::report::ErrorLog;

/// Operations between two progress reports from one worker.
const PROGRESS_EVERY: u64 = 4096;

/// Where a running phase reports how far it got (a progress bar, or nothing).
pub trait Progress: Sync {
    /// `ops` more operations completed.
    fn advance(&self, ops: u64);

    /// The phase moved to a stage that is not counted in operations, such
    /// as fillrandom's final flush.
    fn stage(&self, _label: &str) {}
}

/// Progress that goes nowhere.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoProgress;

impl Progress for NoProgress {
    fn advance(&self, _ops: u64) {}
}

/// What one worker brings back.
#[derive(Default)]
pub(crate) struct WorkerOutcome {
    pub(crate) sampler: Sampler,
    pub(crate) errors: ErrorLog,
}

impl WorkerOutcome {
    fn merge(&mut self, other: WorkerOutcome) {
        self.sampler.merge(other.sampler);
        self.errors.merge(other.errors);
    }
}

/// Runs `op` for every operation number in `range`, sampling latency
/// through the `Sampler` it is given and recording the errors it returns.
pub(crate) fn drive(
    range: Range<u64>,
    progress: &dyn Progress,
    mut op: impl FnMut(u64, &mut Sampler) -> Result<(), String>,
) -> WorkerOutcome {
    let mut outcome = WorkerOutcome {
        sampler: Sampler::for_ops(range.end.saturating_sub(range.start)),
        errors: ErrorLog::default(),
    };
    let mut unreported = 0;
    for g in range {
        if let Err(message) = op(g, &mut outcome.sampler) {
            outcome.errors.record(message);
        }
        unreported += 1;
        if unreported == PROGRESS_EVERY {
            progress.advance(unreported);
            unreported = 0;
        }
    }
    progress.advance(unreported);
    outcome
}

/// Splits `0..ops` into `threads` contiguous ranges and runs `worker` on
/// each in its own scoped thread (in place when `threads <= 1`).
pub(crate) fn split_across_threads(
    ops: u64,
    threads: usize,
    worker: impl Fn(Range<u64>) -> WorkerOutcome + Sync,
) -> WorkerOutcome {
    let t = threads.max(1) as u64;
    let bounds = |i: u64| ops / t * i + (ops % t).min(i);
    across_threads((0..t).map(|i| bounds(i)..bounds(i + 1)).collect(), worker)
}

/// Runs `worker` on each of `parts` in its own scoped thread (in place
/// when there is only one) and adds up what they bring back.
pub(crate) fn across_threads<P: Send>(
    mut parts: Vec<P>,
    worker: impl Fn(P) -> WorkerOutcome + Sync,
) -> WorkerOutcome {
    if parts.len() <= 1 {
        return parts.pop().map(&worker).unwrap_or_default();
    }
    std::thread::scope(|scope| {
        let worker = &worker;
        let handles: Vec<_> = parts
            .into_iter()
            .map(|part| scope.spawn(move || worker(part)))
            .collect();
        let mut total = WorkerOutcome::default();
        for handle in handles {
            match handle.join() {
                Ok(outcome) => total.merge(outcome),
                Err(_) => total
                    .errors
                    .record("a worker thread panicked; its operations are lost".to_string()),
            }
        }
        total
    })
}
