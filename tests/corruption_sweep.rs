//! Corruption sweep: a small closed database (a compacted table, two
//! level-0 tables holding overwrites and tombstones of older keys, a log
//! holding four unflushed batches, a manifest) gets one byte changed at a
//! time — hundreds of positions over every file, every byte of the footers,
//! block trailers, log headers and manifest included — and is reopened and
//! read whole, by `get` of every key and by a full scan.
//!
//! Each answer must be the right data or an error: never a wrong value, a
//! present key reported absent, a deleted key come back, a panic or a hang.
//! The only loss allowed without an error is the log's last record, and only
//! when the reopen reports it as a torn tail (a checksum failing in the last
//! record is what a crash mid-append looks like); then the database must be
//! exactly the state before that batch. A damaged table never refuses the
//! open, nor does a damaged manifest or its copy (the open reads the other
//! one); only the log may, naming `siftdb repair`.
//!
//! Besides the structural positions, a sampled sweep (half its cases at a
//! byte drawn over every byte of the files, half within a file's last 128
//! bytes) measures the share of single-byte changes that refuse the open;
//! it must stay at most 10%, and the test prints it per file kind.
//!
//! Then every damaged copy is repaired (`siftdb::internals::repair`) and read again:
//! it must open with no damaged table, verify clean, and answer every key
//! right — except a key within a range the report says was lost (then it
//! may be absent, never an older value), or written by a log record the
//! report says was lost (then it may read as if that batch never
//! happened). A second repair must change nothing.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::cast_possible_truncation,
    reason = "test code outside #[test] functions: a failed assumption is a failed test"
)]

use siftdb_testkit::SplitMix64;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

use siftdb::internals::filename::{parse_file_name, FileKind, MANIFEST_FILE};
use siftdb::internals::inspect::verify_dir;
use siftdb::internals::table::format::TRAILER_LEN;
use siftdb::internals::table::Table;
use siftdb::{repair, Db, Options, RepairOptions, WriteBatch};

/// Positions picked at random in each file, on top of the structural ones.
const RANDOM_POSITIONS_PER_FILE: usize = 150;
/// Cases in the sampled sweep: half at a byte drawn over every byte of
/// the database's files, half within the last [`TAIL_BYTES`] of a file
/// drawn among them (where footers, trailers and close records are).
const SAMPLED_CASES: usize = 400;
const TAIL_BYTES: u64 = 128;
/// The most of the sampled cases that may refuse the open: a damaged
/// manifest opens from its copy, so only damage that loses data (a log
/// record) refuses.
const MAX_REFUSED_SHARE: f64 = 0.10;
/// A trial that takes longer than this has hung.
const TRIAL_TIMEOUT: Duration = Duration::from_secs(60);

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

fn options() -> Options {
    Options::default()
        .block_size(256)
        .level0_compaction_trigger(8)
        .level0_quiet_trigger(8)
        .level0_stop_writes(16)
}

fn key(i: u32) -> Vec<u8> {
    format!("k{i:03}").into_bytes()
}

fn value(tag: &str, i: u32) -> Vec<u8> {
    format!("{tag}-{i:03}-{}", "x".repeat((i % 17) as usize)).into_bytes()
}

/// Writes `batch` to the database and the model.
struct Writer<'a> {
    db: &'a Db,
    model: &'a mut Model,
}

/// Applies `ops` to `model`.
fn apply_ops(model: &mut Model, ops: &[Op]) {
    for (k, v) in ops {
        match v {
            Some(v) => model.insert(k.clone(), v.clone()),
            None => model.remove(k),
        };
    }
}

impl Writer<'_> {
    fn apply(&mut self, ops: &[(Vec<u8>, Option<Vec<u8>>)]) {
        let mut batch = WriteBatch::new();
        for (k, v) in ops {
            match v {
                Some(v) => {
                    batch.put(k, v);
                    self.model.insert(k.clone(), v.clone());
                }
                None => {
                    batch.delete(k);
                    self.model.remove(k);
                }
            }
        }
        self.db.write(batch).unwrap();
    }
}

/// One write: a key and its new value (`None`: deleted).
type Op = (Vec<u8>, Option<Vec<u8>>);

