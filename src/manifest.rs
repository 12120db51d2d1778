//! The manifest: the one file that says which tables are live, at which
//! level, and where the log and the sequence numbers stand.
//!
//! Owns: [`ManifestState`], its byte layout documented in `docs/format.md`
//! ("Manifest"), and the atomic replacement of the `MANIFEST` file and of
//! its second copy `MANIFEST.copy` (the same bytes, replaced first).
//! Must never: leave a moment where `MANIFEST` is missing or half written
//! (a new one is written beside it, synced, the directory synced, renamed
//! over it, and the directory synced again), let the copy fall behind
//! `MANIFEST`, write a state it would refuse to read, or accept a
//! byte before the checksum over the whole file is verified.
//!
//! ```text
//! offset  size  field
//! 0       4     magic "SMAN"
//! 4       4     format version (u32 LE, 5)
//! 8       8     next file number
//! 16      8     last sequence
//! 24      8     log number (the oldest log any keyspace needs)
//! 32      8     closed log number (0: none)
//! 40      8     closed log length
//! 48      4     next keyspace id
//! 52      4     keyspace count K
//! 56      ...   K keyspace records:
//!               id u32, log number u64, name (u8 length + bytes),
//!               settings (`keyspace_settings`: u8 count + tagged values)
//! ...     4     table count T
//! ...     ...   T table records:
//!               keyspace id u32, level u32, file number u64,
//!               file size u64, entries u64,
//!               min seq u64, max seq u64,
//!               smallest internal key (u32 length + bytes),
//!               largest internal key (u32 length + bytes)
//! ...     4     blob file count B
//! ...     44·B  B blob file records, numbers strictly increasing:
//!               keyspace id u32, file number u64,
//!               total bytes u64, total values u64,
//!               garbage bytes u64, garbage values u64
//! end−4   4     crc32 of every byte before it
//! ```

use std::cmp::Ordering;
use std::collections::HashSet;
use std::path::Path;

use crate::codec::{crc32_of, put_len_prefixed, split_checked, ByteReader};
use crate::error::{Error, Result};
use crate::filename::{MANIFEST_COPY_FILE, MANIFEST_FILE, MANIFEST_TEMP_FILE};
use crate::fs::FileSystem;
use crate::key::{compare_internal_keys, parse_internal_key, SeqNo, MAX_KEY_LEN, TAG_LEN};
pub use crate::keyspace_settings::KeyspaceSettings;
use blob_files::check_blob_file;
pub use blob_files::{BlobFileRecord, BLOB_FILE_RECORD_LEN};

mod blob_files;
use crate::keyspace_settings::MIN_SETTINGS_LEN;

/// The four bytes every manifest starts with.
pub const MAGIC: [u8; 4] = *b"SMAN";
/// The one format version this code reads and writes (3: keyspaces;
/// 4: keyspace settings; 5: blob file records; 6: the compression-per-level
/// setting; older versions are not read).
pub const FORMAT_VERSION: u32 = 6;
/// Levels are numbered `0..MAX_LEVELS`.
pub const MAX_LEVELS: u32 = 16;
/// Bytes of the fixed fields before the keyspace records.
pub const HEADER_LEN: usize = 56;
/// Bytes of one table record with both keys empty (real keys add at least 16).
pub const MIN_TABLE_RECORD_LEN: usize = 4 + 4 + 5 * 8 + 4 + 4;
/// Bytes of one keyspace record with an empty name (real names add 1-255).
pub const MIN_KEYSPACE_RECORD_LEN: usize = 4 + 8 + 1 + MIN_SETTINGS_LEN;
/// The id of the keyspace named `default`, which every database has.
pub const DEFAULT_KEYSPACE_ID: u32 = 0;
/// The name of keyspace [`DEFAULT_KEYSPACE_ID`].
pub const DEFAULT_KEYSPACE_NAME: &str = "default";
/// The longest keyspace name, in bytes.
pub const MAX_KEYSPACE_NAME_LEN: usize = 255;

/// Whether `name` may name a keyspace: 1 to 255 bytes of `[A-Za-z0-9_.-]`.
pub fn valid_keyspace_name(name: &str) -> bool {
    (1..=MAX_KEYSPACE_NAME_LEN).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
}

/// One keyspace, as the manifest records it.
#[derive(Debug, Clone, PartialEq)]
pub struct KeyspaceRecord {
    /// Its id, in table records and log records; never reused.
    pub id: u32,
    /// Its name (`valid_keyspace_name` says which are allowed).
    pub name: String,
    /// The oldest log that may hold records of this keyspace not yet in
    /// its tables: replay skips its records in older logs.
    pub log_number: u64,
    /// The settings `Db::keyspace_with` gave it, kept across opens.
    pub settings: KeyspaceSettings,
}

