//! Bytes on the command line: keys and values given as arguments (UTF-8,
//! or hex with `--hex`), and shown on stdout (lossy text, or hex).
//!
//! Owns: hex encoding and decoding, escaping, and writing to stdout so that
//! a reader that goes away (`siftdb scan DIR | head`) ends the output
//! quietly instead of panicking.
//! Must never: print a byte string so that two entries share a line — the
//! line-per-entry forms escape control characters.

use std::fmt::Write as _;
use std::io::{self, BufWriter, StdoutLock, Write};
use std::ops::Bound;

/// The bytes an argument stands for: its UTF-8 bytes, or with `hex` the
/// bytes its hex digits spell.
pub fn parse_arg(arg: &str, hex: bool, what: &str) -> Result<Vec<u8>, String> {
    if hex {
        from_hex(arg).map_err(|reason| format!("{what} {arg:?} is not hex: {reason}"))
    } else {
        Ok(arg.as_bytes().to_vec())
    }
}

/// A key range as its two owned bounds (a `RangeBounds<Vec<u8>>`).
pub type KeyRange = (Bound<Vec<u8>>, Bound<Vec<u8>>);

/// The key range of `--from A` (included) and `--to B` (excluded), either
/// left out for no bound, each decoded by [`parse_arg`].
pub fn key_range(from: Option<&str>, to: Option<&str>, hex: bool) -> Result<KeyRange, String> {
    let bound = |arg: Option<&str>, what, make: fn(Vec<u8>) -> Bound<Vec<u8>>| {
        arg.map(|a| parse_arg(a, hex, what).map(make))
            .transpose()
            .map(|b| b.unwrap_or(Bound::Unbounded))
    };
    Ok((
        bound(from, "--from", Bound::Included)?,
        bound(to, "--to", Bound::Excluded)?,
    ))
}

/// Decodes pairs of hex digits (either case); empty input is the empty string.
pub fn from_hex(text: &str) -> Result<Vec<u8>, String> {
    let digits = text.as_bytes();
    if !digits.len().is_multiple_of(2) {
        return Err(format!("{} digits, an odd count", digits.len()));
    }
    let digit = |c: u8| {
        (c as char)
            .to_digit(16)
            .ok_or_else(|| format!("{:?} is not a hex digit", c as char))
    };
    digits
        .chunks_exact(2)
        .map(|pair| match pair {
            [high, low] => u8::try_from(digit(*high)? * 16 + digit(*low)?)
                .map_err(|_| "two hex digits make one byte".to_string()),
            _ => Err("digits come in pairs".to_string()),
        })
        .collect()
}

/// Lower-case hex.
pub fn to_hex(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(out, "{b:02x}");
    }
    out
}

/// For a line of its own among others: hex, or lossy UTF-8 with control
/// characters escaped (`\n`, `\t`, `\u{1}`) so it cannot break the line.
pub fn show(bytes: &[u8], hex: bool) -> String {
    if hex {
        return to_hex(bytes);
    }
    let text = String::from_utf8_lossy(bytes);
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_control() {
            out.extend(c.escape_debug());
        } else {
            out.push(c);
        }
    }
    out
}

/// Buffered stdout whose writes report a closed pipe as "stop", not as an error.
pub struct Out {
    writer: BufWriter<StdoutLock<'static>>,
}

/// What a write to stdout came to.
pub enum Wrote {
    /// Written; keep going.
    Ok,
    /// The reader went away; stop writing and exit successfully.
    Closed,
}

impl Out {
    /// Locks stdout for the rest of the command.
    pub fn new() -> Out {
        Out {
            writer: BufWriter::new(io::stdout().lock()),
        }
    }

    /// Writes `line` and a newline.
    pub fn line(&mut self, line: &str) -> Result<Wrote, String> {
        let result = self
            .writer
            .write_all(line.as_bytes())
            .and_then(|()| self.writer.write_all(b"\n"));
        settle(result)
    }

    /// Flushes what is buffered.
    pub fn flush(&mut self) -> Result<Wrote, String> {
        settle(self.writer.flush())
    }
}

fn settle(result: io::Result<()>) -> Result<Wrote, String> {
    match result {
        Ok(()) => Ok(Wrote::Ok),
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Ok(Wrote::Closed),
        Err(e) => Err(format!("cannot write to stdout: {e}")),
    }
}

/// Writes every line, then flushes; stops quietly when the reader goes away.
pub fn print_lines(lines: &[String]) -> Result<(), String> {
    let mut out = Out::new();
    for line in lines {
        if let Wrote::Closed = out.line(line)? {
            return Ok(());
        }
    }
    out.flush().map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_round_trips_and_refuses_nonsense() {
        let bytes: Vec<u8> = (0..=255).collect();
        assert_eq!(from_hex(&to_hex(&bytes)), Ok(bytes));
        assert_eq!(from_hex("ABcd"), Ok(vec![0xab, 0xcd]));
        assert_eq!(from_hex(""), Ok(Vec::new()));
        assert!(from_hex("abc").is_err());
        assert_eq!(from_hex("0z"), Err("'z' is not a hex digit".to_string()));
        assert!(from_hex("é1").is_err());
    }

    #[test]
    fn shown_bytes_stay_on_one_line() {
        assert_eq!(show(b"a\tb\nc", false), "a\\tb\\nc");
        assert_eq!(show(b"caf\xc3\xa9 \xff", false), "café \u{fffd}");
        assert_eq!(show(b"\x01", true), "01");
        assert_eq!(show(b"\x1b[31mred", false), "\\u{1b}[31mred");
    }
}