/// The database every trial copies, and what it must read as: `full` with
/// every logged batch, `without_last` if the log's last record is dropped.
struct Template {
    /// The state before the batches left in the log, and those batches
    /// with their records' offsets.
    before_log: Model,
    logged: Vec<(u64, Vec<Op>)>,
    _root: tempfile::TempDir,
    dir: PathBuf,
    full: Model,
    without_last: Model,
    /// Every key ever written, and some never written.
    universe: Vec<Vec<u8>>,
    /// Offset of the last record in the log.
    last_record: u64,
    log_name: String,
}

fn scratch_root() -> tempfile::TempDir {
    // Each trial's reopen syncs files; on tmpfs that costs nothing.
    let shm = Path::new("/dev/shm");
    if shm.is_dir() {
        if let Ok(dir) = tempfile::tempdir_in(shm) {
            return dir;
        }
    }
    tempfile::tempdir().unwrap()
}

fn build_template() -> Template {
    let root = scratch_root();
    let dir = root.path().join("template");
    let mut model = Model::new();
    let db = Db::open_with(&dir, options()).unwrap();
    let mut w = Writer {
        db: &db,
        model: &mut model,
    };
    // Oldest data, compacted into one table at level 1.
    for chunk in (0..200u32).collect::<Vec<_>>().chunks(10) {
        let ops: Vec<_> = chunk
            .iter()
            .map(|&i| (key(i), Some(value("v1", i))))
            .collect();
        w.apply(&ops);
    }
    db.compact().unwrap();
    // A level-0 table overwriting and deleting keys of the level-1 table.
    let mut w = Writer {
        db: &db,
        model: &mut model,
    };
    for i in 0..200u32 {
        if i % 3 == 0 {
            w.apply(&[(key(i), Some(value("v2", i)))]);
        } else if i % 5 == 0 {
            w.apply(&[(key(i), None)]);
        }
    }
    db.flush().unwrap();
    // Another one: new keys, more overwrites and deletes of older keys.
    let mut w = Writer {
        db: &db,
        model: &mut model,
    };
    for i in 200..260u32 {
        w.apply(&[(key(i), Some(value("v3", i)))]);
    }
    w.apply(&[(key(1), None), (key(2), None), (key(15), None)]);
    for i in (0..200u32).filter(|i| i % 7 == 0) {
        w.apply(&[(key(i), Some(value("v3", i)))]);
    }
    db.flush().unwrap();
    // Four batches left in the log: they are in no table.
    let before_log = model.clone();
    let batches: Vec<Vec<Op>> = vec![
        (260..265u32)
            .map(|i| (key(i), Some(value("v4", i))))
            .collect(),
        vec![(key(10), Some(value("v4", 10))), (key(11), None)],
        vec![(key(200), None), (key(300), Some(value("v4", 300)))],
        vec![
            (key(261), Some(value("v5", 261))),
            (key(4), None),
            (key(12), Some(value("v5", 12))),
            (key(400), Some(value("v5", 400))),
            (key(201), None),
        ],
    ];
    let mut w = Writer {
        db: &db,
        model: &mut model,
    };
    let mut without_last = Model::new();
    for (i, batch) in batches.iter().enumerate() {
        if i + 1 == batches.len() {
            without_last = w.model.clone();
        }
        w.apply(batch);
    }
    let stats = db.stats();
    assert!(stats.level_tables.first().copied() == Some(2), "{stats:?}");
    assert_eq!(stats.table_count, 3, "{stats:?}");
    drop(db);

    let log_name = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .find(|n| matches!(parse_file_name(n), Some((FileKind::Wal, _))))
        .expect("a log");
    let log = std::fs::read(dir.join(&log_name)).unwrap();
    let replayed = siftdb::internals::wal::replay(&log, &log_name).unwrap();
    assert_eq!(replayed.records.len(), 4);
    let last_record = replayed.records.last().unwrap().offset;
    let logged = replayed
        .records
        .iter()
        .map(|r| r.offset)
        .zip(batches)
        .collect();

    let mut universe: Vec<Vec<u8>> = (0..300u32).chain([300, 400, 500, 999]).map(key).collect();
    universe.push(b"a".to_vec());
    universe.push(b"zzz".to_vec());
    Template {
        _root: root,
        dir,
        before_log,
        logged,
        full: model,
        without_last,
        universe,
        last_record,
        log_name,
    }
}

/// Where to change a byte, and why that position was chosen.
#[derive(Debug, Clone)]
struct Position {
    file: String,
    offset: usize,
    /// One of the sampled sweep's cases (not a structural position).
    sampled: bool,
}

