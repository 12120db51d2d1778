//! A snapshot: the state keyspace's table files at one log id, as a
//! directory on a node and as the byte stream a leader sends a follower.
//!
//! Owns: the format (format version 3, `docs/format.md`, "Snapshots"): a
//! checksummed header carrying openraft's snapshot metadata and one entry
//! per table file (its level, size, bounds, sequence numbers and CRC-32),
//! then each file's bytes in frames of at most [`FRAME_BYTES`], each frame
//! followed by its own CRC-32; the snapshot directory (`SNAPSHOT`, the
//! header's bytes, and `table-<i>.sst` per entry); [`SnapshotStream`], the
//! snapshot data openraft moves (a [`Sender`] reading a directory as the
//! stream, a [`Receiver`] writing a received stream into a directory); and
//! [`StreamDecoder`], the checking decoder of the stream.
//! Must never: hand a byte of a frame on before the frame's checksum
//! matched, call a file whole before its length and whole-file checksum
//! matched the header, allocate from a length it has not bounded, or panic
//! on any input.

use std::fs::File;
use std::io::{ErrorKind, Write};
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::task::{Context, Poll};

use openraft::SnapshotMeta;
use serde::{Deserialize, Serialize};

use crate::codec::{decode, encode, Error, Result};
use crate::node_id::NodeId;

const MAGIC: &[u8; 8] = b"SIFTSNAP";
/// The snapshot format version.
pub const VERSION: u32 = 3;
/// Bound on the encoded header body (metadata and table entries).
pub const MAX_META_BYTES: usize = 16 << 20;
/// Bytes of file per frame (the last frame of a file may be shorter).
pub(crate) const FRAME: usize = 1 << 20;
/// The frame size as a stream length.
pub const FRAME_BYTES: u64 = FRAME as u64;
/// Bytes of the checksum after each frame.
const FRAME_CRC_BYTES: u64 = 4;
/// The header's bytes in a snapshot directory.
pub const HEADER_FILE: &str = "SNAPSHOT";
const WHAT: &str = "snapshot";

/// The metadata type of a snapshot.
pub type Meta = SnapshotMeta<NodeId, openraft::BasicNode>;

/// One table file of a snapshot: its manifest record (as the exporting
/// node's database had it, the file number aside) and its checksum.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TableEntry {
    /// The level it sits at.
    pub level: u32,
    /// Its length in bytes.
    pub file_size: u64,
    /// Its entries.
    pub entries: u64,
    /// Its smallest internal key.
    pub smallest: Vec<u8>,
    /// Its largest internal key.
    pub largest: Vec<u8>,
    /// Its oldest sequence number.
    pub min_seq: u64,
    /// Its newest sequence number.
    pub max_seq: u64,
    /// CRC-32 of the whole file.
    pub crc32: u32,
}

/// The header of a snapshot.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Header {
    /// openraft's metadata: the last log id and membership it holds.
    pub meta: Meta,
    /// The table files, in stream order.
    pub tables: Vec<TableEntry>,
    /// The header's bytes, as sent and as stored in `SNAPSHOT`.
    pub bytes: Vec<u8>,
}

/// The name of table file `index` in a snapshot directory.
pub fn table_file(index: usize) -> String {
    format!("table-{index:06}.sst")
}

/// Bytes a file of `size` bytes takes in the stream (its frames with
/// their checksums).
fn framed_len(size: u64) -> u64 {
    size + size.div_ceil(FRAME_BYTES) * FRAME_CRC_BYTES
}

/// A header's bytes around an encoded `body` of `body_len` bytes: magic,
/// version, length, the body and the CRC-32 of all of it. The length is the
/// caller's, not `body.len()`, so the fuzz logic can also frame a body whose
/// length field lies.
pub(crate) fn framed_header(body: &[u8], body_len: u32) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(16 + body.len() + 4);
    bytes.extend_from_slice(MAGIC);
    bytes.extend_from_slice(&VERSION.to_le_bytes());
    bytes.extend_from_slice(&body_len.to_le_bytes());
    bytes.extend_from_slice(body);
    let crc = crc32fast::hash(&bytes);
    bytes.extend_from_slice(&crc.to_le_bytes());
    bytes
}

