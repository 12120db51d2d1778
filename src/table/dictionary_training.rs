//! The data blocks a table builder holds back while it gathers samples to
//! train the table's zstd dictionary (`Options::bottommost_zstd_dictionary_bytes`):
//! every block of the table is compressed with the dictionary, so the
//! first ones wait until it exists.
//!
//! Owns: [`PendingBlocks`] and the bound on their memory.
//! Must never: hold more than [`PendingBlocks::limit`] bytes of blocks
//! (plus the one block that reaches it), or change a block or its order.

use crate::table::zstd_codec::train_dictionary;

/// Sample bytes gathered per dictionary byte: zstd's guidance is about a
/// hundred times the dictionary's size.
const SAMPLES_PER_DICTIONARY_BYTE: usize = 100;

/// The most bytes of blocks held back for training, whatever the
/// dictionary's size: the builder's memory for it.
pub const MAX_PENDING_BYTES: usize = 8 << 20;

/// A finished data block, uncompressed, and its index separator.
pub type HeldBlock = (Vec<u8>, Vec<u8>);

/// Finished data blocks waiting for the dictionary.
#[derive(Debug)]
pub struct PendingBlocks {
    blocks: Vec<HeldBlock>,
    bytes: usize,
    dictionary_bytes: usize,
}

impl PendingBlocks {
    /// Gathering for a dictionary of up to `dictionary_bytes`.
    pub fn new(dictionary_bytes: usize) -> PendingBlocks {
        PendingBlocks {
            blocks: Vec::new(),
            bytes: 0,
            dictionary_bytes,
        }
    }

    /// Bytes of blocks after which the dictionary is trained.
    pub fn limit(&self) -> usize {
        self.dictionary_bytes
            .saturating_mul(SAMPLES_PER_DICTIONARY_BYTE)
            .min(MAX_PENDING_BYTES)
    }

    /// Holds `block` (uncompressed) with its `separator`; true when the
    /// blocks held reach the limit.
    pub fn push(&mut self, block: Vec<u8>, separator: Vec<u8>) -> bool {
        self.bytes = self.bytes.saturating_add(block.len() + separator.len());
        self.blocks.push((block, separator));
        self.bytes >= self.limit()
    }

    /// Bytes held.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// The dictionary trained from every block held (`None` when zstd finds
    /// too little), and the blocks in order, to be written.
    pub fn train(self) -> (Option<Vec<u8>>, Vec<HeldBlock>) {
        let samples: Vec<&[u8]> = self.blocks.iter().map(|(b, _)| b.as_slice()).collect();
        (
            train_dictionary(&samples, self.dictionary_bytes),
            self.blocks,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_limit_bounds_what_is_held() {
        let mut pending = PendingBlocks::new(1024);
        assert_eq!(pending.limit(), 102_400);
        let mut full = false;
        let mut pushed = 0;
        while !full {
            full = pending.push(vec![b'x'; 4000], b"key".to_vec());
            pushed += 1;
        }
        assert_eq!(pushed, 26);
        assert!(pending.bytes() >= pending.limit());
        assert_eq!(PendingBlocks::new(1 << 20).limit(), MAX_PENDING_BYTES);
        let (_, blocks) = pending.train();
        assert_eq!(blocks.len(), 26);
    }
}