fn positions(template: &Template) -> Vec<Position> {
    let mut rng = SplitMix64::new(0xc0ff_ee00);
    let mut out = Vec::new();
    let mut names: Vec<String> = std::fs::read_dir(&template.dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    for name in names {
        let path = template.dir.join(&name);
        let len = std::fs::metadata(&path).unwrap().len() as usize;
        if len == 0 {
            continue; // the lock file
        }
        let mut chosen: Vec<usize> = Vec::new();
        let mut range = |from: usize, count: usize| {
            chosen.extend((from..from.saturating_add(count)).filter(|&o| o < len));
        };
        match parse_file_name(&name) {
            Some((FileKind::Table, _)) => {
                let table = Table::open_path(&path).unwrap();
                range(
                    len.saturating_sub(siftdb::internals::table::format::FOOTER_LEN),
                    64,
                );
                let footer = *table.footer();
                let mut handles = table.data_block_handles().to_vec();
                handles.push(footer.index);
                handles.push(footer.properties);
                handles.extend(footer.filter);
                for h in handles {
                    // The block's first bytes and its trailer.
                    range(h.offset as usize, 2);
                    range((h.offset + h.len) as usize, TRAILER_LEN);
                }
            }
            Some((FileKind::Wal, _)) => {
                let bytes = std::fs::read(&path).unwrap();
                let replayed = siftdb::internals::wal::replay(&bytes, &name).unwrap();
                range(0, siftdb::internals::wal::FILE_HEADER_LEN);
                for record in &replayed.records {
                    let header_len =
                        siftdb::internals::wal::record_header_len(record.payload.len());
                    range(record.offset as usize, header_len + 2);
                }
                // Every byte of the last record.
                range(template.last_record as usize, len);
            }
            // The manifest and its second copy.
            None if name.starts_with(MANIFEST_FILE) => range(0, len),
            None => panic!("unexpected file {name} in the template"),
        }
        for _ in 0..RANDOM_POSITIONS_PER_FILE {
            chosen.push(rng.below(len as u64) as usize);
        }
        chosen.sort_unstable();
        chosen.dedup();
        out.extend(chosen.into_iter().map(|offset| Position {
            file: name.clone(),
            offset,
            sampled: false,
        }));
    }
    out
}

/// [`SAMPLED_CASES`] positions drawn over the template's files.
fn sampled_positions(template: &Template) -> Vec<Position> {
    let mut rng = SplitMix64::new(0x5a3f_1e00);
    let mut files: Vec<(String, u64)> = std::fs::read_dir(&template.dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (
                e.file_name().to_string_lossy().into_owned(),
                e.metadata().unwrap().len(),
            )
        })
        .filter(|(_, len)| *len > 0)
        .collect();
    files.sort();
    let total: u64 = files.iter().map(|(_, len)| len).sum();
    (0..SAMPLED_CASES)
        .map(|i| {
            if i % 2 == 0 {
                let mut at = rng.below(total);
                for (file, len) in &files {
                    if at < *len {
                        return Position {
                            file: file.clone(),
                            offset: at as usize,
                            sampled: true,
                        };
                    }
                    at -= len;
                }
                unreachable!("{at} past {total}");
            }
            let (file, len) = &files[rng.below(files.len() as u64) as usize];
            Position {
                file: file.clone(),
                offset: (len - 1 - rng.below(TAIL_BYTES.min(*len))) as usize,
                sampled: true,
            }
        })
        .collect()
}

/// What kind of file `name` is, for the tallies.
fn kind_of(name: &str) -> &'static str {
    match parse_file_name(name) {
        Some((FileKind::Table, _)) => "table",
        Some((FileKind::Wal, _)) => "log",
        None if name == MANIFEST_FILE => "manifest",
        None => "manifest copy",
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    RefusedAtOpen,
    /// Opened; some reads reported errors, every other answer was right.
    /// `damaged_at_open`: a table could not be opened (the whole open
    /// failed for that before damaged tables were tolerated).
    ErrorsReported {
        damaged_at_open: bool,
    },
    /// Opened; every answer right (`torn` when the log's last record was dropped).
    AllCorrect {
        torn: bool,
    },
}

