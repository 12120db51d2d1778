//! The backup metadata file (`meta/ID`): one backup's number, sequence
//! number, time and files with their sizes and checksums, as text ending in
//! the CRC-32 of the lines before it (`docs/format.md`, "Backup metadata").
//!
//! Owns: [`BackupInfo`], [`BackupFile`], [`encode_meta`] and [`decode_meta`].
//! Must never: trust a line before the checksum has matched, accept a file
//! name that leaves the backup directory, or panic on any bytes (the
//! `backup_meta_decode` fuzz target feeds it arbitrary ones).

use crate::codec::crc32_of;

/// The first line of every metadata file: its format version.
pub const META_HEADER: &str = "siftdb-backup 1";
/// The format version [`META_HEADER`] names, the one this build reads.
pub(crate) const META_VERSION: u64 = 1;
/// What [`crate::Error::UnsupportedVersion`] calls a metadata file.
pub(crate) const FILE_KIND: &str = "backup metadata";
/// One file of a backup.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct BackupFile {
    /// Its path in the backup directory (`shared/...` or `private/ID/...`).
    pub stored: String,
    /// Its name in a restored database.
    pub name: String,
    /// Its length in bytes.
    pub size: u64,
    /// The CRC-32 of its bytes.
    pub crc32: u32,
}

/// One backup, as its metadata records it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct BackupInfo {
    /// Its number: backups are numbered 1, 2, ... in the order made.
    pub id: u64,
    /// The database's state it holds: the writes up to this sequence number.
    pub sequence: u64,
    /// When it was made, in seconds since the Unix epoch.
    pub created_unix_secs: u64,
    /// Its files.
    pub files: Vec<BackupFile>,
    /// Bytes this backup stored that no earlier backup had (its new
    /// tables, logs and manifest), at its creation.
    pub new_bytes: u64,
}

impl BackupInfo {
    /// Bytes of all of its files (shared ones included).
    pub fn size(&self) -> u64 {
        self.files.iter().map(|f| f.size).sum()
    }
}

/// The metadata's text (see `docs/format.md`, "Backup metadata").
pub fn encode_meta(info: &BackupInfo) -> Vec<u8> {
    let mut text = format!(
        "{META_HEADER}\nid {}\nsequence {}\ncreated {}\nnew_bytes {}\n",
        info.id, info.sequence, info.created_unix_secs, info.new_bytes
    );
    for f in &info.files {
        text.push_str(&format!(
            "file {} {} {} {:08x}\n",
            f.stored, f.name, f.size, f.crc32
        ));
    }
    let crc = crc32_of(&[text.as_bytes()]);
    text.push_str(&format!("crc32 {crc:08x}\n"));
    text.into_bytes()
}

/// The format version the first line of a checksum-sound metadata file
/// names (`siftdb-backup N`), whatever the rest holds; `None` for bytes
/// whose checksum does not match or whose first line names none.
pub(crate) fn meta_version(bytes: &[u8]) -> Option<u64> {
    checked_body(bytes)
        .ok()?
        .lines()
        .next()?
        .strip_prefix("siftdb-backup ")?
        .parse()
        .ok()
}

/// Parses metadata, its checksum checked first; the reason it is refused.
pub fn decode_meta(bytes: &[u8], id: u64) -> std::result::Result<BackupInfo, String> {
    let body = checked_body(bytes)?;
    let mut lines = body.lines();
    if lines.next() != Some(META_HEADER) {
        return Err(format!("does not start with {META_HEADER:?}"));
    }
    let mut field = |name: &str| -> std::result::Result<u64, String> {
        lines
            .next()
            .and_then(|l| l.strip_prefix(name))
            .and_then(|v| v.strip_prefix(' '))
            .and_then(|v| v.parse().ok())
            .ok_or(format!("no {name} line"))
    };
    let info_id = field("id")?;
    let sequence = field("sequence")?;
    let created_unix_secs = field("created")?;
    let new_bytes = field("new_bytes")?;
    if info_id != id {
        return Err(format!("holds backup {info_id}, not {id}"));
    }
    let mut files = Vec::new();
    for line in lines {
        let parts: Vec<&str> = line.split(' ').collect();
        let [kind, stored, name, size, crc] = parts.as_slice() else {
            return Err(format!("bad line {line:?}"));
        };
        let size = size.parse().ok();
        let crc = u32::from_str_radix(crc, 16).ok();
        match (*kind, size, crc) {
            ("file", Some(size), Some(crc32)) if safe_name(stored) && safe_name(name) => {
                files.push(BackupFile {
                    stored: stored.to_string(),
                    name: name.to_string(),
                    size,
                    crc32,
                });
            }
            _ => return Err(format!("bad line {line:?}")),
        }
    }
    Ok(BackupInfo {
        id,
        sequence,
        created_unix_secs,
        files,
        new_bytes,
    })
}

/// The text before the `crc32` line, once the checksum over it matched.
fn checked_body(bytes: &[u8]) -> std::result::Result<&str, String> {
    let text = std::str::from_utf8(bytes).map_err(|_| "not UTF-8 text".to_string())?;
    let body_end = text
        .trim_end_matches('\n')
        .rfind('\n')
        .map(|i| i + 1)
        .ok_or("too short")?;
    let (body, last) = text.split_at(body_end);
    let stored_crc = last
        .trim_end()
        .strip_prefix("crc32 ")
        .and_then(|h| u32::from_str_radix(h, 16).ok())
        .ok_or("no crc32 line at its end")?;
    if crc32_of(&[body.as_bytes()]) != stored_crc {
        return Err("checksum mismatch".to_string());
    }
    Ok(body)
}

/// A relative path without `..` or an absolute start: it stays inside the
/// directory it is joined to.
pub fn safe_name(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with('/')
        && name.split('/').all(|p| !p.is_empty() && p != "..")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_round_trips_and_refuses_any_flipped_byte() {
        let info = BackupInfo {
            id: 7,
            sequence: 1234,
            created_unix_secs: 1_700_000_000,
            files: vec![BackupFile {
                stored: "shared/000012_0badf00d_4096.sst".to_string(),
                name: "000012.sst".to_string(),
                size: 4096,
                crc32: 0x0bad_f00d,
            }],
            new_bytes: 4096,
        };
        let bytes = encode_meta(&info);
        assert_eq!(decode_meta(&bytes, 7), Ok(info));
        assert!(decode_meta(&bytes, 8).is_err());
        for at in 0..bytes.len() {
            let mut flipped = bytes.clone();
            if let Some(b) = flipped.get_mut(at) {
                *b ^= 0x10;
            }
            assert!(decode_meta(&flipped, 7).is_err(), "flip at {at} accepted");
        }
        assert!(decode_meta(b"", 7).is_err());
        assert!(decode_meta(b"\n\n", 7).is_err());
    }

    #[test]
    fn names_that_leave_the_directory_are_refused() {
        for bad in ["", "/etc/passwd", "../x", "a/../b", "a//b"] {
            assert!(!safe_name(bad), "{bad}");
        }
        assert!(safe_name("private/3/MANIFEST"));
    }
}