/// One live table, as the manifest records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableRecord {
    /// The keyspace the table belongs to.
    pub keyspace: u32,
    /// The level the table belongs to (`0..MAX_LEVELS`).
    pub level: u32,
    /// The number in its file name (`NNNNNN.sst`).
    pub file_number: u64,
    /// Its length in bytes.
    pub file_size: u64,
    /// How many entries (versions, tombstones included) it holds.
    pub entries: u64,
    /// Its first internal key.
    pub smallest: Vec<u8>,
    /// Its last internal key.
    pub largest: Vec<u8>,
    /// The smallest sequence number of any entry.
    pub min_seq: SeqNo,
    /// The largest sequence number of any entry.
    pub max_seq: SeqNo,
}

/// The log a clean close ended: its number and its whole length, close
/// record included. Recorded by the close after the log's close record is
/// synced, and dropped by the next open's first manifest: while it is
/// recorded, that log must hold exactly this many bytes and end with its
/// close record, so a log cut short after a clean close (whose missing
/// tail would otherwise read as a crash's torn tail) is known for a loss.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClosedLog {
    /// The log's number (`NNNNNN.wal`); never 0.
    pub number: u64,
    /// Its length in bytes at the close.
    pub len: u64,
}

/// Everything the manifest records.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ManifestState {
    /// The next unused file number (larger than every number in use).
    pub next_file_number: u64,
    /// The largest sequence number that may appear in any table.
    pub last_sequence: SeqNo,
    /// The write-ahead log whose records are not yet all in tables; replay
    /// starts there (records at or below a table's sequence can be skipped).
    pub log_number: u64,
    /// The newest log, when the last session ended with a clean close (and
    /// no session has opened the database since).
    pub closed_log: Option<ClosedLog>,
    /// Larger than every keyspace id ever given (ids are never reused,
    /// so a dropped keyspace's records in a log are known for dropped).
    pub next_keyspace_id: u32,
    /// Every keyspace, the default one included.
    pub keyspaces: Vec<KeyspaceRecord>,
    /// Every live table.
    pub tables: Vec<TableRecord>,
    /// Every blob file a live table points into and whose figures are
    /// known, file numbers strictly increasing.
    pub blob_files: Vec<BlobFileRecord>,
}

impl ManifestState {
    /// Checks what the format cannot express on its own: levels within
    /// range, keys that are internal keys in order, sequence numbers within
    /// `last_sequence`, file numbers unique and below `next_file_number`.
    /// The reason names the first table that breaks a rule.
    pub fn check(&self) -> std::result::Result<(), String> {
        if self.last_sequence > SeqNo::MAX {
            return Err(format!(
                "last sequence {} passes the 56-bit limit",
                self.last_sequence.0
            ));
        }
        if self.log_number != 0 && self.log_number >= self.next_file_number {
            return Err(format!(
                "log number {} is not below the next file number {}",
                self.log_number, self.next_file_number
            ));
        }
        if let Some(closed) = self.closed_log {
            if closed.number == 0
                || closed.number < self.log_number
                || closed.number >= self.next_file_number
            {
                return Err(format!(
                    "closed log {} is not within the log number {} and the next file number {}",
                    closed.number, self.log_number, self.next_file_number
                ));
            }
        }
        let mut ids = HashSet::with_capacity(self.keyspaces.len());
        let mut names = HashSet::with_capacity(self.keyspaces.len());
        for keyspace in &self.keyspaces {
            check_keyspace(self, keyspace).map_err(|reason| {
                format!("keyspace {} ({:?}): {reason}", keyspace.id, keyspace.name)
            })?;
            if !ids.insert(keyspace.id) || !names.insert(keyspace.name.as_str()) {
                return Err(format!(
                    "keyspace {} ({:?}) listed twice",
                    keyspace.id, keyspace.name
                ));
            }
        }
        let mut seen = HashSet::with_capacity(self.tables.len());
        for (index, table) in self.tables.iter().enumerate() {
            check_table(self, table)
                .map_err(|reason| format!("table {index} ({}): {reason}", table.file_number))?;
            if !ids.contains(&table.keyspace) {
                return Err(format!(
                    "table {index} ({}): keyspace {} is not listed",
                    table.file_number, table.keyspace
                ));
            }
            if !seen.insert(table.file_number) {
                return Err(format!(
                    "table {index}: file number {} listed twice",
                    table.file_number
                ));
            }
        }
        let mut previous: Option<u64> = None;
        for blob in &self.blob_files {
            check_blob_file(self.next_file_number, blob, previous)
                .map_err(|reason| format!("blob file {}: {reason}", blob.file_number))?;
            if !ids.contains(&blob.keyspace) {
                return Err(format!(
                    "blob file {}: keyspace {} is not listed",
                    blob.file_number, blob.keyspace
                ));
            }
            previous = Some(blob.file_number);
        }
        Ok(())
    }
}

