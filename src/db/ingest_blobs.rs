//! Separated values in bulk load: the blob file a [`TableWriter`] writes
//! beside its table (values at or above `Options::blob_threshold`), and
//! how an ingest brings it into the database.
//!
//! A `TableWriter` with a threshold writes each large put's value to one
//! blob file in the table's directory, named by a number no file there
//! has (`NNNNNN.blob`), and the table holds pointers into it. The ingest
//! (of that table, by its path) finds the blob file through the table's
//! properties, checks it whole, and copies it into the database under the
//! table's new number — its records byte for byte, its header and footer
//! written anew for that number — and rewrites the table with its pointers
//! renamed to that number (offsets, lengths and checksums are unchanged).
//! With `IngestOptions::move_files` the caller's blob file is removed with
//! the table once the ingest is installed.
//!
//! Owns: `WriterBlobs` (the writer's side), the copy of an ingested blob
//! file and the rewrite of a table's pointers.
//! Must never: let a pointer name a blob file other than the one holding
//! its value, leave a copied blob file behind when the ingest fails, or
//! write to the caller's files.
//!
//! [`TableWriter`]: crate::TableWriter

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::blob::format::{encode_footer, encode_header, BlobCounts, BLOB_FOOTER_LEN};
use crate::blob::reader::checked_records;
use crate::blob::{blob_file_name, BlobFileInfo, BlobPointer, BlobWriter};
use crate::error::{Error, Result};
use crate::fs::{FileSystem, SharedFs};
use crate::key::{internal_key, parse_internal_key, SeqNo, ValueKind};
use crate::table::{ScanMode, Table, TableBuilder, TableOptions};

/// Tells apart the blob files of writers in one process.
static NEXT_WRITER_BLOB: AtomicU64 = AtomicU64::new(0);

/// The blob file of one `TableWriter`, created on its first large value,
/// removed when dropped unfinished.
pub(crate) struct WriterBlobs {
    fs: SharedFs,
    dir: PathBuf,
    threshold: Option<usize>,
    writer: Option<BlobWriter>,
    /// The file created, removed on drop unless `finish` kept it.
    path: Option<PathBuf>,
    kept: bool,
}

impl WriterBlobs {
    /// Values of at least `threshold` bytes (`None`: none) go to a blob
    /// file in `dir`.
    pub(crate) fn new(fs: SharedFs, dir: &Path, threshold: Option<usize>) -> WriterBlobs {
        WriterBlobs {
            fs,
            dir: dir.to_path_buf(),
            threshold,
            writer: None,
            path: None,
            kept: false,
        }
    }

    /// The pointer a put of `value` under `user_key` becomes, or `None`
    /// when it stays inline.
    pub(crate) fn separate(
        &mut self,
        user_key: &[u8],
        value: &[u8],
    ) -> Result<Option<BlobPointer>> {
        if self.threshold.is_none_or(|t| value.len() < t) {
            return Ok(None);
        }
        let writer = match &mut self.writer {
            Some(writer) => writer,
            None => {
                let (path, number) = self.free_name()?;
                let created = BlobWriter::create(self.fs.as_ref(), &path, number);
                self.path = Some(path);
                self.writer.insert(created?)
            }
        };
        writer.add(user_key, value).map(Some)
    }

    /// A blob file name in the directory no file has: numbers far above a
    /// database's own, from the process id and a counter.
    fn free_name(&self) -> Result<(PathBuf, u64)> {
        let base = (1u64 << 40) | (u64::from(std::process::id()) << 16);
        for _ in 0..1000 {
            let number = base | (NEXT_WRITER_BLOB.fetch_add(1, Ordering::Relaxed) & 0xffff);
            let path = self.dir.join(blob_file_name(number));
            if !self.fs.exists(&path) {
                return Ok((path, number));
            }
        }
        Err(Error::invalid(format!(
            "no free blob file name in {}",
            self.dir.display()
        )))
    }

    /// Finishes (writes the footer of and syncs) the blob file, if one was
    /// started: before the table that points into it is finished.
    pub(crate) fn finish(&mut self) -> Result<()> {
        if let Some(writer) = self.writer.take() {
            writer.finish()?;
        }
        Ok(())
    }

    /// Keeps the blob file when dropped (the table was finished).
    pub(crate) fn keep(&mut self) {
        self.kept = true;
    }
}

impl Drop for WriterBlobs {
    fn drop(&mut self) {
        self.writer = None;
        if let (false, Some(path)) = (self.kept, &self.path) {
            let _ = self.fs.remove(path);
        }
    }
}

/// The blob files a table to be ingested points into, in its directory.
pub(crate) fn source_blob_files(table: &Table, table_path: &Path) -> Vec<(u64, PathBuf)> {
    let dir = table_path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    table
        .properties()
        .blob_files
        .iter()
        .map(|&n| (n, dir.join(blob_file_name(n))))
        .collect()
}

/// Copies the blob file at `from` to `to` as blob file `number`: checked
/// whole first, its records byte for byte, header and footer written for
/// `number`; synced. Returns the copy's figures, which the manifest
/// records beside the table (the garbage collection's by-share base).
pub(crate) fn copy_blob_file(
    fs: &dyn FileSystem,
    from: &Path,
    to: &Path,
    number: u64,
) -> Result<BlobFileInfo> {
    let bytes = fs.read_all(from)?;
    let records = checked_records(&bytes, from)?;
    let counts = BlobCounts {
        records: records.len() as u64,
        value_bytes: records.iter().map(|r| r.value.len() as u64).sum(),
    };
    let header = encode_header(number);
    let body = bytes
        .get(header.len()..bytes.len().saturating_sub(BLOB_FOOTER_LEN))
        .unwrap_or_default();
    let written = (|| {
        let mut file = fs.create(to)?;
        file.append(&header)?;
        file.append(body)?;
        file.append(&encode_footer(&header, counts))?;
        file.sync()
    })();
    if written.is_err() {
        let _ = fs.remove(to);
    }
    written?;
    Ok(BlobFileInfo {
        number,
        file_size: (header.len() + body.len() + BLOB_FOOTER_LEN) as u64,
        records: counts.records,
        value_bytes: counts.value_bytes,
    })
}

/// Writes `table`'s entries to `to` at sequence number `seq`, its blob
/// pointers kept but renamed by `numbers` (old blob file → new).
pub(crate) fn rewrite_with_blob_numbers(
    fs: &dyn FileSystem,
    table: &Table,
    to: &Path,
    options: &TableOptions,
    seq: SeqNo,
    numbers: &BTreeMap<u64, u64>,
) -> Result<()> {
    let built = (|| {
        let mut builder = TableBuilder::create(fs, to, options)?;
        let mut iter = table.iter_with(ScanMode::Sequential).keep_blob_pointers();
        iter.seek_to_first()?;
        while iter.valid() {
            let parsed = parse_internal_key(iter.key())?;
            let key = internal_key(parsed.user_key, seq, parsed.kind);
            if parsed.kind == ValueKind::Blob {
                let mut pointer = BlobPointer::decode(&iter.value())?;
                pointer.file_number = *numbers.get(&pointer.file_number).ok_or_else(|| {
                    Error::corruption(
                        "ingested table",
                        format!(
                            "a pointer names blob file {}, which its properties do not list",
                            pointer.file_number
                        ),
                    )
                })?;
                builder.add(&key, &pointer.encode())?;
            } else {
                builder.add(&key, &iter.value())?;
            }
            iter.next()?;
        }
        builder.finish().map(|_| ())
    })();
    if built.is_err() {
        let _ = fs.remove(to);
    }
    built
}
