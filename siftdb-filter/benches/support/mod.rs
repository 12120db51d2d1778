//! What the filter benchmarks share: the thread-CPU-time measurement and
//! the workload's key format, formatted into stack buffers.

use std::hint::black_box;
use std::time::Duration;

use criterion::measurement::{Measurement, ValueFormatter, WallTime};
use criterion::BenchmarkGroup;

/// Queries per criterion iteration.
pub const BATCH: usize = 1024;

/// A benchmark key: `format!("k{:015}", j)`.
pub type Key = [u8; 16];

/// CPU time this thread has used so far.
#[cfg(unix)]
pub fn cpu_now() -> Duration {
    let ts = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// Elsewhere, the wall clock.
#[cfg(not(unix))]
pub fn cpu_now() -> Duration {
    static START: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    START.get_or_init(std::time::Instant::now).elapsed()
}

/// Criterion measurement by [`cpu_now`]; values are durations, shown as such.
pub struct ThreadCpuTime;

impl Measurement for ThreadCpuTime {
    type Intermediate = Duration;
    type Value = Duration;

    fn start(&self) -> Duration {
        cpu_now()
    }
    fn end(&self, started: Duration) -> Duration {
        cpu_now().saturating_sub(started)
    }
    fn add(&self, a: &Duration, b: &Duration) -> Duration {
        *a + *b
    }
    fn zero(&self) -> Duration {
        Duration::ZERO
    }
    fn to_f64(&self, value: &Duration) -> f64 {
        value.as_nanos() as f64
    }
    fn formatter(&self) -> &dyn ValueFormatter {
        static WALL: WallTime = WallTime;
        WALL.formatter()
    }
}

/// `format!("k{:015}", j)` into a stack buffer.
pub fn key(j: u64) -> Key {
    let mut out = [b'0'; 16];
    out[0] = b'k';
    let mut rest = j;
    for digit in out[1..].iter_mut().rev() {
        *digit = b'0' + (rest % 10) as u8;
        rest /= 10;
    }
    out
}

pub fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// One timed query group over the pre-drawn sequence `keys`, `BATCH` per iteration.
pub fn bench_queries<M: criterion::measurement::Measurement, T>(
    group: &mut BenchmarkGroup<'_, M>,
    name: &str,
    items: &[T],
    query: impl Fn(&T) -> bool,
) {
    group.bench_function(name, |b| {
        let mut start = 0;
        b.iter(|| {
            let batch = &items[start..start + BATCH];
            start = (start + BATCH) % items.len();
            let mut hits = 0u32;
            for item in batch {
                hits += query(black_box(item)) as u32;
            }
            hits
        })
    });
}