fn check_keyspace(
    state: &ManifestState,
    keyspace: &KeyspaceRecord,
) -> std::result::Result<(), String> {
    if keyspace.id >= state.next_keyspace_id {
        return Err(format!(
            "id is not below the next keyspace id {}",
            state.next_keyspace_id
        ));
    }
    if !valid_keyspace_name(&keyspace.name) {
        return Err("the name is not 1-255 bytes of [A-Za-z0-9_.-]".to_string());
    }
    if (keyspace.id == DEFAULT_KEYSPACE_ID) != (keyspace.name == DEFAULT_KEYSPACE_NAME) {
        return Err(format!(
            "only keyspace {DEFAULT_KEYSPACE_ID} is named {DEFAULT_KEYSPACE_NAME:?}"
        ));
    }
    if keyspace.log_number < state.log_number
        || (keyspace.log_number != 0 && keyspace.log_number >= state.next_file_number)
    {
        return Err(format!(
            "log number {} is not within the log number {} and the next file number {}",
            keyspace.log_number, state.log_number, state.next_file_number
        ));
    }
    keyspace.settings.check()
}

fn check_table(state: &ManifestState, table: &TableRecord) -> std::result::Result<(), String> {
    if table.level >= MAX_LEVELS {
        return Err(format!("level {} is not below {MAX_LEVELS}", table.level));
    }
    if table.file_number >= state.next_file_number {
        return Err(format!(
            "file number is not below the next file number {}",
            state.next_file_number
        ));
    }
    for (name, key) in [("smallest", &table.smallest), ("largest", &table.largest)] {
        if key.len() > MAX_KEY_LEN + TAG_LEN {
            return Err(format!("{name} key of {} bytes is too long", key.len()));
        }
        parse_internal_key(key).map_err(|e| format!("{name} key: {e}"))?;
    }
    if compare_internal_keys(&table.smallest, &table.largest) == Ordering::Greater {
        return Err("smallest key sorts after largest".to_string());
    }
    if table.min_seq > table.max_seq || table.max_seq > state.last_sequence {
        return Err(format!(
            "sequence range {}..={} is not within 0..={}",
            table.min_seq.0, table.max_seq.0, state.last_sequence.0
        ));
    }
    Ok(())
}

