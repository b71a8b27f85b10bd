//! What identifies a watched file's content besides its (device, inode): its first KiB (the
//! head hash) and a fingerprint of the bytes just before the read offset. A file whose head or
//! fingerprint no longer match was replaced or rewritten, not appended to; the same inode with
//! matching content on a new device number is the same file (a remount).

/// How many leading bytes identify a file's content.
pub const HEAD_LEN: u64 = 1024;

/// How many bytes before the read offset fingerprint it.
pub const FP_LEN: usize = 1024;

/// A hash of the bytes just before `end`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fingerprint {
    /// Where the hashed bytes end (the read offset when it was taken).
    pub end: u64,
    /// How many bytes it covers.
    pub len: u64,
    /// Their xxh3 hash.
    pub hash: u64,
}

/// Keeps what identifies the file of `chunk`, read at `offset`: the first KiB (while `head` is
/// short of it) and the last bytes read (for the fingerprint).
pub fn note_read(head_buf: &mut Vec<u8>, head: Option<(u64, u64)>, ring: &mut Vec<u8>, offset: u64, chunk: &[u8]) {
    note_head(head_buf, head, offset, chunk);
    let n = chunk.len();
    if n >= FP_LEN {
        ring.clear();
        ring.extend_from_slice(&chunk[n - FP_LEN..]);
    } else {
        ring.extend_from_slice(chunk);
        let excess = ring.len().saturating_sub(FP_LEN);
        ring.drain(..excess);
    }
}

/// Keeps the first KiB of the file from `chunk`, read at `offset`, while `head` is short of it.
pub fn note_head(head_buf: &mut Vec<u8>, head: Option<(u64, u64)>, offset: u64, chunk: &[u8]) {
    if offset < HEAD_LEN && head.is_none_or(|(_, len)| len < HEAD_LEN) {
        let take = ((HEAD_LEN - offset) as usize).min(chunk.len());
        if head_buf.len() as u64 == offset {
            head_buf.extend_from_slice(&chunk[..take]);
        }
    }
}