/// Copies the template, changes one byte, reopens and reads everything.
/// `Err` is a broken promise.
fn trial(template: &Template, root: &Path, at: &Position, mask: u8) -> Result<Outcome, String> {
    let dir = root.join("trial");
    if dir.exists() {
        std::fs::remove_dir_all(&dir).unwrap();
    }
    std::fs::create_dir_all(&dir).unwrap();
    for entry in std::fs::read_dir(&template.dir).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), dir.join(entry.file_name())).unwrap();
    }
    let target = dir.join(&at.file);
    let mut bytes = std::fs::read(&target).unwrap();
    if let Some(b) = bytes.get_mut(at.offset) {
        *b ^= mask;
    }
    std::fs::write(&target, &bytes).unwrap();

    let db = match Db::open_with(&dir, options()) {
        Ok(db) => db,
        Err(e) if e.is_corruption() => {
            if !e.to_string().contains("siftdb repair") {
                return Err(format!("a refused open does not name `siftdb repair`: {e}"));
            }
            return Ok(Outcome::RefusedAtOpen);
        }
        Err(e) => return Err(format!("open failed with a non-corruption error: {e}")),
    };
    let torn = match &db.recovery_report().torn_tail {
        None => false,
        Some((file, offset, reason)) => {
            if *file != template.log_name || *offset != template.last_record {
                return Err(format!(
                    "a torn tail at {file} offset {offset} ({reason}) is not the log's last record \
                     (at {})",
                    template.last_record
                ));
            }
            true
        }
    };
    let model = if torn {
        &template.without_last
    } else {
        &template.full
    };

    let mut errors = 0;
    for k in &template.universe {
        match db.get(k) {
            Ok(got) => {
                if got.as_deref() != model.get(k).map(Vec::as_slice) {
                    return Err(format!(
                        "get {}: expected {:?}, got {:?}",
                        String::from_utf8_lossy(k),
                        model
                            .get(k)
                            .map(|v| String::from_utf8_lossy(v).into_owned()),
                        got.map(|v| String::from_utf8_lossy(&v).into_owned())
                    ));
                }
            }
            Err(_) => errors += 1,
        }
    }
    let mut expected = model.iter();
    let mut scan_error = false;
    for item in db.iter() {
        match item {
            Ok((k, v)) => match expected.next() {
                Some((ek, ev)) if ek[..] == k[..] && ev[..] == v[..] => {}
                want => {
                    return Err(format!(
                        "scan yielded {} = {}, expected {:?}",
                        String::from_utf8_lossy(&k),
                        String::from_utf8_lossy(&v),
                        want.map(|(k, _)| String::from_utf8_lossy(k).into_owned())
                    ))
                }
            },
            Err(_) => {
                scan_error = true;
                break;
            }
        }
    }
    if !scan_error {
        if let Some((missing, _)) = expected.next() {
            return Err(format!(
                "scan ended without an error before {}",
                String::from_utf8_lossy(missing)
            ));
        }
    }
    let damaged_at_open = !db.recovery_report().damaged_tables.is_empty();
    drop(db);
    Ok(if errors > 0 || scan_error {
        Outcome::ErrorsReported { damaged_at_open }
    } else if damaged_at_open {
        return Err("a table could not be opened, yet every read was served".into());
    } else {
        Outcome::AllCorrect { torn }
    })
}

/// What a repair of a damaged copy came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Repaired {
    /// Every key right.
    AllRight,
    /// This many keys absent or as before a lost batch, all within what
    /// the report says was lost.
    Lost(usize),
}