/// The manifest's bytes (see the module docs for the layout).
///
/// Encodes whatever it is given; [`write_manifest`] refuses a state that
/// fails [`ManifestState::check`], which [`decode`] would refuse to read.
pub fn encode(state: &ManifestState) -> Vec<u8> {
    let keys: usize = state
        .tables
        .iter()
        .map(|t| t.smallest.len() + t.largest.len())
        .sum::<usize>()
        + state
            .keyspaces
            .iter()
            .map(|k| MIN_KEYSPACE_RECORD_LEN + k.name.len())
            .sum::<usize>();
    let mut out = Vec::with_capacity(
        HEADER_LEN
            + 4
            + state.tables.len() * MIN_TABLE_RECORD_LEN
            + keys
            + 4
            + state.blob_files.len() * BLOB_FILE_RECORD_LEN
            + 4,
    );
    out.extend_from_slice(&MAGIC);
    out.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    out.extend_from_slice(&state.next_file_number.to_le_bytes());
    out.extend_from_slice(&state.last_sequence.0.to_le_bytes());
    out.extend_from_slice(&state.log_number.to_le_bytes());
    let (closed_number, closed_len) = state.closed_log.map_or((0, 0), |c| (c.number, c.len));
    out.extend_from_slice(&closed_number.to_le_bytes());
    out.extend_from_slice(&closed_len.to_le_bytes());
    out.extend_from_slice(&state.next_keyspace_id.to_le_bytes());
    let count = u32::try_from(state.keyspaces.len()).unwrap_or(u32::MAX);
    out.extend_from_slice(&count.to_le_bytes());
    for keyspace in &state.keyspaces {
        out.extend_from_slice(&keyspace.id.to_le_bytes());
        out.extend_from_slice(&keyspace.log_number.to_le_bytes());
        // `check` bounds a name to 255 bytes; a longer one (refused by
        // `write_manifest`) is cut so the encoding stays well formed.
        let name = keyspace.name.as_bytes();
        let name = name.get(..MAX_KEYSPACE_NAME_LEN).unwrap_or(name);
        out.push(u8::try_from(name.len()).unwrap_or(u8::MAX));
        out.extend_from_slice(name);
        keyspace.settings.encode_into(&mut out);
    }
    let count = u32::try_from(state.tables.len()).unwrap_or(u32::MAX);
    out.extend_from_slice(&count.to_le_bytes());
    for table in &state.tables {
        out.extend_from_slice(&table.keyspace.to_le_bytes());
        out.extend_from_slice(&table.level.to_le_bytes());
        out.extend_from_slice(&table.file_number.to_le_bytes());
        out.extend_from_slice(&table.file_size.to_le_bytes());
        out.extend_from_slice(&table.entries.to_le_bytes());
        out.extend_from_slice(&table.min_seq.0.to_le_bytes());
        out.extend_from_slice(&table.max_seq.0.to_le_bytes());
        put_len_prefixed(&mut out, &table.smallest);
        put_len_prefixed(&mut out, &table.largest);
    }
    blob_files::encode_into(&mut out, &state.blob_files);
    let crc = crc32_of(&[&out]);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// Decodes a manifest; `file` names it in errors.
///
/// The checksum over the whole file is verified first; then
/// `UnsupportedVersion` for another format version, `Corruption` for a
/// wrong magic, counts the bytes cannot hold, trailing
/// bytes, or a state that fails [`ManifestState::check`].
pub fn decode(bytes: &[u8], file: &str) -> Result<ManifestState> {
    let what = format!("manifest {file}");
    let wrap = |e: Error| match e {
        Error::Corruption {
            what: inner,
            detail,
        } => Error::corruption(&what, format!("{inner}: {detail}")),
        other => other,
    };
    let body = split_checked(bytes, "manifest").map_err(wrap)?;
    decode_body(body, file).map_err(wrap)
}

/// What [`Error::UnsupportedVersion`] calls a manifest.
pub const FILE_KIND: &str = "manifest";

fn decode_body(body: &[u8], file: &str) -> Result<ManifestState> {
    let mut reader = ByteReader::new(body, "manifest");
    let magic: [u8; 4] = reader.array()?;
    if magic != MAGIC {
        return Err(Error::corruption(
            "manifest",
            format!("bad magic {magic:02x?}"),
        ));
    }
    let version = reader.u32()?;
    if version != FORMAT_VERSION {
        // The checksum over the whole file matched: a version this build
        // does not read, not damage (open must not fall back to the copy,
        // nor repair rebuild it).
        return Err(Error::UnsupportedVersion {
            path: file.into(),
            kind: FILE_KIND,
            found: u64::from(version),
            supported: u64::from(FORMAT_VERSION),
        });
    }
    let next_file_number = reader.u64()?;
    let last_sequence = SeqNo(reader.u64()?);
    let log_number = reader.u64()?;
    let closed_log = match (reader.u64()?, reader.u64()?) {
        (0, 0) => None,
        (0, len) => {
            return Err(Error::corruption(
                "manifest",
                format!("no closed log, yet a closed log length of {len}"),
            ))
        }
        (number, len) => Some(ClosedLog { number, len }),
    };
    let next_keyspace_id = reader.u32()?;
    let count = reader.u32()? as usize;
    if count > reader.remaining() / MIN_KEYSPACE_RECORD_LEN {
        return Err(Error::corruption(
            "manifest",
            format!(
                "{count} keyspaces cannot fit in the {} bytes that remain",
                reader.remaining()
            ),
        ));
    }
    let mut keyspaces = Vec::with_capacity(count);
    for _ in 0..count {
        let id = reader.u32()?;
        let log_number = reader.u64()?;
        let len = usize::from(reader.u8()?);
        let name = std::str::from_utf8(reader.take(len)?)
            .map_err(|_| {
                Error::corruption("manifest", format!("keyspace {id}: name is not UTF-8"))
            })?
            .to_string();
        let settings = KeyspaceSettings::decode(&mut reader)?;
        keyspaces.push(KeyspaceRecord {
            id,
            name,
            log_number,
            settings,
        });
    }
    let count = reader.u32()? as usize;
    if count > reader.remaining() / MIN_TABLE_RECORD_LEN {
        return Err(Error::corruption(
            "manifest",
            format!(
                "{count} tables cannot fit in the {} bytes that remain",
                reader.remaining()
            ),
        ));
    }
    let mut tables = Vec::with_capacity(count);
    for _ in 0..count {
        tables.push(TableRecord {
            keyspace: reader.u32()?,
            level: reader.u32()?,
            file_number: reader.u64()?,
            file_size: reader.u64()?,
            entries: reader.u64()?,
            min_seq: SeqNo(reader.u64()?),
            max_seq: SeqNo(reader.u64()?),
            smallest: reader.len_prefixed()?.to_vec(),
            largest: reader.len_prefixed()?.to_vec(),
        });
    }
    let blob_files = blob_files::decode(&mut reader)?;
    reader.finish()?;
    let state = ManifestState {
        next_file_number,
        last_sequence,
        log_number,
        closed_log,
        next_keyspace_id,
        keyspaces,
        tables,
        blob_files,
    };
    state
        .check()
        .map_err(|reason| Error::corruption("manifest", reason))?;
    Ok(state)
}

/// Replaces `dir/MANIFEST` with `state`, atomically and durably, and its
/// second copy `dir/MANIFEST.copy` just before it. Each of the two is
/// replaced the same way: `MANIFEST.tmp` written and synced, `dir` synced
/// (so every file created since the last directory sync — the tables
/// `state` names among them — has a durable name before the file can take
/// effect: POSIX does not order directory changes that no directory sync
/// separates), renamed over it, `dir` synced again.
///
/// The copy goes first, so it is never older than `MANIFEST`: when a crash
/// or an error comes between the two, the copy holds the newer state, whose
/// tables are durable and whose obsolete files are all still there (nothing
/// is removed before this returns).
///
/// `InvalidArgument` (and nothing written) when the state fails
/// [`ManifestState::check`]. Once this returns, a table the new state no
/// longer names may be deleted.
pub fn write_manifest(fs: &dyn FileSystem, dir: &Path, state: &ManifestState) -> Result<()> {
    state
        .check()
        .map_err(|reason| Error::invalid(format!("refusing to write manifest: {reason}")))?;
    let bytes = encode(state);
    replace_file(fs, dir, MANIFEST_COPY_FILE, &bytes)?;
    replace_file(fs, dir, MANIFEST_FILE, &bytes)
}

/// Replaces `dir/name` with `bytes` through `MANIFEST.tmp` (see
/// [`write_manifest`]).
fn replace_file(fs: &dyn FileSystem, dir: &Path, name: &str, bytes: &[u8]) -> Result<()> {
    let temp = dir.join(MANIFEST_TEMP_FILE);
    let written = fs.create(&temp).and_then(|mut file| {
        file.append(bytes)?;
        file.sync()
    });
    if let Err(e) = written.and_then(|()| fs.sync_dir(dir)) {
        // Never took effect; it must not hold the space that ran out.
        let _ = fs.remove(&temp);
        return Err(e);
    }
    fs.rename(&temp, &dir.join(name))?;
    fs.sync_dir(dir)
}

/// Reads `dir/MANIFEST`; `None` when there is none. A `MANIFEST.tmp` left
/// by a crash is ignored: it was never renamed, so it never took effect
/// (the next [`write_manifest`] overwrites it).
pub fn read_manifest(fs: &dyn FileSystem, dir: &Path) -> Result<Option<ManifestState>> {
    read_file(fs, dir, MANIFEST_FILE)
}

/// Reads the second copy, `dir/MANIFEST.copy`; `None` when there is none
/// (a database whose manifest was last written by a build without copies).
/// It is the state of `MANIFEST` or, after a crash or an error between the
/// two replacements, the newer state.
pub fn read_manifest_copy(fs: &dyn FileSystem, dir: &Path) -> Result<Option<ManifestState>> {
    read_file(fs, dir, MANIFEST_COPY_FILE)
}

fn read_file(fs: &dyn FileSystem, dir: &Path, name: &str) -> Result<Option<ManifestState>> {
    let path = dir.join(name);
    if !fs.exists(&path) {
        return Ok(None);
    }
    let bytes = fs.read_all(&path)?;
    decode(&bytes, &path.display().to_string()).map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::OsFileSystem;
    use crate::key::{internal_key, ValueKind};

    fn table(level: u32, number: u64, low: &[u8], high: &[u8]) -> TableRecord {
        TableRecord {
            keyspace: u32::from(number % 2 == 1),
            level,
            file_number: number,
            file_size: 4096 * number,
            entries: 10 * number,
            smallest: internal_key(low, SeqNo(5), ValueKind::Put),
            largest: internal_key(high, SeqNo(2), ValueKind::Delete),
            min_seq: SeqNo(2),
            max_seq: SeqNo(5 + number),
        }
    }

    fn sample() -> ManifestState {
        ManifestState {
            next_file_number: 20,
            last_sequence: SeqNo(1000),
            log_number: 18,
            closed_log: Some(ClosedLog {
                number: 19,
                len: 4242,
            }),
            next_keyspace_id: 3,
            keyspaces: vec![
                KeyspaceRecord {
                    id: DEFAULT_KEYSPACE_ID,
                    name: DEFAULT_KEYSPACE_NAME.to_string(),
                    log_number: 18,
                    settings: KeyspaceSettings::default(),
                },
                KeyspaceRecord {
                    id: 1,
                    name: "raft.log-1_A".to_string(),
                    log_number: 19,
                    settings: KeyspaceSettings {
                        block_size: Some(16 << 10),
                        prefix_len: Some(8),
                        memtable_bytes: Some(1 << 20),
                        ..KeyspaceSettings::default()
                    },
                },
            ],
            tables: vec![
                table(0, 12, b"a", b"m"),
                table(1, 7, b"b", b"b"),
                table(15, 3, b"", b"zz"),
            ],
            blob_files: vec![
                BlobFileRecord {
                    keyspace: 0,
                    file_number: 7,
                    total_bytes: 1 << 20,
                    total_values: 256,
                    garbage_bytes: 1 << 19,
                    garbage_values: 100,
                },
                BlobFileRecord {
                    keyspace: 1,
                    file_number: 12,
                    total_bytes: 4096,
                    total_values: 1,
                    ..BlobFileRecord::default()
                },
            ],
        }
    }

    #[test]
    fn round_trips_byte_for_byte() {
        let state = sample();
        let bytes = encode(&state);
        let decoded = decode(&bytes, "MANIFEST").unwrap();
        assert_eq!(decoded, state);
        assert_eq!(encode(&decoded), bytes);
        let empty = ManifestState::default();
        assert_eq!(decode(&encode(&empty), "MANIFEST").unwrap(), empty);
    }

    #[test]
    fn layout_is_as_documented() {
        let state = ManifestState {
            next_file_number: 2,
            last_sequence: SeqNo(3),
            log_number: 1,
            closed_log: None,
            next_keyspace_id: 1,
            keyspaces: vec![],
            tables: vec![],
            blob_files: vec![],
        };
        let bytes = encode(&state);
        assert_eq!(bytes.len(), HEADER_LEN + 4 + 4 + 4);
        assert_eq!(&bytes[..4], b"SMAN");
        assert_eq!(&bytes[4..8], &[6, 0, 0, 0]);
        assert_eq!(bytes[8], 2);
        assert_eq!(bytes[16], 3);
        assert_eq!(bytes[24], 1);
        assert_eq!(&bytes[32..48], &[0; 16]);
        assert_eq!(&bytes[48..52], &[1, 0, 0, 0]);
        assert_eq!(&bytes[52..60], &[0; 8]);
        let named = encode(&ManifestState {
            keyspaces: vec![KeyspaceRecord {
                id: 0,
                name: "default".to_string(),
                log_number: 1,
                settings: KeyspaceSettings::default(),
            }],
            ..state.clone()
        });
        assert_eq!(
            named.len(),
            HEADER_LEN + MIN_KEYSPACE_RECORD_LEN + 7 + 4 + 4 + 4
        );
        assert_eq!(&named[52..56], &[1, 0, 0, 0]);
        assert_eq!(named[56..60], [0; 4]);
        assert_eq!(named[60], 1);
        assert_eq!(named[68], 7);
        assert_eq!(&named[69..76], b"default");
        assert_eq!(named[76], 0, "no settings");
        let closed = encode(&ManifestState {
            closed_log: Some(ClosedLog { number: 1, len: 47 }),
            ..state.clone()
        });
        assert_eq!(closed[32], 1);
        assert_eq!(closed[40], 47);
        let one = encode(&ManifestState {
            tables: vec![table(0, 2, b"k", b"k")],
            next_file_number: 3,
            keyspaces: vec![KeyspaceRecord {
                id: 0,
                name: "default".to_string(),
                log_number: 1,
                settings: KeyspaceSettings::default(),
            }],
            ..state.clone()
        });
        assert_eq!(
            one.len(),
            HEADER_LEN + MIN_KEYSPACE_RECORD_LEN + 7 + 4 + MIN_TABLE_RECORD_LEN + 2 * 9 + 4 + 4
        );
        let blob = encode(&ManifestState {
            blob_files: vec![BlobFileRecord {
                keyspace: 0,
                file_number: 1,
                total_bytes: 0x0302,
                total_values: 4,
                garbage_bytes: 0x0201,
                garbage_values: 3,
            }],
            keyspaces: vec![KeyspaceRecord {
                id: 0,
                name: "default".to_string(),
                log_number: 1,
                settings: KeyspaceSettings::default(),
            }],
            ..state
        });
        let at = HEADER_LEN + MIN_KEYSPACE_RECORD_LEN + 7 + 4;
        assert_eq!(blob.len(), at + 4 + BLOB_FILE_RECORD_LEN + 4);
        assert_eq!(&blob[at..at + 4], &[1, 0, 0, 0], "blob file count");
        assert_eq!(&blob[at + 4..at + 8], &[0; 4], "keyspace");
        assert_eq!(blob[at + 8], 1, "file number");
        assert_eq!(&blob[at + 16..at + 18], &[2, 3], "total bytes");
        assert_eq!(blob[at + 24], 4, "total values");
        assert_eq!(&blob[at + 32..at + 34], &[1, 2], "garbage bytes");
        assert_eq!(blob[at + 40], 3, "garbage values");
    }

    #[test]
    fn every_byte_flip_is_detected() {
        let bytes = encode(&sample());
        for i in 0..bytes.len() {
            for mask in [0x01u8, 0x80, 0xff] {
                let mut bad = bytes.clone();
                bad[i] ^= mask;
                let err = decode(&bad, "/db/MANIFEST").unwrap_err();
                assert!(err.is_corruption(), "{err}");
                assert!(err.to_string().contains("/db/MANIFEST"), "{err}");
            }
        }
    }

    #[test]
    fn every_truncation_and_extension_is_detected() {
        let bytes = encode(&sample());
        for len in 0..bytes.len() {
            assert!(decode(&bytes[..len], "MANIFEST")
                .unwrap_err()
                .is_corruption());
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(decode(&longer, "MANIFEST").is_err());
    }

    /// Re-seals a body with a correct checksum, to reach the checks behind it.
    fn sealed(mut body: Vec<u8>) -> Vec<u8> {
        let crc = crc32_of(&[&body]);
        body.extend_from_slice(&crc.to_le_bytes());
        body
    }

    #[test]
    fn checks_behind_a_valid_checksum() {
        let body = |state: &ManifestState| {
            let mut b = encode(state);
            b.truncate(b.len() - 4);
            b
        };
        // Versions 1 and 2 (before keyspaces), 3 (before keyspace
        // settings), 4 (before blob file records) and 5 (before compression
        // per level) are not read.
        for version in [1u8, 2, 3, 4, 5, 7] {
            let mut wrong_version = body(&sample());
            wrong_version[4] = version;
            let err = decode(&sealed(wrong_version), "M").unwrap_err().to_string();
            assert!(err.contains(&format!("version {version}")), "{err}");
        }

        let mut huge_count = body(&sample());
        huge_count[52..56].copy_from_slice(&u32::MAX.to_le_bytes());
        let err = decode(&sealed(huge_count), "M").unwrap_err().to_string();
        assert!(err.contains("cannot fit"), "{err}");
        // The blob file count, just before the two records.
        let mut huge_blobs = body(&sample());
        let at = huge_blobs.len() - 2 * BLOB_FILE_RECORD_LEN - 4;
        assert_eq!(&huge_blobs[at..at + 4], &[2, 0, 0, 0]);
        huge_blobs[at..at + 4].copy_from_slice(&u32::MAX.to_le_bytes());
        let err = decode(&sealed(huge_blobs), "M").unwrap_err().to_string();
        assert!(err.contains("blob files cannot fit"), "{err}");

        let mut length_without_log = body(&sample());
        length_without_log[32..40].copy_from_slice(&0u64.to_le_bytes());
        let err = decode(&sealed(length_without_log), "M")
            .unwrap_err()
            .to_string();
        assert!(err.contains("closed log length"), "{err}");

        let mut bad_states = Vec::new();
        let mut s = sample();
        s.tables[0].level = MAX_LEVELS;
        bad_states.push(s);
        let mut s = sample();
        s.tables[1].file_number = 20;
        bad_states.push(s);
        let mut s = sample();
        s.tables[1].file_number = 12;
        bad_states.push(s);
        let mut s = sample();
        s.tables[0].smallest = b"short".to_vec();
        bad_states.push(s);
        let mut s = sample();
        let t = &mut s.tables[0];
        std::mem::swap(&mut t.smallest, &mut t.largest);
        bad_states.push(s);
        let mut s = sample();
        s.tables[0].max_seq = SeqNo(1001);
        bad_states.push(s);
        let mut s = sample();
        s.tables[0].min_seq = SeqNo(100);
        s.tables[0].max_seq = SeqNo(99);
        bad_states.push(s);
        let mut s = sample();
        s.log_number = 20;
        bad_states.push(s);
        for number in [0, 17, 20] {
            let mut s = sample();
            s.closed_log = Some(ClosedLog { number, len: 100 });
            bad_states.push(s);
        }
        let mut s = sample();
        s.last_sequence = SeqNo(u64::MAX);
        bad_states.push(s);
        // Keyspaces: an id at or past the next id, a bad or doubled name, a
        // default keyspace under another name, a table of an unlisted
        // keyspace, a log number below the database's.
        let mut s = sample();
        s.keyspaces[1].id = 3;
        bad_states.push(s);
        for name in ["", "a/b", "sp ace", "default"] {
            let mut s = sample();
            s.keyspaces[1].name = name.to_string();
            bad_states.push(s);
        }
        let mut s = sample();
        s.keyspaces[0].name = "main".to_string();
        bad_states.push(s);
        let mut s = sample();
        s.tables[0].keyspace = 2;
        bad_states.push(s);
        let mut s = sample();
        s.keyspaces[1].log_number = 17;
        bad_states.push(s);
        // Settings `Options::validate` refuses.
        let mut s = sample();
        s.keyspaces[1].settings.block_size = Some(100);
        bad_states.push(s);
        // Blob files: out of order or twice, at or past the next file
        // number, more garbage than total, of an unlisted keyspace.
        let mut s = sample();
        s.blob_files.swap(0, 1);
        bad_states.push(s);
        let mut s = sample();
        s.blob_files[1].file_number = 7;
        bad_states.push(s);
        let mut s = sample();
        s.blob_files[1].file_number = 20;
        bad_states.push(s);
        let mut s = sample();
        s.blob_files[0].garbage_bytes = (1 << 20) + 1;
        bad_states.push(s);
        let mut s = sample();
        s.blob_files[0].garbage_values = 257;
        bad_states.push(s);
        let mut s = sample();
        s.blob_files[0].keyspace = 2;
        bad_states.push(s);
        for state in bad_states {
            assert!(state.check().is_err(), "{state:?}");
            assert!(decode(&encode(&state), "M").unwrap_err().is_corruption());
            let dir = tempfile::tempdir().unwrap();
            let err = write_manifest(&OsFileSystem, dir.path(), &state).unwrap_err();
            assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
            assert!(!OsFileSystem.exists(&dir.path().join(MANIFEST_TEMP_FILE)));
        }
    }

    #[test]
    fn write_then_read_replaces_atomically() {
        let dir = tempfile::tempdir().unwrap();
        let fs = OsFileSystem;
        assert_eq!(read_manifest(&fs, dir.path()).unwrap(), None);
        let mut state = sample();
        write_manifest(&fs, dir.path(), &state).unwrap();
        assert_eq!(read_manifest(&fs, dir.path()).unwrap(), Some(state.clone()));
        state.tables.pop();
        state.next_file_number = 21;
        write_manifest(&fs, dir.path(), &state).unwrap();
        assert_eq!(read_manifest(&fs, dir.path()).unwrap(), Some(state.clone()));
        let mut names = fs.list(dir.path()).unwrap();
        names.sort();
        assert_eq!(names, [MANIFEST_FILE, MANIFEST_COPY_FILE]);
        // The copy holds the same bytes.
        assert_eq!(
            std::fs::read(dir.path().join(MANIFEST_COPY_FILE)).unwrap(),
            std::fs::read(dir.path().join(MANIFEST_FILE)).unwrap()
        );
        assert_eq!(
            read_manifest_copy(&fs, dir.path()).unwrap(),
            Some(state.clone())
        );

        // A crash while writing leaves a stray temp file: ignored.
        std::fs::write(dir.path().join(MANIFEST_TEMP_FILE), b"half").unwrap();
        assert_eq!(read_manifest(&fs, dir.path()).unwrap(), Some(state.clone()));
        write_manifest(&fs, dir.path(), &state).unwrap();

        // A damaged manifest is corruption naming the file.
        std::fs::write(dir.path().join(MANIFEST_FILE), b"").unwrap();
        let err = read_manifest(&fs, dir.path()).unwrap_err();
        assert!(
            err.is_corruption() && err.to_string().contains("MANIFEST"),
            "{err}"
        );
    }
}
