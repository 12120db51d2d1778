//! The device's own limit, measured in the same run (`--device-baseline`):
//! random 4 KiB positioned reads over the benchmark database's own files,
//! with the page cache bypassed (`O_DIRECT`), at several reads in flight.
//!
//! Owns: [`measure_device`] and [`DeviceBaseline`], and the fraction a read
//! phase's block reads from files are of the device's reads at the same
//! concurrency.
//! Must never: read through the page cache (a figure of memory, not of the
//! device, would pass as the device's), write to the files, or report a
//! depth it could not measure as a number.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::data::SplitMix64;

/// The bytes of one read: a page, as a data block of 4 KiB mostly is.
pub const READ_BYTES: usize = 4096;

/// Reads in flight at which the device is measured by default.
pub const DEFAULT_DEPTHS: [usize; 4] = [1, 4, 16, 32];

/// A page-aligned buffer: `O_DIRECT` reads need aligned memory.
#[repr(C, align(4096))]
struct Page([u8; READ_BYTES]);

/// The device's random-read rate at each depth measured.
#[derive(Debug, Clone, PartialEq)]
pub struct DeviceBaseline {
    /// (reads in flight, reads per second), by depth.
    pub reads_per_sec: Vec<(usize, f64)>,
    /// Files read from, and their pages.
    pub files: usize,
    /// 4 KiB pages the reads were drawn from.
    pub pages: u64,
}

impl DeviceBaseline {
    /// The device's reads per second at the largest measured depth that is
    /// not above `in_flight` (the smallest measured when all are above).
    pub fn at(&self, in_flight: usize) -> Option<(usize, f64)> {
        self.reads_per_sec
            .iter()
            .rev()
            .find(|(depth, _)| *depth <= in_flight)
            .or_else(|| self.reads_per_sec.first())
            .copied()
    }

    /// One line per depth, for the run's header.
    pub fn to_human(&self) -> String {
        let mut out = format!(
            "device: random {} KiB reads, O_DIRECT, over the database's {} files ({} pages)\n",
            READ_BYTES / 1024,
            self.files,
            crate::report::group_digits(self.pages)
        );
        for (depth, rate) in &self.reads_per_sec {
            out.push_str(&format!(
                "  {depth:>3} in flight: {rate:.0} reads/s ({:.1} µs each, one at a time per thread)\n",
                if *rate > 0.0 {
                    *depth as f64 * 1e6 / rate
                } else {
                    0.0
                }
            ));
        }
        out
    }
}

/// Every regular file of at least one page below `dir`, with its size.
fn files_below(dir: &Path) -> Result<Vec<(PathBuf, u64)>, String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let entries =
            std::fs::read_dir(&d).map_err(|e| format!("cannot list {}: {e}", d.display()))?;
        for entry in entries {
            let entry = entry.map_err(|e| format!("cannot list {}: {e}", d.display()))?;
            let meta = entry
                .metadata()
                .map_err(|e| format!("cannot stat {}: {e}", entry.path().display()))?;
            if meta.is_dir() {
                stack.push(entry.path());
            } else if meta.is_file() && meta.len() >= READ_BYTES as u64 {
                out.push((entry.path(), meta.len()));
            }
        }
    }
    out.sort();
    Ok(out)
}

/// Opens `path` for reads that bypass the page cache (`O_DIRECT`: Linux
/// only; elsewhere the baseline says it cannot be measured).
fn open_direct(path: &Path) -> Result<File, String> {
    #[cfg(target_os = "linux")]
    let opened = {
        use rustix::fs::{Mode, OFlags};
        rustix::fs::open(
            path,
            OFlags::RDONLY | OFlags::DIRECT | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map(File::from)
        .map_err(|e| e.to_string())
    };
    #[cfg(not(target_os = "linux"))]
    let opened: Result<File, String> = Err("no O_DIRECT on this system".to_string());
    opened.map_err(|e| {
        format!(
            "cannot open {} with O_DIRECT ({e}): the device cannot be measured past the page cache here",
            path.display()
        )
    })
}

/// Fills `buf` from `offset` of `file` (one positioned read).
fn read_page_at(file: &File, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        std::os::unix::fs::FileExt::read_exact_at(file, buf, offset)
    }
    #[cfg(windows)]
    {
        std::os::windows::fs::FileExt::seek_read(file, buf, offset).map(|_| ())
    }
    #[cfg(not(any(unix, windows)))]
    {
        let _ = (file, buf, offset);
        Err(std::io::ErrorKind::Unsupported.into())
    }
}

