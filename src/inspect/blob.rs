//! [`BlobSummary`]: what one blob file (`NNNNNN.blob`) holds and whether
//! every byte of it checks out — its header, each record's checksum in
//! turn, its footer and the footer's counts — naming the record that is
//! damaged.
//!
//! Owns: reading a blob file from the outside for `siftdb inspect` and
//! `siftdb verify`, and the counts a directory listing shows of one.
//! Must never: write anything, stop at the first damage without saying
//! where it is, or allocate from a length it has not checked (it reads
//! through the blob format's own decoders).

use std::path::{Path, PathBuf};

use crate::blob::format::{
    decode_footer, decode_header, decode_record, BLOB_FOOTER_LEN, BLOB_FORMAT_VERSION,
    BLOB_HEADER_LEN,
};
use crate::error::{Error, Result};
use crate::fs::{FileSystem, OsFileSystem, SharedFs};

/// Where in a blob file damage was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlobPlace {
    /// The 20-byte header (magic, version, file number).
    Header,
    /// Record `index` (0 for the first), which starts at `offset`.
    Record {
        /// The record's position among the file's records.
        index: u64,
        /// The file offset of its first byte.
        offset: u64,
    },
    /// The 28-byte footer (counts, checksum, magic), or its counts against
    /// the records found.
    Footer,
}

impl std::fmt::Display for BlobPlace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BlobPlace::Header => f.write_str("header"),
            BlobPlace::Record { index, offset } => write!(f, "record {index} at offset {offset}"),
            BlobPlace::Footer => f.write_str("footer"),
        }
    }
}

/// One damage found in a blob file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlobDamage {
    /// Where it is.
    pub place: BlobPlace,
    /// What is wrong.
    pub detail: String,
}

impl std::fmt::Display for BlobDamage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.place, self.detail)
    }
}

/// What one blob file holds, read whole and checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlobSummary {
    /// The file.
    pub path: PathBuf,
    /// Its size in bytes.
    pub file_size: u64,
    /// The format version its header names (this build's: another is
    /// refused with `UnsupportedVersion`); `None` when the header is damaged.
    pub format_version: Option<u32>,
    /// The file number its header names.
    pub file_number: Option<u64>,
    /// Records read whole with a sound checksum, up to the first damaged one.
    pub records: u64,
    /// The value bytes of those records.
    pub value_bytes: u64,
    /// The footer's counts (records, value bytes) when the footer is sound.
    pub footer_counts: Option<(u64, u64)>,
    /// Every damage found: at most one each in the header, the records
    /// (a damaged record hides where the next one starts) and the footer.
    pub damage: Vec<BlobDamage>,
}

impl BlobSummary {
    /// True when nothing is damaged.
    pub fn is_sound(&self) -> bool {
        self.damage.is_empty()
    }
}

/// Reads and checks the blob file at `path` on the real file system.
pub fn inspect_blob_file(path: &Path) -> Result<BlobSummary> {
    inspect_blob_file_with(&OsFileSystem::shared(), path)
}

/// Reads and checks the blob file at `path` through `fs`: `Err` when it
/// cannot be read, or names another format version (`UnsupportedVersion`);
/// damage is reported in the summary.
pub fn inspect_blob_file_with(fs: &SharedFs, path: &Path) -> Result<BlobSummary> {
    let bytes = fs.read_all(path)?;
    let summary = summarise(&bytes, path);
    match summary {
        Err(found) => Err(Error::UnsupportedVersion {
            path: path.to_path_buf(),
            kind: "blob file",
            found: u64::from(found),
            supported: u64::from(BLOB_FORMAT_VERSION),
        }),
        Ok(summary) => Ok(summary),
    }
}

/// The summary of a blob file's `bytes`; `Err(version)` for a header of
/// another version.
fn summarise(bytes: &[u8], path: &Path) -> std::result::Result<BlobSummary, u32> {
    let mut summary = BlobSummary {
        path: path.to_path_buf(),
        file_size: bytes.len() as u64,
        format_version: None,
        file_number: None,
        records: 0,
        value_bytes: 0,
        footer_counts: None,
        damage: Vec::new(),
    };
    let damage = |place: BlobPlace, detail: String| BlobDamage { place, detail };
    let header = bytes.get(..BLOB_HEADER_LEN).unwrap_or(bytes);
    match decode_header(header) {
        Ok(Ok(h)) => {
            summary.format_version = Some(h.version);
            summary.file_number = Some(h.file_number);
        }
        Ok(Err(version)) => return Err(version),
        Err(e) => summary
            .damage
            .push(damage(BlobPlace::Header, e.detail().to_string())),
    }
    let Some(footer_at) = bytes
        .len()
        .checked_sub(BLOB_FOOTER_LEN)
        .filter(|&at| at >= BLOB_HEADER_LEN)
    else {
        summary.damage.push(damage(
            BlobPlace::Footer,
            format!("{} bytes, too short for a header and a footer", bytes.len()),
        ));
        return Ok(summary);
    };
    let (body, footer) = bytes.split_at(footer_at);
    match decode_footer(header, footer) {
        Ok(counts) => summary.footer_counts = Some((counts.records, counts.value_bytes)),
        Err(e) => summary
            .damage
            .push(damage(BlobPlace::Footer, e.detail().to_string())),
    }
    let mut at = BLOB_HEADER_LEN;
    let mut record_damaged = false;
    while at < body.len() {
        match decode_record(body.get(at..).unwrap_or_default(), at as u64) {
            Ok((record, len)) => {
                summary.records += 1;
                summary.value_bytes += record.value.len() as u64;
                at += len;
            }
            Err(e) => {
                let place = BlobPlace::Record {
                    index: summary.records,
                    offset: at as u64,
                };
                summary.damage.push(damage(place, e.detail().to_string()));
                record_damaged = true;
                break;
            }
        }
    }
    if let Some((records, value_bytes)) = summary.footer_counts.filter(|_| !record_damaged) {
        if (records, value_bytes) != (summary.records, summary.value_bytes) {
            summary.damage.push(damage(
                BlobPlace::Footer,
                format!(
                    "counts {records} records of {value_bytes} value bytes, the file holds {} of {}",
                    summary.records, summary.value_bytes
                ),
            ));
        }
    }
    Ok(summary)
}

