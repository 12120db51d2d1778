//! Crash test by process kill: the built `siftdb` binary writes batches as
//! `siftdb stress-child`; it is killed with SIGKILL at random moments, and
//! each round the database is reopened and every key checked against the
//! acknowledged batches (`siftdb::stress`). 20 rounds without and 20 with
//! `sync_writes`; `siftdb stress --rounds 1000` is the long run.

use std::path::PathBuf;

use siftdb::stress::{run, StressConfig, StressReport};

const ROUNDS: u64 = 20;

fn stress(sync: bool, seed: u64) -> StressReport {
    let dir = tempfile::tempdir().unwrap();
    let config = StressConfig {
        dir: dir.path().join("db"),
        rounds: ROUNDS,
        sync,
        seed,
        child: PathBuf::from(env!("CARGO_BIN_EXE_siftdb")),
        kill_after_ms: 10..=250,
        chain_percent: 25,
    };
    let report = match run(&config, |_| {}) {
        Ok(report) => report,
        Err(failure) => {
            let kept = dir.keep();
            panic!(
                "seed {seed}, sync {sync}: {failure}\n(database kept in {})",
                kept.display()
            );
        }
    };
    println!("sync_writes({sync}), seed {seed}: {report:?}");
    assert_eq!(report.rounds, ROUNDS);
    assert!(report.checked_rounds > ROUNDS / 2);
    assert!(
        report.acknowledged > 0,
        "no child ever acknowledged a batch"
    );
    assert!(report.final_entries > 0);
    report
}

#[test]
fn killed_writers_lose_no_acknowledged_batch_without_sync() {
    stress(false, 0x5eed_0001);
}

#[test]
fn killed_writers_lose_no_acknowledged_batch_with_sync() {
    stress(true, 0x5eed_0002);
}

/// A file system that "crashes" at its `n`-th mutating call: that call and
/// every later one fail, reads still work. What is on disk then is what a
/// process kill at that moment leaves (the OS keeps every completed write).
mod crash_at {
    use std::path::Path;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    use bytes::Bytes;
    use siftdb::fs::{DirLock, FileSystem, OsFileSystem, WritableFile};
    use siftdb::{Error, Result};

    pub struct CrashAt {
        left: Arc<AtomicUsize>,
    }

    impl CrashAt {
        pub fn new(n: usize) -> Arc<CrashAt> {
            Arc::new(CrashAt {
                left: Arc::new(AtomicUsize::new(n)),
            })
        }

        /// True when no call was refused.
        pub fn survived(&self) -> bool {
            self.left.load(Ordering::SeqCst) > 0
        }
    }

    fn step(left: &AtomicUsize, path: &Path) -> Result<()> {
        let ok = left
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok_and(|before| before > 1);
        if ok {
            Ok(())
        } else {
            left.store(0, Ordering::SeqCst);
            Err(Error::io(path, std::io::Error::other("simulated crash")))
        }
    }

    struct File {
        inner: Box<dyn WritableFile>,
        left: Arc<AtomicUsize>,
        path: std::path::PathBuf,
    }

    impl WritableFile for File {
        fn append(&mut self, data: &[u8]) -> Result<()> {
            step(&self.left, &self.path)?;
            self.inner.append(data)
        }
        fn sync(&mut self) -> Result<()> {
            step(&self.left, &self.path)?;
            self.inner.sync()
        }
    }

    impl CrashAt {
        fn wrap(&self, path: &Path, inner: Box<dyn WritableFile>) -> Box<dyn WritableFile> {
            Box::new(File {
                inner,
                left: Arc::clone(&self.left),
                path: path.to_path_buf(),
            })
        }
    }

