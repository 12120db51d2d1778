//! The names of the files in a database directory.
//!
//! Owns: how a file number becomes a file name and back.
//! Must never: claim a name it did not produce — `parse_file_name` accepts
//! exactly the names `table_file_name` and `wal_file_name` return, so a
//! stray `1.sst` or `000001.sst.bak` is never mistaken for (or deleted as) a table.

/// The current manifest.
pub const MANIFEST_FILE: &str = "MANIFEST";
/// A manifest being written; renamed over [`MANIFEST_COPY_FILE`], then
/// (written again) over [`MANIFEST_FILE`], once synced.
pub const MANIFEST_TEMP_FILE: &str = "MANIFEST.tmp";
/// The second copy of the manifest, the same bytes, replaced just before
/// [`MANIFEST_FILE`] at each switch: what an open reads when the manifest
/// is damaged or missing.
pub const MANIFEST_COPY_FILE: &str = "MANIFEST.copy";

/// What a numbered file in the database directory holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FileKind {
    /// A sorted table (`NNNNNN.sst`).
    Table,
    /// A write-ahead log (`NNNNNN.wal`).
    Wal,
}

impl FileKind {
    fn extension(self) -> &'static str {
        match self {
            FileKind::Table => "sst",
            FileKind::Wal => "wal",
        }
    }
}

/// The name of file `number` of `kind`: the number, zero-padded to six digits, and the extension.
pub fn file_name(kind: FileKind, number: u64) -> String {
    format!("{number:06}.{}", kind.extension())
}

/// The name of table `number`, e.g. `000012.sst`.
pub fn table_file_name(number: u64) -> String {
    file_name(FileKind::Table, number)
}

/// The name of log `number`, e.g. `000013.wal`.
pub fn wal_file_name(number: u64) -> String {
    file_name(FileKind::Wal, number)
}

/// The kind and number of a table or log file name; `None` for any other name.
pub fn parse_file_name(name: &str) -> Option<(FileKind, u64)> {
    let (stem, extension) = name.split_once('.')?;
    let kind = [FileKind::Table, FileKind::Wal]
        .into_iter()
        .find(|kind| kind.extension() == extension)?;
    if !stem.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let number: u64 = stem.parse().ok()?;
    (file_name(kind, number) == name).then_some((kind, number))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        assert_eq!(table_file_name(12), "000012.sst");
        assert_eq!(wal_file_name(1234567), "1234567.wal");
        for n in [0, 1, 999_999, 1_000_000, u64::MAX] {
            assert_eq!(
                parse_file_name(&table_file_name(n)),
                Some((FileKind::Table, n))
            );
            assert_eq!(parse_file_name(&wal_file_name(n)), Some((FileKind::Wal, n)));
        }
    }

    #[test]
    fn foreign_names_are_refused() {
        for name in [
            "MANIFEST",
            "MANIFEST.tmp",
            "LOCK",
            "1.sst",
            "0000012.sst",
            "000012.sst.bak",
            "000012.SST",
            "+00012.sst",
            "00001a.wal",
            "000012",
            ".sst",
            "99999999999999999999.sst",
            "",
        ] {
            assert_eq!(parse_file_name(name), None, "{name}");
        }
    }
}