fn u32_le(bytes: &[u8]) -> Result<u32> {
    Ok(u32::from_le_bytes(
        bytes
            .try_into()
            .map_err(|_| Error::corruption(WHAT, "short field"))?,
    ))
}

impl Header {
    /// The header of a snapshot of `tables` with `meta`.
    pub fn new(meta: Meta, tables: Vec<TableEntry>) -> Result<Header> {
        let body = encode(&(&meta, &tables), "snapshot header")?;
        let body_len = u32::try_from(body.len())
            .ok()
            .filter(|&l| l as usize <= MAX_META_BYTES)
            .ok_or_else(|| Error::Encode {
                what: "snapshot header".into(),
                detail: format!("{} bytes", body.len()),
            })?;
        Ok(Header {
            meta,
            tables,
            bytes: framed_header(&body, body_len),
        })
    }

    /// The whole header's length once its first 16 bytes are known: checks
    /// the magic and version and bounds the body.
    fn len_from_prefix(prefix: &[u8; 16]) -> Result<usize> {
        let (magic, rest) = prefix.split_at(8);
        if magic != MAGIC {
            return Err(Error::corruption(WHAT, "bad magic"));
        }
        let (version, body_len) = rest.split_at(4);
        let version = u32_le(version)?;
        if version != VERSION {
            // A sender of another format version (its magic matched): the
            // engine's typed error naming both versions, not a corruption.
            return Err(Error::Db(siftdb::Error::UnsupportedVersion {
                path: PathBuf::from(HEADER_FILE),
                kind: "raft snapshot",
                found: u64::from(version),
                supported: u64::from(VERSION),
            }));
        }
        let body_len = u32_le(body_len)? as usize;
        if body_len > MAX_META_BYTES {
            return Err(Error::corruption(
                WHAT,
                format!("header body of {body_len} bytes exceeds {MAX_META_BYTES}"),
            ));
        }
        Ok(16 + body_len + 4)
    }

    /// Decodes and checks a whole header (exactly its bytes).
    pub fn parse(bytes: &[u8]) -> Result<Header> {
        let prefix: &[u8; 16] = bytes
            .first_chunk()
            .ok_or_else(|| Error::corruption(WHAT, "truncated header"))?;
        if Header::len_from_prefix(prefix)? != bytes.len() {
            return Err(Error::corruption(WHAT, "header length mismatch"));
        }
        let (covered, crc) = bytes
            .split_last_chunk::<4>()
            .ok_or_else(|| Error::corruption(WHAT, "truncated header"))?;
        if crc32fast::hash(covered) != u32::from_le_bytes(*crc) {
            return Err(Error::corruption(WHAT, "header checksum mismatch"));
        }
        let body = covered
            .get(16..)
            .ok_or_else(|| Error::corruption(WHAT, "truncated header"))?;
        let (meta, tables): (Meta, Vec<TableEntry>) = decode(body, "snapshot header")?;
        if tables.iter().any(|t| t.file_size == 0) {
            return Err(Error::corruption(WHAT, "an empty table file"));
        }
        Ok(Header {
            meta,
            tables,
            bytes: bytes.to_vec(),
        })
    }

    /// The stream's whole length: the header and every file's frames.
    pub fn stream_len(&self) -> u64 {
        self.tables.iter().fold(self.bytes.len() as u64, |n, t| {
            n.saturating_add(framed_len(t.file_size))
        })
    }

    /// Reads and checks the header of the snapshot directory `dir`.
    pub fn read_dir(dir: &Path) -> Result<Header> {
        let path = dir.join(HEADER_FILE);
        let bytes = std::fs::read(&path).map_err(|e| Error::io(&path, e))?;
        Header::parse(&bytes)
    }
}

/// What [`StreamDecoder::feed`] hands on.
#[derive(Debug)]
pub enum Event<'a> {
    /// The header, checked.
    Header(&'a Header),
    /// A frame of file `file`, checked.
    Data {
        /// The file's index.
        file: usize,
        /// The frame's bytes.
        bytes: &'a [u8],
    },
    /// File `file` is whole: its length and checksum matched the header.
    FileDone(usize),
}

enum Stage {
    /// Gathering the header (its length known once 16 bytes are in).
    Header(Vec<u8>),
    /// In file `file`, `done` of its bytes checked.
    Body {
        header: Header,
        file: usize,
        done: u64,
        file_crc: crc32fast::Hasher,
        frame: Vec<u8>,
    },
    /// Every file whole.
    End(Header),
    /// A check failed: nothing more is accepted.
    Failed,
}

