//! What the Messages API's image limits need from a base64 image without decoding it whole:
//! its decoded size, and its width and height read from the header (PNG, GIF, WebP, JPEG).
//! Only the bytes of the header are decoded, where they are.

/// The decoded length of base64 `data` (padding counted off; whitespace is not expected).
pub fn decoded_len(data: &[u8]) -> u64 {
    let pad = data.iter().rev().take(2).take_while(|&&b| b == b'=').count() as u64;
    (data.len() as u64 / 4 * 3 + [0, 0, 1, 2][data.len() % 4]).saturating_sub(pad)
}

fn sextet(b: u8) -> Option<u32> {
    Some(match b {
        b'A'..=b'Z' => b - b'A',
        b'a'..=b'z' => b - b'a' + 26,
        b'0'..=b'9' => b - b'0' + 52,
        b'+' | b'-' => 62,
        b'/' | b'_' => 63,
        _ => return None,
    } as u32)
}

/// Decoded bytes `start..start + len` of base64 `data` (fewer at its end or at a byte that is
/// not base64).
fn decode_at(data: &[u8], start: usize, len: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(len + 3);
    let mut group = start / 3 * 4;
    let skip = start % 3;
    while out.len() < len + skip {
        let Some(chunk) = data.get(group..group + 4) else { break };
        let mut n = 0u32;
        let mut got: usize = 0;
        for &c in chunk {
            match sextet(c) {
                Some(v) => {
                    n = n << 6 | v;
                    got += 1;
                }
                None => break,
            }
        }
        n <<= 6 * (4 - got) as u32;
        let bytes = [(n >> 16) as u8, (n >> 8) as u8, n as u8];
        out.extend_from_slice(&bytes[..got.saturating_sub(1).min(3)]);
        if got < 4 {
            break;
        }
        group += 4;
    }
    out.drain(..skip.min(out.len()));
    out.truncate(len);
    out
}

fn be16(b: &[u8], i: usize) -> Option<u32> {
    Some(u16::from_be_bytes(b.get(i..i + 2)?.try_into().ok()?) as u32)
}

fn le16(b: &[u8], i: usize) -> Option<u32> {
    Some(u16::from_le_bytes(b.get(i..i + 2)?.try_into().ok()?) as u32)
}

fn le24(b: &[u8], i: usize) -> Option<u32> {
    let s = b.get(i..i + 3)?;
    Some(s[0] as u32 | (s[1] as u32) << 8 | (s[2] as u32) << 16)
}

/// Width and height of a base64 PNG, GIF, WebP or JPEG image, from its header; `None` for
/// another format or a header that does not read.
pub fn dimensions(data: &[u8]) -> Option<(u32, u32)> {
    let head = decode_at(data, 0, 32);
    if head.starts_with(b"\x89PNG\r\n\x1a\n") {
        let w = u32::from_be_bytes(head.get(16..20)?.try_into().ok()?);
        let h = u32::from_be_bytes(head.get(20..24)?.try_into().ok()?);
        return Some((w, h));
    }
    if head.starts_with(b"GIF8") {
        return Some((le16(&head, 6)?, le16(&head, 8)?));
    }
    if head.starts_with(b"RIFF") && head.get(8..12) == Some(b"WEBP") {
        return match head.get(12..16)? {
            b"VP8X" => Some((le24(&head, 24)? + 1, le24(&head, 27)? + 1)),
            b"VP8L" => {
                let b = head.get(21..25)?;
                let bits = u32::from_le_bytes(b.try_into().ok()?);
                Some(((bits & 0x3fff) + 1, ((bits >> 14) & 0x3fff) + 1))
            }
            b"VP8 " => Some((le16(&head, 26)? & 0x3fff, le16(&head, 28)? & 0x3fff)),
            _ => None,
        };
    }
    if head.starts_with(b"\xff\xd8") {
        // Walk the segments to the first start-of-frame marker; each segment says its length.
        let mut at = 2usize;
        for _ in 0..4096 {
            let seg = decode_at(data, at, 9);
            if seg.len() < 4 || seg[0] != 0xff {
                return None;
            }
            let marker = seg[1];
            if marker == 0xff {
                at += 1;
                continue;
            }
            let is_sof = matches!(marker, 0xc0..=0xcf) && !matches!(marker, 0xc4 | 0xc8 | 0xcc);
            if is_sof {
                return Some((be16(&seg, 7)?, be16(&seg, 5)?));
            }
            at += 2 + be16(&seg, 2)? as usize;
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b64(bytes: &[u8]) -> Vec<u8> {
        const A: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        let mut out = Vec::new();
        for c in bytes.chunks(3) {
            let n = (c[0] as u32) << 16 | (*c.get(1).unwrap_or(&0) as u32) << 8 | *c.get(2).unwrap_or(&0) as u32;
            for i in 0..4 {
                out.push(if i <= c.len() { A[(n >> (18 - 6 * i) & 63) as usize] } else { b'=' });
            }
        }
        out
    }

    #[test]
    fn sizes_and_headers() {
        for n in 0..10 {
            assert_eq!(decoded_len(&b64(&vec![7u8; n])), n as u64);
        }
        let mut png = b"\x89PNG\r\n\x1a\n\0\0\0\x0dIHDR".to_vec();
        png.extend_from_slice(&8001u32.to_be_bytes());
        png.extend_from_slice(&600u32.to_be_bytes());
        png.extend_from_slice(&[8, 6, 0, 0, 0]);
        assert_eq!(dimensions(&b64(&png)), Some((8001, 600)));
        let gif = b"GIF89a\x10\x27\x20\x00\x00\x00";
        assert_eq!(dimensions(&b64(gif)), Some((10000, 32)));
        // JPEG: SOI, an APP0 segment of 16 bytes, then SOF0 with height 3000 and width 2100.
        let mut jpg = vec![0xff, 0xd8, 0xff, 0xe0, 0, 16];
        jpg.extend_from_slice(&[0; 14]);
        jpg.extend_from_slice(&[0xff, 0xc0, 0, 17, 8, 0x0b, 0xb8, 0x08, 0x34, 3]);
        jpg.extend_from_slice(&[0; 12]);
        assert_eq!(dimensions(&b64(&jpg)), Some((2100, 3000)));
        assert_eq!(dimensions(b"aGVsbG8gd29ybGQ="), None);
    }
}