/// Measures random page reads over the files below `dir`: for each depth
/// `d` of `depths`, `d` threads each issue one positioned read at a time
/// for `per_depth`, so `d` reads are in flight.
pub fn measure_device(
    dir: &Path,
    depths: &[usize],
    per_depth: Duration,
) -> Result<DeviceBaseline, String> {
    let files = files_below(dir)?;
    if files.is_empty() {
        return Err(format!(
            "no file of {READ_BYTES} bytes or more below {}: nothing to read the device through",
            dir.display()
        ));
    }
    let opened: Vec<(File, u64)> = files
        .iter()
        .map(|(path, len)| Ok((open_direct(path)?, len / READ_BYTES as u64)))
        .collect::<Result<_, String>>()?;
    // Page `p` of the whole set: the file whose run of pages holds it.
    let starts: Vec<u64> = opened
        .iter()
        .scan(0u64, |at, (_, pages)| {
            let start = *at;
            *at += pages;
            Some(start)
        })
        .collect();
    let pages: u64 = opened.iter().map(|(_, p)| p).sum();
    let locate = |page: u64| -> Option<(&File, u64)> {
        let i = starts.partition_point(|&s| s <= page).checked_sub(1)?;
        let (file, _) = opened.get(i)?;
        Some((file, (page - starts.get(i)?) * READ_BYTES as u64))
    };
    let mut reads_per_sec = Vec::with_capacity(depths.len());
    for &depth in depths {
        let depth = depth.max(1);
        let started = Instant::now();
        let deadline = started + per_depth;
        let counts: Vec<Result<u64, String>> = std::thread::scope(|scope| {
            let workers: Vec<_> = (0..depth)
                .map(|t| {
                    let locate = &locate;
                    scope.spawn(move || {
                        let mut rng = SplitMix64::new(0x5eed ^ ((depth as u64) << 32) ^ t as u64);
                        let mut page = Box::new(Page([0; READ_BYTES]));
                        let mut done = 0u64;
                        while Instant::now() < deadline {
                            let Some((file, offset)) = locate(rng.below(pages)) else {
                                return Err("a page outside the files".to_string());
                            };
                            read_page_at(file, &mut page.0, offset)
                                .map_err(|e| format!("O_DIRECT read at {offset} failed: {e}"))?;
                            done += 1;
                        }
                        Ok(done)
                    })
                })
                .collect();
            workers
                .into_iter()
                .map(|w| w.join().unwrap_or_else(|_| Err("a reader panicked".into())))
                .collect()
        });
        let elapsed = started.elapsed().as_secs_f64();
        let total: u64 = counts.into_iter().sum::<Result<u64, String>>()?;
        reads_per_sec.push((depth, total as f64 / elapsed.max(1e-9)));
    }
    Ok(DeviceBaseline {
        reads_per_sec,
        files: opened.len(),
        pages,
    })
}

/// A read phase's data-block reads from files per second as a fraction of
/// the device's reads per second at the phase's concurrency: how much of
/// the physical bound the engine used (1.0 means every device read the
/// device can do went to the phase's block reads; the page cache can make
/// it exceed 1 in memory, which is why it is a beyond-RAM figure).
pub fn fraction_of_device(
    block_reads_from_file: u64,
    elapsed: Duration,
    threads: usize,
    device: &DeviceBaseline,
) -> Option<(usize, f64)> {
    let (depth, device_rate) = device.at(threads)?;
    let secs = elapsed.as_secs_f64();
    (secs > 0.0 && device_rate > 0.0)
        .then(|| (depth, block_reads_from_file as f64 / secs / device_rate))
}

/// One line for a read phase: its data-block reads from files (the
/// `blocks_read_from_file` counter, siftdb only) per second as a fraction
/// of the device's reads per second at the phase's concurrency — its
/// threads, or for multigetrandom its threads times the reads a batch of
/// `batch` keeps in flight (at most siftdb's `multi_get_in_flight`
/// default); `-` when the phase has no such counter.
pub fn device_fraction_line(
    report: &crate::PhaseReport,
    device: &DeviceBaseline,
    batch: usize,
) -> String {
    let from_file = report
        .counters
        .as_ref()
        .and_then(|c| c.get(crate::BLOCKS_READ_FROM_FILE))
        .map(|c| c.delta.max(0).unsigned_abs());
    let in_flight = if report.phase == crate::Phase::MultiGetRandom {
        report.threads * batch.min(siftdb::internals::options::DEFAULT_MULTI_GET_IN_FLIGHT)
    } else {
        report.threads
    };
    match from_file.and_then(|reads| {
        fraction_of_device(reads, report.elapsed, in_flight, device).map(|f| (reads, f))
    }) {
        Some((reads, (depth, fraction))) => format!(
            "  {:<14} {} threads: {} block reads from files, {:.3} of the device at {depth} in flight",
            report.phase.name(),
            report.threads,
            crate::report::group_digits(reads),
            fraction
        ),
        None => format!("  {:<14} -", report.phase.name()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn baseline() -> DeviceBaseline {
        DeviceBaseline {
            reads_per_sec: vec![(1, 10_000.0), (4, 30_000.0), (16, 50_000.0)],
            files: 1,
            pages: 100,
        }
    }

    #[test]
    fn a_phase_is_measured_against_the_depth_its_threads_keep_in_flight() {
        let b = baseline();
        assert_eq!(b.at(1), Some((1, 10_000.0)));
        assert_eq!(b.at(3), Some((1, 10_000.0)));
        assert_eq!(b.at(8), Some((4, 30_000.0)));
        assert_eq!(b.at(64), Some((16, 50_000.0)));
        let (depth, f) = fraction_of_device(15_000, Duration::from_secs(1), 4, &b).unwrap();
        assert_eq!(depth, 4);
        assert!((f - 0.5).abs() < 1e-9);
        assert_eq!(fraction_of_device(1, Duration::ZERO, 1, &b), None);
    }

    #[test]
    fn the_device_is_read_past_the_page_cache_or_the_run_says_why() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.sst"), vec![7u8; 64 * 1024]).unwrap();
        std::fs::write(dir.path().join("small"), b"tiny").unwrap();
        match measure_device(dir.path(), &[1, 2], Duration::from_millis(50)) {
            Ok(b) => {
                assert_eq!(b.files, 1);
                assert_eq!(b.pages, 16);
                assert_eq!(b.reads_per_sec.len(), 2);
                assert!(b.reads_per_sec.iter().all(|(_, r)| *r > 0.0));
                assert!(b.to_human().contains("in flight"));
            }
            // tmpfs and some overlay file systems refuse O_DIRECT: the run
            // must say so, not measure the page cache instead.
            Err(e) => assert!(e.contains("O_DIRECT"), "{e}"),
        }
        let empty = tempfile::tempdir().unwrap();
        assert!(measure_device(empty.path(), &[1], Duration::from_millis(1)).is_err());
    }
}