/// Repairs the copy `trial` left in `root/trial` and reads it whole.
/// `Err` is a broken promise.
fn repair_trial(template: &Template, root: &Path) -> Result<Repaired, String> {
    let dir = root.join("trial");
    let report = repair(&dir, RepairOptions::new().options(options()))
        .map_err(|e| format!("repair failed: {e}"))?;
    let verified = verify_dir(&dir).map_err(|e| format!("verify after repair: {e}"))?;
    if let Some(problem) = verified.errors().next() {
        return Err(format!("verify after repair: {problem}"));
    }
    // The states the database may be in: every logged batch applied but
    // any of those the report says were lost.
    let affected: Vec<usize> = template
        .logged
        .iter()
        .enumerate()
        .filter(|(_, (offset, _))| {
            report
                .logs
                .iter()
                .flat_map(|l| l.lost.iter())
                .any(|lost| (lost.offset..lost.offset + lost.len).contains(offset))
                || report
                    .logs
                    .iter()
                    .any(|l| l.torn_tail.as_ref().is_some_and(|(torn, _)| torn <= offset))
        })
        .map(|(i, _)| i)
        .collect();
    let mut states = Vec::new();
    for subset in 0..1u32 << affected.len() {
        let mut state = template.before_log.clone();
        for (i, (_, ops)) in template.logged.iter().enumerate() {
            let skipped = affected
                .iter()
                .position(|&a| a == i)
                .is_some_and(|bit| subset & (1 << bit) != 0);
            if !skipped {
                apply_ops(&mut state, ops);
            }
        }
        states.push(state);
    }
    let db = Db::open_with(&dir, options()).map_err(|e| format!("open after repair: {e}"))?;
    if !db.recovery_report().damaged_tables.is_empty() {
        return Err(format!(
            "damaged tables after repair: {:?}",
            db.recovery_report().damaged_tables
        ));
    }
    let mut lost = 0;
    for k in &template.universe {
        let got = db
            .get(k)
            .map_err(|e| format!("get {} after repair: {e}", String::from_utf8_lossy(k)))?;
        let got = got.as_deref();
        if got == template.full.get(k).map(Vec::as_slice) {
            continue;
        }
        let lost_range = report.lost_ranges().any(|r| r.covers(k));
        let as_without_a_lost_batch = states.iter().any(|s| s.get(k).map(Vec::as_slice) == got);
        if !(as_without_a_lost_batch || (got.is_none() && lost_range)) {
            return Err(format!(
                "after repair get {} = {:?}, expected {:?} (lost ranges {:?}, lost batches {affected:?})",
                String::from_utf8_lossy(k),
                got.map(String::from_utf8_lossy),
                template.full.get(k).map(|v| String::from_utf8_lossy(v)),
                report.lost_ranges().collect::<Vec<_>>(),
            ));
        }
        lost += 1;
    }
    for item in db.iter() {
        let (k, v) = item.map_err(|e| format!("scan after repair: {e}"))?;
        let got = db.get(&k).map_err(|e| e.to_string())?;
        if got.as_deref() != Some(v.as_ref()) {
            return Err(format!(
                "after repair the scan and get disagree on {}",
                String::from_utf8_lossy(&k)
            ));
        }
    }
    drop(db);
    let again = repair(&dir, RepairOptions::new().options(options()))
        .map_err(|e| format!("second repair failed: {e}"))?;
    if again.changed() {
        return Err(format!("a second repair changed things: {again:?}"));
    }
    Ok(if lost == 0 {
        Repaired::AllRight
    } else {
        Repaired::Lost(lost)
    })
}