/// What a directory listing shows of a blob file: its header's version
/// and its footer's counts (values, value bytes), read from those two
/// places only; `None` when either is damaged or unreadable.
pub(crate) fn blob_header_and_counts(fs: &dyn FileSystem, path: &Path) -> Option<(u64, u64, u64)> {
    let file = fs.open_read(path).ok()?;
    let len = file.len();
    let footer_at = len
        .checked_sub(BLOB_FOOTER_LEN as u64)
        .filter(|&at| at >= BLOB_HEADER_LEN as u64)?;
    let header = file.read_vec_at(BLOB_HEADER_LEN, 0).ok()?;
    let footer = file.read_vec_at(BLOB_FOOTER_LEN, footer_at).ok()?;
    let version = match decode_header(&header).ok()? {
        Ok(h) => h.version,
        Err(other) => return Some((u64::from(other), 0, 0)),
    };
    let counts = decode_footer(&header, &footer).ok()?;
    Some((u64::from(version), counts.records, counts.value_bytes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::blob::{blob_file_name, BlobWriter};

    #[test]
    fn a_sound_file_and_each_kind_of_damage() {
        let dir = tempfile::tempdir().unwrap();
        let fs = OsFileSystem::shared();
        let path = dir.path().join(blob_file_name(5));
        let mut writer = BlobWriter::create(&*fs, &path, 5).unwrap();
        for i in 0..4u8 {
            writer.add(&[b'k', i], &[i; 200]).unwrap();
        }
        writer.finish().unwrap();
        let sound = inspect_blob_file(&path).unwrap();
        assert!(sound.is_sound(), "{:?}", sound.damage);
        assert_eq!((sound.records, sound.value_bytes), (4, 800));
        assert_eq!(sound.footer_counts, Some((4, 800)));
        assert_eq!(
            (sound.format_version, sound.file_number),
            (Some(1), Some(5))
        );
        assert_eq!(
            blob_header_and_counts(&*fs, &path),
            Some((u64::from(BLOB_FORMAT_VERSION), 4, 800))
        );

        // A byte of the third record's value: that record, by index.
        let good = std::fs::read(&path).unwrap();
        let record_len = 8 + 2 + 200 + 4;
        let mut bytes = good.clone();
        bytes[BLOB_HEADER_LEN + 2 * record_len + 50] ^= 1;
        std::fs::write(&path, &bytes).unwrap();
        let s = inspect_blob_file(&path).unwrap();
        assert_eq!(s.records, 2);
        assert_eq!(
            s.damage.iter().map(|d| d.place).collect::<Vec<_>>(),
            [BlobPlace::Record {
                index: 2,
                offset: (BLOB_HEADER_LEN + 2 * record_len) as u64
            }]
        );
        assert!(s.damage[0].to_string().starts_with("record 2 at offset"));

        // The footer's checksum.
        let mut bytes = good.clone();
        let last = bytes.len() - 10;
        bytes[last] ^= 1;
        std::fs::write(&path, &bytes).unwrap();
        let s = inspect_blob_file(&path).unwrap();
        assert_eq!(s.records, 4);
        assert_eq!(s.damage.len(), 1);
        assert_eq!(s.damage[0].place, BlobPlace::Footer);

        // The header's magic; records still read.
        let mut bytes = good.clone();
        bytes[0] ^= 1;
        std::fs::write(&path, &bytes).unwrap();
        let s = inspect_blob_file(&path).unwrap();
        assert_eq!(s.damage[0].place, BlobPlace::Header);

        // Cut short: never a panic, always damage.
        for len in 0..good.len() {
            std::fs::write(&path, &good[..len]).unwrap();
            let s = inspect_blob_file(&path).unwrap();
            assert!(!s.is_sound(), "cut at {len}");
        }

        // Another version is refused, not called damage.
        let mut bytes = good;
        bytes[8] = 9;
        std::fs::write(&path, &bytes).unwrap();
        assert!(matches!(
            inspect_blob_file(&path),
            Err(Error::UnsupportedVersion { found: 9, .. })
        ));
    }
}