    impl FileSystem for CrashAt {
        fn create(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
            step(&self.left, path)?;
            Ok(self.wrap(path, OsFileSystem.create(path)?))
        }
        fn open_append(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
            step(&self.left, path)?;
            Ok(self.wrap(path, OsFileSystem.open_append(path)?))
        }
        fn read_all(&self, path: &Path) -> Result<Bytes> {
            OsFileSystem.read_all(path)
        }
        fn rename(&self, from: &Path, to: &Path) -> Result<()> {
            step(&self.left, from)?;
            OsFileSystem.rename(from, to)
        }
        fn remove(&self, path: &Path) -> Result<()> {
            step(&self.left, path)?;
            OsFileSystem.remove(path)
        }
        fn sync_dir(&self, dir: &Path) -> Result<()> {
            step(&self.left, dir)?;
            OsFileSystem.sync_dir(dir)
        }
        fn create_dir_all(&self, dir: &Path) -> Result<()> {
            OsFileSystem.create_dir_all(dir)
        }
        fn list(&self, dir: &Path) -> Result<Vec<String>> {
            OsFileSystem.list(dir)
        }
        fn exists(&self, path: &Path) -> bool {
            OsFileSystem.exists(path)
        }
        fn is_dir(&self, path: &Path) -> bool {
            OsFileSystem.is_dir(path)
        }
        fn lock(&self, path: &Path) -> Result<Box<dyn DirLock>> {
            OsFileSystem.lock(path)
        }
    }
}

/// Recovery of a log with a torn tail (what a kill mid-append leaves) is
/// itself killed at every step in turn; each time, a plain reopen must work
/// and hold every complete record. Recovery used to create its new log
/// before the manifest moved past the torn one: a crash in between left two
/// logs, the older one torn, and every later open refused the database
/// ("torn record in a log that is not the newest").
#[test]
fn recovery_of_a_torn_log_survives_a_crash_at_every_step() {
    use siftdb::filename::{parse_file_name, wal_file_name, FileKind};
    use siftdb::wal::encode_record_into;
    use siftdb::{Db, Options};

    let template = tempfile::tempdir().unwrap();
    {
        let db = Db::open(template.path()).unwrap();
        db.put("a", "1").unwrap();
        db.put("b", "2").unwrap();
    }
    let logs: Vec<u64> = std::fs::read_dir(template.path())
        .unwrap()
        .filter_map(|e| parse_file_name(&e.unwrap().file_name().to_string_lossy()))
        .filter(|(kind, _)| *kind == FileKind::Wal)
        .map(|(_, n)| n)
        .collect();
    let [log] = logs[..] else {
        panic!("expected one log, found {logs:?}")
    };
    // A third record of which the kill let only 9 bytes reach the file.
    let mut record = Vec::new();
    encode_record_into(&mut record, b"a record the kill cut short").unwrap();
    let log_path = template.path().join(wal_file_name(log));
    let mut bytes = std::fs::read(&log_path).unwrap();
    bytes.extend_from_slice(&record[..9]);
    std::fs::write(&log_path, &bytes).unwrap();

    let mut crash_points = 0;
    for n in 1.. {
        let dir = tempfile::tempdir().unwrap();
        for entry in std::fs::read_dir(template.path()).unwrap() {
            let entry = entry.unwrap();
            std::fs::copy(entry.path(), dir.path().join(entry.file_name())).unwrap();
        }
        let fs = crash_at::CrashAt::new(n);
        let outcome = Db::open_with(dir.path(), Options::default().file_system(fs.clone()));
        let survived = fs.survived();
        match outcome {
            Ok(db) if survived => {
                assert!(db.recovery_report().torn_tail.is_some());
                break;
            }
            Ok(db) => drop(db), // crashed in background work after open
            Err(_) => {}
        }
        crash_points += 1;
        let db = Db::open(dir.path()).unwrap_or_else(|e| {
            panic!("crash at mutating call {n} of recovery: reopen fails: {e}")
        });
        assert_eq!(
            db.get("a").unwrap().as_deref(),
            Some(&b"1"[..]),
            "crash at call {n}"
        );
        assert_eq!(
            db.get("b").unwrap().as_deref(),
            Some(&b"2"[..]),
            "crash at call {n}"
        );
    }
    assert!(crash_points >= 5, "only {crash_points} crash points");
}