#[test]
fn single_byte_changes_give_right_answers_or_errors() {
    let template = build_template();
    let mut all = positions(&template);
    assert!(all.len() >= 300, "only {} positions", all.len());
    let structural = all.len();
    all.extend(sampled_positions(&template));
    let count = all.len();

    let (results_tx, results_rx) = mpsc::channel();
    let worker = std::thread::spawn(move || {
        let root = scratch_root();
        let mut rng = SplitMix64::new(0xbad_b17e);
        // The untouched copy first: it must read back whole.
        let pristine = Position {
            file: MANIFEST_FILE.to_string(),
            offset: usize::MAX,
            sampled: false,
        };
        let _ = results_tx.send((
            pristine.clone(),
            trial(&template, root.path(), &pristine, 0)
                .and_then(|outcome| Ok((outcome, repair_trial(&template, root.path())?))),
        ));
        for at in all {
            let mask = 1 + rng.below(255) as u8;
            let outcome = trial(&template, root.path(), &at, mask)
                .and_then(|outcome| Ok((outcome, repair_trial(&template, root.path())?)));
            if results_tx.send((at, outcome)).is_err() {
                return;
            }
        }
    });

    let mut tally: BTreeMap<&str, usize> = BTreeMap::new();
    let mut per_file: BTreeMap<String, [usize; 4]> = BTreeMap::new();
    let mut repaired_per_file: BTreeMap<String, [usize; 3]> = BTreeMap::new();
    let mut damaged_at_open: BTreeMap<String, usize> = BTreeMap::new();
    // Per file kind: (refused, cases), of the structural and the sampled sweep.
    let mut refused_by_kind: BTreeMap<(bool, &str), (usize, usize)> = BTreeMap::new();
    let mut failures = Vec::new();
    for i in 0..=count {
        let (at, outcome) = results_rx
            .recv_timeout(TRIAL_TIMEOUT)
            .unwrap_or_else(|_| panic!("trial {i} hung (or the worker died)"));
        if i == 0 {
            assert_eq!(
                outcome,
                Ok((Outcome::AllCorrect { torn: false }, Repaired::AllRight)),
                "untouched copy"
            );
            continue;
        }
        let (outcome, repaired) = match outcome {
            Ok(both) => both,
            Err(broken) => {
                failures.push(format!("{} offset {}: {broken}", at.file, at.offset));
                continue;
            }
        };
        let by_kind = refused_by_kind
            .entry((at.sampled, kind_of(&at.file)))
            .or_default();
        by_kind.0 += usize::from(outcome == Outcome::RefusedAtOpen);
        by_kind.1 += 1;
        if at.sampled {
            continue;
        }
        if let Outcome::ErrorsReported {
            damaged_at_open: true,
        } = outcome
        {
            *damaged_at_open.entry(at.file.clone()).or_default() += 1;
        }
        let slot = match outcome {
            Outcome::RefusedAtOpen => 0,
            Outcome::ErrorsReported { .. } => 1,
            Outcome::AllCorrect { torn: true } => 2,
            Outcome::AllCorrect { torn: false } => 3,
        };
        let repaired_file = repaired_per_file.entry(at.file.clone()).or_default();
        match repaired {
            Repaired::AllRight => repaired_file[0] += 1,
            Repaired::Lost(keys) => {
                repaired_file[1] += 1;
                repaired_file[2] += keys;
            }
        }
        per_file.entry(at.file.clone()).or_default()[slot] += 1;
        let name = [
            "refused at open",
            "errors reported",
            "all correct, last log record dropped as torn",
            "all correct",
        ][slot];
        *tally.entry(name).or_default() += 1;
    }
    worker.join().unwrap();
    let mut refused_share = 0.0;
    for (sampled, cases) in [(false, structural), (true, count - structural)] {
        let refused: usize = refused_by_kind
            .iter()
            .filter(|((s, _), _)| *s == sampled)
            .map(|(_, (refused, _))| refused)
            .sum();
        let share = refused as f64 / cases.max(1) as f64;
        println!(
            "{}: {refused} of {cases} single-byte changes refused the open ({:.1}%); by file kind \
             (refused / cases):",
            if sampled {
                "sampled sweep (half over every byte, half in a file's last 128 bytes)"
            } else {
                "structural sweep (every manifest byte, the log's last record, block edges)"
            },
            100.0 * share
        );
        for ((_, kind), (refused, cases)) in
            refused_by_kind.iter().filter(|((s, _), _)| *s == sampled)
        {
            println!("  {kind:<14} {refused:>4} / {cases}");
        }
        if sampled {
            refused_share = share;
        }
    }
    println!("{structural} single-byte changes at structural positions:");
    for (name, n) in &tally {
        println!("  {n:>5}  {name}");
    }
    println!("per file (refused / errors / torn last record / all correct):");
    for (file, counts) in &per_file {
        println!("  {file:<14} {counts:?}");
    }
    println!(
        "opened with a table that could not be opened (refused before damaged tables were \
         tolerated): {damaged_at_open:?}"
    );
    println!("after repair, per file (every key right / some keys lost as reported / keys lost):");
    for (file, counts) in &repaired_per_file {
        println!("  {file:<14} {counts:?}");
    }
    let refused_tables: usize = per_file
        .iter()
        .filter(|(file, _)| file.ends_with(".sst"))
        .map(|(_, counts)| counts[0])
        .sum();
    assert!(
        failures.is_empty(),
        "{} broken promises:\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert_eq!(refused_tables, 0, "a damaged table refused the open");
    let refused_metadata: usize = refused_by_kind
        .iter()
        .filter(|((_, kind), _)| kind.starts_with("manifest"))
        .map(|(_, (refused, _))| refused)
        .sum();
    assert_eq!(
        refused_metadata, 0,
        "a single damaged manifest byte refused the open"
    );
    assert!(
        refused_share <= MAX_REFUSED_SHARE,
        "{:.1}% of the sampled changes refused the open",
        100.0 * refused_share
    );
}