/// The checking decoder of a snapshot stream: bytes in, in order, any
/// split; checked pieces out.
pub struct StreamDecoder {
    stage: Stage,
}

impl Default for StreamDecoder {
    fn default() -> Self {
        StreamDecoder::new()
    }
}

impl StreamDecoder {
    /// A decoder at the start of a stream.
    pub fn new() -> StreamDecoder {
        StreamDecoder {
            stage: Stage::Header(Vec::new()),
        }
    }

    /// The header and whether every file is whole (`None` before the
    /// header is in).
    pub fn header(&self) -> Option<(&Header, bool)> {
        match &self.stage {
            Stage::Body { header, .. } => Some((header, false)),
            Stage::End(header) => Some((header, true)),
            Stage::Header(_) | Stage::Failed => None,
        }
    }

    /// Takes the next bytes of the stream, handing each checked piece to
    /// `on` as it completes. After an error (its own or `on`'s) every
    /// later call fails.
    pub fn feed(
        &mut self,
        input: &[u8],
        on: &mut dyn FnMut(Event<'_>) -> Result<()>,
    ) -> Result<()> {
        let result = self.feed_inner(input, on);
        if result.is_err() {
            self.stage = Stage::Failed;
        }
        result
    }

    fn feed_inner(
        &mut self,
        mut input: &[u8],
        on: &mut dyn FnMut(Event<'_>) -> Result<()>,
    ) -> Result<()> {
        while !input.is_empty() {
            match &mut self.stage {
                Stage::Failed => {
                    return Err(Error::corruption(WHAT, "the stream already failed a check"))
                }
                Stage::End(_) => return Err(Error::corruption(WHAT, "bytes after the last file")),
                Stage::Header(buf) => {
                    let want = match buf.first_chunk::<16>() {
                        Some(prefix) => Header::len_from_prefix(prefix)?,
                        None => 16,
                    };
                    let take = want.saturating_sub(buf.len()).min(input.len());
                    let (head, rest) = input.split_at(take);
                    buf.extend_from_slice(head);
                    input = rest;
                    // The prefix is checked (and the length bounded) as
                    // soon as it is in.
                    let want = match buf.first_chunk::<16>() {
                        Some(prefix) => Header::len_from_prefix(prefix)?,
                        None => 16,
                    };
                    if buf.len() == want {
                        let header = Header::parse(buf)?;
                        on(Event::Header(&header))?;
                        self.stage = if header.tables.is_empty() {
                            Stage::End(header)
                        } else {
                            Stage::Body {
                                header,
                                file: 0,
                                done: 0,
                                file_crc: crc32fast::Hasher::new(),
                                frame: Vec::new(),
                            }
                        };
                    }
                }
                Stage::Body {
                    header,
                    file,
                    done,
                    file_crc,
                    frame,
                } => {
                    let entry = header
                        .tables
                        .get(*file)
                        .ok_or_else(|| Error::corruption(WHAT, "file index out of range"))?;
                    let payload = (entry.file_size - *done).min(FRAME_BYTES);
                    // At most FRAME_BYTES + 4: bounded whatever the header says.
                    let want = usize::try_from(payload + FRAME_CRC_BYTES)
                        .map_err(|_| Error::corruption(WHAT, "frame length"))?;
                    let take = want.saturating_sub(frame.len()).min(input.len());
                    let (head, rest) = input.split_at(take);
                    frame.extend_from_slice(head);
                    input = rest;
                    if frame.len() < want {
                        continue;
                    }
                    let (bytes, crc) = frame
                        .split_last_chunk::<4>()
                        .ok_or_else(|| Error::corruption(WHAT, "short frame"))?;
                    if crc32fast::hash(bytes) != u32::from_le_bytes(*crc) {
                        return Err(Error::corruption(
                            WHAT,
                            format!("frame checksum mismatch in file {file} at byte {done}"),
                        ));
                    }
                    file_crc.update(bytes);
                    *done += payload;
                    on(Event::Data { file: *file, bytes })?;
                    frame.clear();
                    if *done == entry.file_size {
                        let crc = std::mem::take(file_crc).finalize();
                        if crc != entry.crc32 {
                            return Err(Error::corruption(
                                WHAT,
                                format!("file {file}: whole-file checksum mismatch"),
                            ));
                        }
                        on(Event::FileDone(*file))?;
                        *file += 1;
                        *done = 0;
                        if *file == header.tables.len() {
                            let Stage::Body { header, .. } =
                                std::mem::replace(&mut self.stage, Stage::Failed)
                            else {
                                return Err(Error::corruption(WHAT, "decoder state"));
                            };
                            self.stage = Stage::End(header);
                        }
                    }
                }
            }
        }
        Ok(())
    }
}

/// One positioned read of up to `buf.len()` bytes at `offset` (on Windows
/// it also moves the handle's cursor, which nothing here uses).
fn read_at(file: &File, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
    #[cfg(unix)]
    {
        std::os::unix::fs::FileExt::read_at(file, buf, offset)
    }
    #[cfg(windows)]
    {
        std::os::windows::fs::FileExt::seek_read(file, buf, offset)
    }
}

/// Fills `buf` from `offset`; past the end an error of kind `UnexpectedEof`.
fn read_exact_at(file: &File, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
    let mut done = 0usize;
    while let Some(rest) = buf.get_mut(done..).filter(|rest| !rest.is_empty()) {
        match read_at(file, rest, offset.saturating_add(done as u64)) {
            Ok(0) => return Err(ErrorKind::UnexpectedEof.into()),
            Ok(n) => done += n,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// CRC-32 of the whole file at `path`.
pub fn file_crc32(path: &Path) -> Result<u32> {
    let file = File::open(path).map_err(|e| Error::io(path, e))?;
    let mut hasher = crc32fast::Hasher::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut offset = 0u64;
    loop {
        let n = read_at(&file, &mut buf, offset).map_err(|e| Error::io(path, e))?;
        let Some(read) = buf.get(..n).filter(|r| !r.is_empty()) else {
            break;
        };
        hasher.update(read);
        offset += n as u64;
    }
    Ok(hasher.finalize())
}

/// Reads a snapshot directory as its stream. Reads are plain blocking
/// reads of at most one frame (page cache or disk) on the calling task.
pub struct Sender {
    header: Header,
    files: Vec<File>,
    /// Where each file's frames start in the stream.
    starts: Vec<u64>,
    len: u64,
    pos: u64,
    /// The frame last read (payload and checksum) and where it starts.
    frame: Vec<u8>,
    frame_at: Option<u64>,
}

impl Sender {
    /// Opens the snapshot directory `dir` for sending.
    pub fn open(dir: &Path) -> Result<Sender> {
        let header = Header::read_dir(dir)?;
        let mut files = Vec::with_capacity(header.tables.len());
        let mut starts = Vec::with_capacity(header.tables.len());
        let mut at = header.bytes.len() as u64;
        for (i, entry) in header.tables.iter().enumerate() {
            let path = dir.join(table_file(i));
            let file = File::open(&path).map_err(|e| Error::io(&path, e))?;
            let len = file.metadata().map_err(|e| Error::io(&path, e))?.len();
            if len != entry.file_size {
                return Err(Error::corruption(
                    path.display(),
                    format!("{len} bytes, the snapshot header says {}", entry.file_size),
                ));
            }
            files.push(file);
            starts.push(at);
            at += framed_len(entry.file_size);
        }
        Ok(Sender {
            len: header.stream_len(),
            header,
            files,
            starts,
            pos: 0,
            frame: Vec::new(),
            frame_at: None,
        })
    }

    /// The snapshot's header.
    pub fn header(&self) -> &Header {
        &self.header
    }

    /// Copies stream bytes from the current position into `out`; returns
    /// how many (0 at the end).
    fn read_some(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        let header_len = self.header.bytes.len() as u64;
        if self.pos >= self.len || out.is_empty() {
            return Ok(0);
        }
        if self.pos < header_len {
            let from = self
                .header
                .bytes
                .get(usize::try_from(self.pos).unwrap_or(usize::MAX)..)
                .unwrap_or_default();
            let n = from.len().min(out.len());
            out.get_mut(..n)
                .unwrap_or_default()
                .copy_from_slice(from.get(..n).unwrap_or_default());
            self.pos += n as u64;
            return Ok(n);
        }
        // The file holding the position, and the frame within it.
        let file = self
            .starts
            .partition_point(|&s| s <= self.pos)
            .saturating_sub(1);
        let (Some(&start), Some(entry)) = (self.starts.get(file), self.header.tables.get(file))
        else {
            return Ok(0);
        };
        let frame_len = FRAME_BYTES + FRAME_CRC_BYTES;
        let frame_index = (self.pos - start) / frame_len;
        let frame_start = start + frame_index * frame_len;
        if self.frame_at != Some(frame_start) {
            let offset = frame_index * FRAME_BYTES;
            let payload = usize::try_from(entry.file_size.saturating_sub(offset))
                .map_or(FRAME, |n| n.min(FRAME));
            self.frame.clear();
            self.frame.resize(payload, 0);
            let f = self
                .files
                .get(file)
                .ok_or_else(|| std::io::Error::new(ErrorKind::InvalidInput, "file index"))?;
            read_exact_at(f, &mut self.frame, offset)?;
            let crc = crc32fast::hash(&self.frame);
            self.frame.extend_from_slice(&crc.to_le_bytes());
            self.frame_at = Some(frame_start);
        }
        let within = usize::try_from(self.pos - frame_start).unwrap_or(usize::MAX);
        let from = self.frame.get(within..).unwrap_or_default();
        let n = from.len().min(out.len());
        out.get_mut(..n)
            .unwrap_or_default()
            .copy_from_slice(from.get(..n).unwrap_or_default());
        self.pos += n as u64;
        Ok(n)
    }
}

/// Writes a received stream into a snapshot directory, checking it as it
/// comes (see [`StreamDecoder`]). A write at a position before the end of
/// what was received (openraft sends a chunk again when its answer was
/// lost) skips the bytes already taken: a snapshot's stream never changes.
/// Writes are plain blocking writes on the calling task. Dropped unfinished
/// (or not taken by [`Receiver::finish`]), it removes its directory.
pub struct Receiver {
    dir: PathBuf,
    decoder: StreamDecoder,
    received: u64,
    pos: u64,
    open: Option<(usize, File)>,
    keep: bool,
}

impl Receiver {
    /// Starts receiving into the new directory `dir`.
    pub fn create(dir: PathBuf) -> Result<Receiver> {
        std::fs::create_dir(&dir).map_err(|e| Error::io(&dir, e))?;
        Ok(Receiver {
            dir,
            decoder: StreamDecoder::new(),
            received: 0,
            pos: 0,
            open: None,
            keep: false,
        })
    }

    fn write_some(&mut self, buf: &[u8]) -> Result<()> {
        if self.pos > self.received {
            return Err(Error::corruption(
                WHAT,
                format!(
                    "a write at byte {} after only {} were received",
                    self.pos, self.received
                ),
            ));
        }
        let skip = usize::try_from(self.received - self.pos)
            .unwrap_or(usize::MAX)
            .min(buf.len());
        let fresh = buf.get(skip..).unwrap_or_default();
        let dir = &self.dir;
        let open = &mut self.open;
        self.decoder.feed(fresh, &mut |event| match event {
            Event::Header(header) => {
                let path = dir.join(HEADER_FILE);
                let mut f = File::create(&path).map_err(|e| Error::io(&path, e))?;
                f.write_all(&header.bytes)
                    .and_then(|()| f.sync_all())
                    .map_err(|e| Error::io(&path, e))
            }
            Event::Data { file, bytes } => {
                let path = dir.join(table_file(file));
                if open.as_ref().is_none_or(|(i, _)| *i != file) {
                    let f = File::create(&path).map_err(|e| Error::io(&path, e))?;
                    *open = Some((file, f));
                }
                let (_, f) = open
                    .as_mut()
                    .ok_or_else(|| Error::corruption(WHAT, "no open file"))?;
                f.write_all(bytes).map_err(|e| Error::io(&path, e))
            }
            Event::FileDone(file) => {
                let path = dir.join(table_file(file));
                if let Some((_, f)) = open.take() {
                    f.sync_all().map_err(|e| Error::io(&path, e))?;
                }
                Ok(())
            }
        })?;
        self.pos += buf.len() as u64;
        self.received = self.received.max(self.pos);
        Ok(())
    }

    /// The directory and header of a stream received whole (every file
    /// synced, the directory too); the directory is the caller's from now
    /// on.
    pub fn finish(mut self) -> Result<(PathBuf, Header)> {
        let header = match self.decoder.header() {
            Some((header, true)) => header.clone(),
            _ => return Err(Error::corruption(WHAT, "the stream ended early")),
        };
        crate::fs_util::sync_dir(&self.dir)?;
        self.keep = true;
        Ok((self.dir.clone(), header))
    }
}

/// Receives the whole stream of `sender` into the new directory `dir`
/// (a snapshot handed over in one piece rather than sent).
pub fn receive_whole(mut sender: Sender, dir: PathBuf) -> Result<Box<Receiver>> {
    let mut receiver = Receiver::create(dir)?;
    sender.pos = 0;
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = sender
            .read_some(&mut buf)
            .map_err(|e| Error::io_in("snapshot", e))?;
        let Some(read) = buf.get(..n).filter(|r| !r.is_empty()) else {
            break;
        };
        receiver.write_some(read)?;
    }
    Ok(Box::new(receiver))
}

impl Drop for Receiver {
    fn drop(&mut self) {
        if !self.keep {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// openraft's snapshot data: a snapshot being sent or being received.
pub enum SnapshotStream {
    /// Read by a leader's replication.
    Send(Box<Sender>),
    /// Written by a follower's receiving side.
    Receive(Box<Receiver>),
}

impl std::fmt::Debug for SnapshotStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SnapshotStream::Send(s) => write!(f, "Send({})", s.header.meta.snapshot_id),
            SnapshotStream::Receive(r) => write!(f, "Receive({})", r.dir.display()),
        }
    }
}

fn wrong_way(what: &str) -> std::io::Error {
    std::io::Error::new(ErrorKind::Unsupported, format!("snapshot stream: {what}"))
}

impl tokio::io::AsyncRead for SnapshotStream {
    fn poll_read(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let SnapshotStream::Send(sender) = self.get_mut() else {
            return Poll::Ready(Err(wrong_way("a receiving snapshot is not read")));
        };
        let n = sender.read_some(buf.initialize_unfilled())?;
        buf.advance(n);
        Poll::Ready(Ok(()))
    }
}

impl tokio::io::AsyncWrite for SnapshotStream {
    fn poll_write(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let SnapshotStream::Receive(receiver) = self.get_mut() else {
            return Poll::Ready(Err(wrong_way("a sending snapshot is not written")));
        };
        Poll::Ready(
            receiver
                .write_some(buf)
                .map(|()| buf.len())
                .map_err(|e| std::io::Error::new(ErrorKind::InvalidData, e.to_string())),
        )
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

impl tokio::io::AsyncSeek for SnapshotStream {
    fn start_seek(self: Pin<&mut Self>, position: std::io::SeekFrom) -> std::io::Result<()> {
        use std::io::SeekFrom;
        match self.get_mut() {
            SnapshotStream::Send(s) => {
                s.pos = match position {
                    SeekFrom::Start(p) => p,
                    SeekFrom::End(d) => s.len.saturating_add_signed(d),
                    SeekFrom::Current(d) => s.pos.saturating_add_signed(d),
                };
            }
            SnapshotStream::Receive(r) => match position {
                SeekFrom::Start(p) => r.pos = p,
                SeekFrom::Current(d) => r.pos = r.pos.saturating_add_signed(d),
                SeekFrom::End(_) => return Err(wrong_way("a receiving snapshot has no end yet")),
            },
        }
        Ok(())
    }

    fn poll_complete(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<u64>> {
        Poll::Ready(Ok(match self.get_mut() {
            SnapshotStream::Send(s) => s.pos,
            SnapshotStream::Receive(r) => r.pos,
        }))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use openraft::{CommittedLeaderId, LogId, Membership, StoredMembership};

    use super::*;

    fn meta() -> Meta {
        let log_id = LogId::new(CommittedLeaderId::new(3, 1), 42);
        Meta {
            last_log_id: Some(log_id),
            last_membership: StoredMembership::new(
                Some(log_id),
                Membership::new(vec![BTreeSet::from([1, 2, 3])], None),
            ),
            snapshot_id: "3-1-42-7".into(),
        }
    }

    fn entry(bytes: &[u8]) -> TableEntry {
        TableEntry {
            level: 1,
            file_size: bytes.len() as u64,
            entries: 1,
            smallest: b"a".to_vec(),
            largest: b"z".to_vec(),
            min_seq: 1,
            max_seq: 2,
            crc32: crc32fast::hash(bytes),
        }
    }

    /// A stream of `files` (built by hand, as a sender frames them).
    fn stream(files: &[Vec<u8>]) -> (Header, Vec<u8>) {
        let header = Header::new(meta(), files.iter().map(|f| entry(f)).collect()).unwrap();
        let mut out = header.bytes.clone();
        for f in files {
            for frame in f.chunks(FRAME) {
                out.extend_from_slice(frame);
                out.extend_from_slice(&crc32fast::hash(frame).to_le_bytes());
            }
        }
        (header, out)
    }

    fn decode_all(bytes: &[u8], split: usize) -> Result<(Vec<Vec<u8>>, bool)> {
        let mut d = StreamDecoder::new();
        let mut files: Vec<Vec<u8>> = Vec::new();
        for piece in bytes.chunks(split.max(1)) {
            d.feed(piece, &mut |e| {
                match e {
                    Event::Data { file, bytes } => {
                        if files.len() <= file {
                            files.resize(file + 1, Vec::new());
                        }
                        files[file].extend_from_slice(bytes);
                    }
                    Event::Header(_) | Event::FileDone(_) => {}
                }
                Ok(())
            })?;
        }
        Ok((files, d.header().is_some_and(|(_, whole)| whole)))
    }

    #[test]
    fn round_trip_in_any_split() {
        let files = vec![vec![7u8; FRAME * 2 + 5], b"small".to_vec()];
        let (header, bytes) = stream(&files);
        assert_eq!(header.stream_len(), bytes.len() as u64);
        assert_eq!(Header::parse(&header.bytes).unwrap(), header);
        for split in [1 << 20, 4096, 777] {
            let (got, whole) = decode_all(&bytes, split).unwrap();
            assert!(whole);
            assert_eq!(got, files);
        }
    }

    #[test]
    fn every_flipped_bit_and_every_truncation_is_caught() {
        let (_, bytes) = stream(&[b"key-value-table".to_vec(), b"x".to_vec()]);
        for bit in 0..bytes.len() * 8 {
            let mut b = bytes.clone();
            b[bit / 8] ^= 1 << (bit % 8);
            assert!(
                !matches!(decode_all(&b, 7), Ok((_, true))),
                "bit {bit} went unnoticed"
            );
        }
        for len in 0..bytes.len() {
            assert!(!decode_all(&bytes[..len], 5).unwrap().1, "len {len}");
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(decode_all(&longer, 64).is_err());
    }

    #[test]
    fn a_huge_header_length_is_refused_before_allocating() {
        let mut bytes = MAGIC.to_vec();
        bytes.extend_from_slice(&VERSION.to_le_bytes());
        bytes.extend_from_slice(&u32::MAX.to_le_bytes());
        let err = decode_all(&bytes, 64).unwrap_err();
        assert!(err.to_string().contains("exceeds"), "{err}");
    }

    /// A sender reads a directory as the same stream, from any position.
    #[test]
    fn sender_reads_the_stream() {
        let dir = tempfile::tempdir().unwrap();
        let files = vec![vec![3u8; FRAME + 9], b"tail".to_vec()];
        let (header, bytes) = stream(&files);
        std::fs::write(dir.path().join(HEADER_FILE), &header.bytes).unwrap();
        for (i, f) in files.iter().enumerate() {
            std::fs::write(dir.path().join(table_file(i)), f).unwrap();
        }
        let mut sender = Sender::open(dir.path()).unwrap();
        let mut out = Vec::new();
        let mut buf = vec![0u8; 300_001];
        loop {
            let n = sender.read_some(&mut buf).unwrap();
            if n == 0 {
                break;
            }
            out.extend_from_slice(&buf[..n]);
        }
        assert_eq!(out, bytes);
        sender.pos = 100;
        let n = sender.read_some(&mut buf[..10]).unwrap();
        assert_eq!(&buf[..n], &bytes[100..110]);
    }
}
