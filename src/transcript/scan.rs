//! A validating, borrowing JSON scanner for the hot path.
//!
//! `check` must read every line in full (a line that is not JSON is a finding) but needs only a
//! handful of fields from it, while most of a line is long strings (tool output) full of escapes.
//! serde_json validates such strings at well under 1 GB/s; this scanner reads long strings 64
//! bytes at a time with SSE2 and finds their escapes without a branch per byte (simdjson's
//! odd-run trick, then one vector test that every escaped byte is a valid escape). It validates
//! the grammar completely (RFC 8259: strings, escapes, numbers, literals, nesting) and hands the
//! fields a caller asks for back as borrowed raw strings.
//!
//! The line must already be valid UTF-8 (the caller checks it once, with SIMD). Validity agrees
//! with serde_json on every input (a differential property test in this module proves it); for
//! the *message* of a malformed line, the caller asks serde_json, which names what it saw.
//!
//! Usage: callers walk an object with [`Scanner::object`], deciding per key whether to read the
//! value ([`Scanner::string`], a nested [`Scanner::object`], ...) or skip it
//! ([`Scanner::skip`]). Every value must be consumed exactly once.

use std::borrow::Cow;

/// Nesting deeper than this is rejected (serde_json's limit is 128).
pub const MAX_DEPTH: u32 = 128;

/// The deepest nesting of objects and arrays in `b` (strings skipped), for saying why a line
/// was rejected; it does not validate.
pub fn nesting_depth(b: &[u8]) -> usize {
    let (mut depth, mut max, mut in_string, mut escaped) = (0usize, 0usize, false, false);
    for &c in b {
        if in_string {
            match c {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match c {
            b'"' => in_string = true,
            b'{' | b'[' => {
                depth += 1;
                max = max.max(depth);
            }
            b'}' | b']' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    max
}

/// The input is not valid JSON. Carries only where; serde_json says what.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Invalid {
    /// Byte offset where the scanner gave up.
    pub at: usize,
}

/// Result of a scanning step.
pub type Result<T> = std::result::Result<T, Invalid>;

/// The JSON type of the next value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `{`
    Object,
    /// `[`
    Array,
    /// `"`
    String,
    /// A number.
    Number,
    /// `true` / `false`
    Bool,
    /// `null`
    Null,
}

/// A JSON string as it appears in the input, escapes not decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RawStr<'a> {
    raw: &'a [u8],
    escaped: bool,
}

impl<'a> RawStr<'a> {
    /// Whether the string equals `s` (escapes decoded).
    pub fn is(&self, s: &str) -> bool {
        if self.escaped {
            self.decode() == s
        } else {
            self.raw == s.as_bytes()
        }
    }

    /// The decoded string, borrowed when it has no escapes.
    pub fn decode(&self) -> Cow<'a, str> {
        if !self.escaped {
            // The caller validated the line as UTF-8, and a string body without escapes is a
            // sub-slice of it that starts and ends at ASCII quotes.
            if self.raw.is_ascii() {
                // SAFETY: ASCII bytes are UTF-8. (Ids, names and roles are ASCII: checking
                // that word by word is cheaper than the general check below.)
                return Cow::Borrowed(unsafe { std::str::from_utf8_unchecked(self.raw) });
            }
            return Cow::Borrowed(std::str::from_utf8(self.raw).unwrap_or(""));
        }
        Cow::Owned(unescape(self.raw))
    }

    /// Whether the decoded string is whitespace only, judged without decoding it.
    pub fn is_blank(&self) -> bool {
        raw_string_is_blank(self.raw)
    }

    /// [`id_hash`](crate::transcript::model::id_hash) of the decoded string, without decoding
    /// it when it has no escapes.
    pub fn hash(&self) -> u64 {
        if self.escaped {
            crate::transcript::model::id_hash(&self.decode())
        } else {
            xxhash_rust::xxh3::xxh3_64(self.raw)
        }
    }

    /// The string as a key to match on: the raw bytes, decoded only if it has escapes.
    #[inline]
    pub fn key(&self) -> Cow<'a, [u8]> {
        if self.escaped {
            Cow::Owned(unescape(self.raw).into_bytes())
        } else {
            Cow::Borrowed(self.raw)
        }
    }

    /// The string's start: at least `bytes` raw bytes of it (all of it when shorter), cut where
    /// a character and an escape end (a surrogate pair whole).
    pub fn prefix(&self, bytes: usize) -> RawStr<'a> {
        let raw = self.raw;
        if raw.len() <= bytes {
            return *self;
        }
        let mut i = 0;
        while i < bytes && i < raw.len() {
            if raw[i] != b'\\' {
                i += 1;
                continue;
            }
            if raw.get(i + 1) != Some(&b'u') {
                i += 2;
                continue;
            }
            let high = raw.get(i + 2..i + 6).and_then(|h| std::str::from_utf8(h).ok()).and_then(|h| u16::from_str_radix(h, 16).ok());
            i += 6;
            if high.is_some_and(|h| (0xd800..0xdc00).contains(&h)) && raw[i.min(raw.len())..].starts_with(b"\\u") {
                i += 6;
            }
        }
        let mut i = i.min(raw.len());
        while raw.get(i).is_some_and(|b| b & 0xc0 == 0x80) {
            i += 1;
        }
        RawStr { raw: &raw[..i], escaped: self.escaped && raw[..i].contains(&b'\\') }
    }

    /// The string after its first `n` raw bytes (`n` from [`RawStr::prefix`]).
    pub fn after(&self, n: usize) -> RawStr<'a> {
        RawStr { raw: &self.raw[n.min(self.raw.len())..], escaped: self.escaped }
    }

    /// The raw bytes between the quotes.
    pub fn raw(&self) -> &'a [u8] {
        self.raw
    }

    /// Whether the raw bytes hold an escape.
    pub fn is_escaped(&self) -> bool {
        self.escaped
    }
}

/// The bytes of an object or array read before (see [`Scanner::remember`]).
#[derive(Debug, Clone, Default)]
pub struct Remembered {
    bytes: Vec<u8>,
    depth: u32,
}

/// The scanner. See the module docs.
#[derive(Debug)]
pub struct Scanner<'a> {
    b: &'a [u8],
    pos: usize,
    depth: u32,
}

impl<'a> Scanner<'a> {
    /// A scanner at the start of `input` (valid UTF-8).
    pub fn new(input: &'a [u8]) -> Self {
        Scanner { b: input, pos: 0, depth: 0 }
    }

    fn err<T>(&self) -> Result<T> {
        Err(Invalid { at: self.pos })
    }

    #[inline]
    fn ws(&mut self) {
        while let Some(&c) = self.b.get(self.pos) {
            if matches!(c, b' ' | b'\t' | b'\n' | b'\r') {
                self.pos += 1;
            } else {
                break;
            }
        }
    }

    /// The type of the next value, or `None` at the end of input or on a byte that starts none.
    #[inline]
    pub fn peek(&mut self) -> Option<Kind> {
        self.ws();
        Some(match *self.b.get(self.pos)? {
            b'{' => Kind::Object,
            b'[' => Kind::Array,
            b'"' => Kind::String,
            b'-' | b'0'..=b'9' => Kind::Number,
            b't' | b'f' => Kind::Bool,
            b'n' => Kind::Null,
            _ => return None,
        })
    }

    /// Offset of the next byte to read.
    pub fn position(&self) -> usize {
        self.pos
    }

    /// Skips whitespace and returns the offset where the next value starts.
    pub fn value_start(&mut self) -> usize {
        self.ws();
        self.pos
    }

    /// Succeeds when only whitespace is left.
    pub fn end(&mut self) -> Result<()> {
        self.ws();
        if self.pos == self.b.len() {
            Ok(())
        } else {
            self.err()
        }
    }

    #[inline]
    fn eat(&mut self, c: u8) -> Result<()> {
        self.ws();
        if self.b.get(self.pos) == Some(&c) {
            self.pos += 1;
            Ok(())
        } else {
            self.err()
        }
    }

    fn enter(&mut self) -> Result<()> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return self.err();
        }
        Ok(())
    }

    /// Reads an object, calling `field` with each key; `field` must consume the value.
    pub fn object(&mut self, mut field: impl FnMut(&mut Self, RawStr<'a>) -> Result<()>) -> Result<()> {
        self.eat(b'{')?;
        self.enter()?;
        self.ws();
        if self.b.get(self.pos) == Some(&b'}') {
            self.pos += 1;
            self.depth -= 1;
            return Ok(());
        }
        loop {
            self.ws();
            let key = self.string()?;
            self.eat(b':')?;
            field(self, key)?;
            self.ws();
            match self.b.get(self.pos) {
                Some(b',') => self.pos += 1,
                Some(b'}') => {
                    self.pos += 1;
                    self.depth -= 1;
                    return Ok(());
                }
                _ => return self.err(),
            }
        }
    }

    /// Reads an array, calling `elem` for each element; `elem` must consume it.
    pub fn array(&mut self, mut elem: impl FnMut(&mut Self) -> Result<()>) -> Result<()> {
        self.eat(b'[')?;
        self.enter()?;
        self.ws();
        if self.b.get(self.pos) == Some(&b']') {
            self.pos += 1;
            self.depth -= 1;
            return Ok(());
        }
        loop {
            elem(self)?;
            self.ws();
            match self.b.get(self.pos) {
                Some(b',') => self.pos += 1,
                Some(b']') => {
                    self.pos += 1;
                    self.depth -= 1;
                    return Ok(());
                }
                _ => return self.err(),
            }
        }
    }

    /// Reads a string.
    pub fn string(&mut self) -> Result<RawStr<'a>> {
        self.eat(b'"')?;
        let b = self.b;
        let start = self.pos;
        let mut i = start;
        let mut escaped = false;
        // Most strings are short keys and ids: one 16-byte look, visiting its special bytes.
        if i + 16 <= b.len() {
            let mut mask = special_mask16(b, i);
            let base = i;
            i += 16;
            while mask != 0 {
                let at = base + mask.trailing_zeros() as usize;
                match b[at] {
                    b'"' => {
                        self.pos = at + 1;
                        return Ok(RawStr { raw: &b[start..at], escaped });
                    }
                    b'\\' => {
                        escaped = true;
                        let after = at + escape_len(b, at).ok_or(Invalid { at })?;
                        if after >= base + 16 {
                            i = after;
                            break;
                        }
                        mask &= u32::MAX << (after - base);
                    }
                    _ => return Err(Invalid { at }),
                }
            }
        }
        // Long strings (tool output, dense with escapes): 64 bytes at a time, branch-free.
        let (i, carry) = match long_string(b, i, &mut escaped)? {
            Long::End(at) => {
                self.pos = at + 1;
                return Ok(RawStr { raw: &b[start..at], escaped });
            }
            Long::Tail { at, carry } => (at, carry),
        };
        // A backslash ended the last block: go back to it, the byte loop reads the escape.
        let mut i = i - carry as usize;
        loop {
            match b.get(i) {
                Some(b'"') => {
                    self.pos = i + 1;
                    return Ok(RawStr { raw: &b[start..i], escaped });
                }
                Some(b'\\') => {
                    escaped = true;
                    i += escape_len(b, i).ok_or(Invalid { at: i })?;
                }
                Some(0x20..) => i += 1,
                // A raw control character, or the end of input.
                _ => return Err(Invalid { at: i }),
            }
        }
    }

    /// Skips any value, validating it.
    pub fn skip(&mut self) -> Result<()> {
        match self.peek() {
            Some(Kind::Object) => self.object(|s, _| s.skip()),
            Some(Kind::Array) => self.array(|s| s.skip()),
            Some(Kind::String) => self.string().map(drop),
            Some(Kind::Number) => self.number().map(drop),
            Some(Kind::Bool) => self.boolean().map(drop),
            Some(Kind::Null) => self.literal(b"null"),
            None => self.err(),
        }
    }

    fn literal(&mut self, word: &[u8]) -> Result<()> {
        if self.b[self.pos..].starts_with(word) {
            self.pos += word.len();
            Ok(())
        } else {
            self.err()
        }
    }

    /// Reads `true` or `false`.
    pub fn boolean(&mut self) -> Result<bool> {
        self.ws();
        if self.b.get(self.pos) == Some(&b't') {
            self.literal(b"true").map(|_| true)
        } else {
            self.literal(b"false").map(|_| false)
        }
    }

    /// Reads a number; returns its text.
    pub fn number(&mut self) -> Result<&'a [u8]> {
        self.ws();
        let start = self.pos;
        let b = self.b;
        let digits = |p: &mut usize| {
            let s = *p;
            while b.get(*p).is_some_and(u8::is_ascii_digit) {
                *p += 1;
            }
            *p > s
        };
        let mut p = self.pos;
        if b.get(p) == Some(&b'-') {
            p += 1;
        }
        match b.get(p) {
            Some(b'0') => p += 1,
            Some(b'1'..=b'9') => {
                digits(&mut p);
            }
            _ => {
                self.pos = p;
                return self.err();
            }
        }
        if b.get(p) == Some(&b'.') {
            p += 1;
            if !digits(&mut p) {
                self.pos = p;
                return self.err();
            }
        }
        if matches!(b.get(p), Some(b'e' | b'E')) {
            p += 1;
            if matches!(b.get(p), Some(b'+' | b'-')) {
                p += 1;
            }
            if !digits(&mut p) {
                self.pos = p;
                return self.err();
            }
        }
        self.pos = p;
        Ok(&b[start..p])
    }

    // Lenient readers: any JSON value is accepted and consumed; the shape asked for is
    // returned when the value has it.

    /// A string, if the next value is one.
    pub fn opt_string(&mut self) -> Result<Option<RawStr<'a>>> {
        if self.peek() == Some(Kind::String) {
            self.string().map(Some)
        } else {
            self.skip().map(|_| None)
        }
    }

    /// Walks the next value with `field` if it is an object; returns whether it was.
    pub fn opt_object(&mut self, field: impl FnMut(&mut Self, RawStr<'a>) -> Result<()>) -> Result<bool> {
        if self.peek() == Some(Kind::Object) {
            self.object(field).map(|_| true)
        } else {
            self.skip().map(|_| false)
        }
    }

    /// Walks the next value with `elem` if it is an array; returns whether it was.
    pub fn opt_array(&mut self, elem: impl FnMut(&mut Self) -> Result<()>) -> Result<bool> {
        if self.peek() == Some(Kind::Array) {
            self.array(elem).map(|_| true)
        } else {
            self.skip().map(|_| false)
        }
    }

    /// `true` only for the literal `true`.
    pub fn opt_true(&mut self) -> Result<bool> {
        if self.peek() == Some(Kind::Bool) {
            self.boolean()
        } else {
            self.skip().map(|_| false)
        }
    }

    /// A non-negative integer (fractions truncated, negatives 0), or 0 for other values.
    pub fn opt_count(&mut self) -> Result<u64> {
        if self.peek() != Some(Kind::Number) {
            return self.skip().map(|_| 0);
        }
        let text = self.number()?;
        if text.iter().all(u8::is_ascii_digit) && text.len() <= 19 {
            return Ok(text.iter().fold(0u64, |n, d| n * 10 + u64::from(d - b'0')));
        }
        let f: f64 = std::str::from_utf8(text).ok().and_then(|s| s.parse().ok()).unwrap_or(0.0);
        Ok(if f.is_finite() && f > 0.0 { f as u64 } else { 0 })
    }

    /// Skips the next value, validating it, and returns its bytes as they appear in the input
    /// (the canonical output splices message content through without re-encoding it).
    pub fn raw_value(&mut self) -> Result<&'a [u8]> {
        self.ws();
        let start = self.pos;
        self.skip()?;
        Ok(&self.b[start..self.pos])
    }

    /// The type of the next value, consuming it.
    pub fn shape(&mut self) -> Result<Option<Kind>> {
        let k = self.peek();
        self.skip().map(|_| k)
    }

    /// Reads the next value with `read` (which must consume it) and, when it is an object or an
    /// array, remembers its bytes in `into` for [`Scanner::skip_repeat`].
    pub fn remember<T>(&mut self, into: &mut Remembered, read: impl FnOnce(&mut Self) -> Result<T>) -> Result<T> {
        self.ws();
        let (start, depth) = (self.pos, self.depth);
        let v = read(self)?;
        into.bytes.clear();
        if matches!(self.b.get(start), Some(b'[' | b'{')) {
            into.bytes.extend_from_slice(&self.b[start..self.pos]);
            into.depth = depth;
        }
        Ok(v)
    }

    /// Skips the next value when its bytes are exactly those of `seen`, and says whether it
    /// did. Safe without scanning: `seen` is an object or an array (its last byte ends it) that
    /// was validated at this nesting depth or a deeper one, and the same bytes are the same
    /// valid value.
    pub fn skip_repeat(&mut self, seen: &Remembered) -> bool {
        self.ws();
        let same = !seen.bytes.is_empty() && self.depth <= seen.depth && self.b[self.pos..].starts_with(&seen.bytes);
        if same {
            self.pos += seen.bytes.len();
        }
        same
    }
}

/// Validates a whole line as one JSON object and walks its members with `field`.
pub fn object_line<'a>(line: &'a [u8], field: impl FnMut(&mut Scanner<'a>, RawStr<'a>) -> Result<()>) -> Result<()> {
    let mut s = Scanner::new(line);
    s.object(field)?;
    s.end()
}

/// Whether `line` (valid UTF-8) is one valid JSON value.
pub fn is_valid(line: &[u8]) -> bool {
    let mut s = Scanner::new(line);
    s.skip().and_then(|_| s.end()).is_ok()
}

/// Appends `s` as a JSON string literal, quotes included: byte for byte what `serde_json`
/// writes (`\"`, `\\`, the short escapes `\b \f \n \r \t`, `\u00XX` for other control
/// bytes), found 16 bytes at a time. Repair keeps whole removed lines this way in its rejects.
pub fn write_json_string(out: &mut Vec<u8>, s: &str) {
    let b = s.as_bytes();
    // The most it can take: every byte a six-byte `\u00XX`, and the quotes.
    out.reserve(b.len() * 6 + 2);
    let spare = &mut out.spare_capacity_mut()[..b.len() * 6 + 2];
    let dst = spare.as_mut_ptr().cast::<u8>();
    let (mut at, mut d) = (0, 0);
    // SAFETY: every write below lands in `spare` (`b.len() * 6 + 2` bytes): before input byte
    // `at` at most `6 * at + 1` bytes are written, a 16-byte copy is made only when 16 input
    // bytes are left (so it ends by `6 * at + 1 + 16 <= 6 * b.len()`), an escape adds at most 6
    // bytes for its one input byte and the closing quote is the last byte. Reads stay in `b`.
    // `set_len` covers exactly the `d` bytes written.
    unsafe {
        *dst = b'"';
        d += 1;
        while at + 16 <= b.len() {
            // Copy the whole block, then keep only what comes before its first special byte.
            std::ptr::copy_nonoverlapping(b.as_ptr().add(at), dst.add(d), 16);
            let mask = special_mask16(b, at);
            if mask == 0 {
                at += 16;
                d += 16;
                continue;
            }
            let k = mask.trailing_zeros() as usize;
            d += k;
            at += k;
            d += write_escape(dst.add(d), b[at]);
            at += 1;
        }
        for &c in &b[at..] {
            if matches!(c, b'"' | b'\\' | 0..=0x1f) {
                d += write_escape(dst.add(d), c);
            } else {
                *dst.add(d) = c;
                d += 1;
            }
        }
        *dst.add(d) = b'"';
        d += 1;
        out.set_len(out.len() + d);
    }
}

/// The length of `b` written as a JSON string by [`write_json_string`], quotes left out:
/// what the escapes add, found 16 bytes at a time.
pub fn json_string_len(b: &[u8]) -> usize {
    let escape = |c: u8| match c {
        b'"' | b'\\' | 0x08 | 0x0c | b'\n' | b'\r' | b'\t' => 1,
        0..=0x1f => 5,
        _ => 0,
    };
    let (mut at, mut extra) = (0, 0);
    while at + 16 <= b.len() {
        let mut mask = special_mask16(b, at);
        while mask != 0 {
            extra += escape(b[at + mask.trailing_zeros() as usize]);
            mask &= mask - 1;
        }
        at += 16;
    }
    extra += b[at..].iter().map(|&c| escape(c)).sum::<usize>();
    b.len() + extra
}

/// Writes the escape of `c` (`"`, `\\` or a control byte) at `dst`; returns its length (2 or 6).
///
/// # Safety
/// `dst` must be valid for writing 6 bytes.
unsafe fn write_escape(dst: *mut u8, c: u8) -> usize {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let short = match c {
        b'"' => b'"',
        b'\\' => b'\\',
        0x08 => b'b',
        0x0c => b'f',
        b'\n' => b'n',
        b'\r' => b'r',
        b'\t' => b't',
        _ => 0,
    };
    let (esc, len) =
        if short != 0 { ([b'\\', short, 0, 0, 0, 0], 2) } else { ([b'\\', b'u', b'0', b'0', HEX[usize::from(c >> 4)], HEX[usize::from(c & 15)]], 6) };
    // SAFETY: the caller guarantees 6 writable bytes at `dst`.
    unsafe { std::ptr::copy_nonoverlapping(esc.as_ptr(), dst, 6) };
    len
}

/// How the 64-byte loop of [`Scanner::string`] ended.
#[derive(Debug, PartialEq, Eq)]
enum Long {
    /// At the closing quote.
    End(usize),
    /// Fewer than 64 bytes were left from `at`; `carry` (0 or 1) says whether `at` is escaped.
    Tail { at: usize, carry: u64 },
}

/// The 64-byte loop of [`Scanner::string`] from `i` (not escaped), with `$masks` finding the
/// special bytes of a block. One body, compiled twice: for the x86_64 baseline and for AVX2.
macro_rules! long_string_body {
    ($b:ident, $i:ident, $escaped:ident, $masks:ident) => {{
        let (b, mut i, escaped) = ($b, $i, $escaped);
        // `carry` says whether the next block's first byte is escaped.
        let mut carry = 0u64;
        while i + 64 <= b.len() {
            let m = $masks(b, i);
            let (esc_chars, escapes) = escaped_bytes(m.backslash, &mut carry);
            let ends = m.quote & !esc_chars;
            // The bytes of the string in this block: those before its closing quote, if any.
            let inside = if ends == 0 { u64::MAX } else { (ends & ends.wrapping_neg()) - 1 };
            if m.control & inside != 0 {
                return Err(Invalid { at: i + (m.control & inside).trailing_zeros() as usize });
            }
            let esc_chars = esc_chars & inside;
            if esc_chars != 0 || escapes & inside != 0 {
                *escaped = true;
                let valid = escape_chars64(b, i) | m.quote | m.backslash;
                let bad = esc_chars & !valid;
                if bad != 0 {
                    return Err(Invalid { at: (i + bad.trailing_zeros() as usize).saturating_sub(1) });
                }
                let mut unicode = esc_chars & m.u;
                while unicode != 0 {
                    // The backslash before this `u` starts the escape to check.
                    let at = i + unicode.trailing_zeros() as usize - 1;
                    escape_len(b, at).ok_or(Invalid { at })?;
                    unicode &= unicode - 1;
                }
            }
            if ends != 0 {
                return Ok(Long::End(i + ends.trailing_zeros() as usize));
            }
            i += 64;
        }
        Ok(Long::Tail { at: i, carry })
    }};
}

/// The 64-byte loop of [`Scanner::string`], with AVX2 where the CPU has it (checked once).
#[inline]
fn long_string(b: &[u8], i: usize, escaped: &mut bool) -> Result<Long> {
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2, the only requirement of `long_string_avx2`.
        return unsafe { long_string_avx2(b, i, escaped) };
    }
    long_string_baseline(b, i, escaped)
}

#[inline]
fn long_string_baseline(b: &[u8], i: usize, escaped: &mut bool) -> Result<Long> {
    long_string_body!(b, i, escaped, masks64)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn long_string_avx2(b: &[u8], i: usize, escaped: &mut bool) -> Result<Long> {
    long_string_body!(b, i, escaped, masks64_avx2)
}

/// [`masks64`] with two 32-byte AVX2 compares per byte class instead of four 16-byte ones.
/// Requires `at + 64 <= b.len()`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline]
fn masks64_avx2(b: &[u8], at: usize) -> Masks {
    use std::arch::x86_64::*;
    let block = &b[at..at + 64];
    let mut m = Masks { quote: 0, backslash: 0, control: 0, u: 0 };
    for k in 0..2 {
        // SAFETY: reads `block[32 * k..32 * k + 32]` for `k < 2`, which exist; `loadu` needs no
        // alignment.
        let v = unsafe { _mm256_loadu_si256(block.as_ptr().add(32 * k) as *const __m256i) };
        let bit = |x: __m256i| u64::from(_mm256_movemask_epi8(x) as u32) << (32 * k);
        m.quote |= bit(_mm256_cmpeq_epi8(v, _mm256_set1_epi8(b'"' as i8)));
        m.backslash |= bit(_mm256_cmpeq_epi8(v, _mm256_set1_epi8(b'\\' as i8)));
        m.control |= bit(_mm256_cmpeq_epi8(_mm256_min_epu8(v, _mm256_set1_epi8(0x1f)), v));
        m.u |= bit(_mm256_cmpeq_epi8(v, _mm256_set1_epi8(b'u' as i8)));
    }
    m
}

/// Bit `k` is set when `b[at + k]` is `"`, `\\` or a control byte, for `k` in `0..16`.
/// Requires `at + 16 <= b.len()`.
#[inline]
fn special_mask16(b: &[u8], at: usize) -> u32 {
    let block = &b[at..at + 16];
    #[cfg(target_arch = "x86_64")]
    // SAFETY: SSE2 is part of the x86_64 baseline, so its intrinsics are always available; the
    // load reads `block[0..16]`, which exists, and `loadu` needs no alignment.
    unsafe {
        use std::arch::x86_64::*;
        let v = _mm_loadu_si128(block.as_ptr() as *const __m128i);
        let special = _mm_or_si128(
            _mm_or_si128(_mm_cmpeq_epi8(v, _mm_set1_epi8(b'"' as i8)), _mm_cmpeq_epi8(v, _mm_set1_epi8(b'\\' as i8))),
            _mm_cmpeq_epi8(_mm_min_epu8(v, _mm_set1_epi8(0x1f)), v),
        );
        _mm_movemask_epi8(special) as u32
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let mut mask = 0u32;
        for (k, &c) in block.iter().enumerate() {
            if matches!(c, b'"' | b'\\' | 0..=0x1f) {
                mask |= 1 << k;
            }
        }
        mask
    }
}

/// The bytes of a 64-byte block that matter inside a string, one bit per byte.
#[derive(Debug, Clone, Copy)]
struct Masks {
    quote: u64,
    backslash: u64,
    /// Control bytes (below 0x20), never allowed raw in a string.
    control: u64,
    /// `u`, which starts a `\uXXXX` escape.
    u: u64,
}

/// [`Masks`] of `b[at..at + 64]`. Requires `at + 64 <= b.len()`.
#[inline]
fn masks64(b: &[u8], at: usize) -> Masks {
    let block = &b[at..at + 64];
    #[cfg(target_arch = "x86_64")]
    // SAFETY: SSE2 is part of the x86_64 baseline, so its intrinsics are always available; the
    // loads read `block[16 * k..16 * k + 16]` for `k < 4`, which exist, and `loadu` needs no
    // alignment.
    unsafe {
        use std::arch::x86_64::*;
        let mut m = Masks { quote: 0, backslash: 0, control: 0, u: 0 };
        for k in 0..4 {
            let v = _mm_loadu_si128(block.as_ptr().add(16 * k) as *const __m128i);
            let bit = |x: __m128i| u64::from(_mm_movemask_epi8(x) as u16) << (16 * k);
            m.quote |= bit(_mm_cmpeq_epi8(v, _mm_set1_epi8(b'"' as i8)));
            m.backslash |= bit(_mm_cmpeq_epi8(v, _mm_set1_epi8(b'\\' as i8)));
            m.control |= bit(_mm_cmpeq_epi8(_mm_min_epu8(v, _mm_set1_epi8(0x1f)), v));
            m.u |= bit(_mm_cmpeq_epi8(v, _mm_set1_epi8(b'u' as i8)));
        }
        m
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let mut m = Masks { quote: 0, backslash: 0, control: 0, u: 0 };
        for (k, &c) in block.iter().enumerate() {
            let bit = 1u64 << k;
            match c {
                b'"' => m.quote |= bit,
                b'\\' => m.backslash |= bit,
                0..=0x1f => m.control |= bit,
                b'u' => m.u |= bit,
                _ => {}
            }
        }
        m
    }
}

/// The bytes of `b[at..at + 64]` that may follow a backslash besides `"` and `\\`: `/` and
/// `b f n r t u`. Requires `at + 64 <= b.len()`.
#[inline]
fn escape_chars64(b: &[u8], at: usize) -> u64 {
    let block = &b[at..at + 64];
    #[cfg(target_arch = "x86_64")]
    // SAFETY: as in `masks64`.
    unsafe {
        use std::arch::x86_64::*;
        let mut mask = 0u64;
        for k in 0..4 {
            let v = _mm_loadu_si128(block.as_ptr().add(16 * k) as *const __m128i);
            let is = |c: u8| _mm_cmpeq_epi8(v, _mm_set1_epi8(c as i8));
            let any = _mm_or_si128(
                _mm_or_si128(_mm_or_si128(is(b'/'), is(b'b')), _mm_or_si128(is(b'f'), is(b'n'))),
                _mm_or_si128(_mm_or_si128(is(b'r'), is(b't')), is(b'u')),
            );
            mask |= u64::from(_mm_movemask_epi8(any) as u16) << (16 * k);
        }
        mask
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        block.iter().enumerate().filter(|(_, c)| matches!(c, b'/' | b'b' | b'f' | b'n' | b'r' | b't' | b'u')).fold(0, |m, (k, _)| m | 1 << k)
    }
}

/// Which bytes of a block are escaped (follow a backslash that is not itself escaped), and
/// which backslashes escape, given the block's backslashes and whether its first byte is
/// escaped (`carry`, bit 0; updated for the next block). Branch-free, as in simdjson: a run of
/// backslashes escapes the byte after it when the run's length is odd.
#[inline]
fn escaped_bytes(backslash: u64, carry: &mut u64) -> (u64, u64) {
    const ODD_BITS: u64 = 0xAAAA_AAAA_AAAA_AAAA;
    if backslash == 0 {
        return (std::mem::take(carry), 0);
    }
    // A backslash that is itself escaped starts nothing.
    let starts = backslash & !*carry;
    let maybe_escaped = starts << 1;
    let escape_and_escaped = ((maybe_escaped | ODD_BITS).wrapping_sub(starts)) ^ ODD_BITS;
    let escaped = escape_and_escaped ^ (backslash | *carry);
    let escape = escape_and_escaped & backslash;
    *carry = escape >> 63;
    (escaped, escape)
}

/// Length of the valid escape sequence starting with the backslash at `at`, if it is one.
#[inline(always)]
fn escape_len(b: &[u8], at: usize) -> Option<usize> {
    match b.get(at + 1)? {
        b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => Some(2),
        b'u' => b.get(at + 2..at + 6).filter(|h| h.iter().all(u8::is_ascii_hexdigit)).map(|_| 6),
        _ => None,
    }
}

/// Whether the body of a JSON string literal (between the quotes, escapes not decoded) decodes
/// to whitespace only.
pub fn raw_string_is_blank(body: &[u8]) -> bool {
    let mut i = 0;
    while i < body.len() {
        match body[i] {
            b' ' => i += 1,
            b'\\' => match body.get(i + 1) {
                Some(b'n' | b't' | b'r' | b'f') => i += 2,
                Some(b'u') => {
                    let hex = body.get(i + 2..i + 6).and_then(|h| std::str::from_utf8(h).ok());
                    match hex.and_then(|h| u32::from_str_radix(h, 16).ok()).and_then(char::from_u32) {
                        Some(c) if c.is_whitespace() => i += 6,
                        _ => return false,
                    }
                }
                _ => return false,
            },
            c if c < 0x80 => return false,
            _ => {
                // A multi-byte character: blank only if it is Unicode whitespace.
                let rest = &body[i..];
                let len = utf8_len(rest[0]).min(rest.len());
                match std::str::from_utf8(&rest[..len]).ok().and_then(|s| s.chars().next()) {
                    Some(c) if c.is_whitespace() => i += len,
                    _ => return false,
                }
            }
        }
    }
    true
}

fn utf8_len(first: u8) -> usize {
    match first {
        0xF0..=0xFF => 4,
        0xE0..=0xEF => 3,
        _ => 2,
    }
}

/// Decodes the escapes of a string body known to be valid.
fn unescape(raw: &[u8]) -> String {
    let mut out = Vec::with_capacity(raw.len());
    unescape_into(raw, &mut out);
    // Escapes decode to UTF-8 and the bytes between them are copied whole, so the result is
    // UTF-8 when `raw` is (the callers' contract); otherwise each bad sequence is U+FFFD.
    String::from_utf8(out).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

/// Appends the decoded bytes of a JSON string body `raw` (escapes validated by the scanner;
/// an invalid `\\u` escape decodes to U+FFFD) to `out`. One pass over the bytes, written in
/// place (the decoded text is never longer than the escaped one): 16 bytes are copied at a time
/// and kept up to the next backslash, runs are not validated again.
pub fn unescape_into(raw: &[u8], out: &mut Vec<u8>) {
    let hex = |at: usize| -> u32 { raw[at..at + 4].iter().try_fold(0u32, |acc, &c| (c as char).to_digit(16).map(|d| acc * 16 + d)).unwrap_or(0xFFFD) };
    let base = out.len();
    out.resize(base + raw.len(), 0);
    let dst = &mut out[base..];
    let (mut i, mut o) = (0, 0);
    loop {
        // Copy 16 bytes, keep those before the first backslash. (`o <= i`: the copy fits.)
        while i + 16 <= raw.len() {
            dst[o..o + 16].copy_from_slice(&raw[i..i + 16]);
            let mask = byte_mask16(raw, i, b'\\');
            if mask == 0 {
                i += 16;
                o += 16;
                continue;
            }
            let k = mask.trailing_zeros() as usize;
            i += k;
            o += k;
            break;
        }
        // Fewer than 16 bytes left: one at a time.
        while i < raw.len() && raw[i] != b'\\' {
            dst[o] = raw[i];
            i += 1;
            o += 1;
        }
        if i >= raw.len() {
            break;
        }
        let c = raw.get(i + 1).copied().unwrap_or(b'\\');
        i += 2;
        let ch = match c {
            b'n' => b'\n',
            b't' => b'\t',
            b'r' => b'\r',
            b'b' => 0x08,
            b'f' => 0x0c,
            b'u' if i + 4 <= raw.len() => {
                let hi = hex(i);
                i += 4;
                let ch = if (0xD800..0xDC00).contains(&hi) && raw.get(i..i + 2) == Some(b"\\u") && i + 6 <= raw.len() {
                    let lo = hex(i + 2);
                    if (0xDC00..0xE000).contains(&lo) {
                        i += 6;
                        char::from_u32(0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00))
                    } else {
                        None
                    }
                } else {
                    char::from_u32(hi)
                };
                o += ch.unwrap_or('\u{FFFD}').encode_utf8(&mut dst[o..]).len();
                continue;
            }
            // `"`, `\\`, `/` (what the scanner lets through; any other byte stands for itself).
            other if other.is_ascii() => other,
            other => {
                o += (other as char).encode_utf8(&mut dst[o..]).len();
                continue;
            }
        };
        dst[o] = ch;
        o += 1;
    }
    out.truncate(base + o);
}

/// Bit `k` is set when `b[at + k]` is `c`, for `k` in `0..16`. Requires `at + 16 <= b.len()`.
#[inline]
fn byte_mask16(b: &[u8], at: usize, c: u8) -> u32 {
    let block = &b[at..at + 16];
    #[cfg(target_arch = "x86_64")]
    // SAFETY: SSE2 is part of the x86_64 baseline, so its intrinsics are always available; the
    // load reads `block[0..16]`, which exists, and `loadu` needs no alignment.
    unsafe {
        use std::arch::x86_64::*;
        let v = _mm_loadu_si128(block.as_ptr() as *const __m128i);
        _mm_movemask_epi8(_mm_cmpeq_epi8(v, _mm_set1_epi8(c as i8))) as u32
    }
    #[cfg(not(target_arch = "x86_64"))]
    block.iter().enumerate().fold(0, |m, (k, &x)| m | (u32::from(x == c) << k))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn serde_valid(s: &[u8]) -> bool {
        serde_json::from_slice::<serde::de::IgnoredAny>(s).is_ok()
    }

    #[test]
    fn agrees_with_serde_on_edge_cases() {
        let cases: &[&str] = &[
            r#"{}"#,
            r#"{"a":1}"#,
            r#" { "a" : [ 1 , 2.5e-3 , -0 , true , null , "x\u00e9\n" ] } "#,
            r#"{"a":01}"#,
            r#"{"a":1.}"#,
            r#"{"a":.5}"#,
            r#"{"a":-}"#,
            r#"{"a":1e}"#,
            r#"{"a":1e+}"#,
            r#"{"a":tru}"#,
            r#"{"a":nul}"#,
            r#"{"a",}"#,
            r#"{"a":1,}"#,
            r#"[1,]"#,
            r#"{"a":"\x"}"#,
            r#"{"a":"\u12"}"#,
            r#"{"a":"\ud800"}"#,
            "{\"a\":\"tab\there\"}",
            r#"{"a":1}{"b":2}"#,
            r#"{"a":1} x"#,
            r#"{1:2}"#,
            r#"{"a" 1}"#,
            r#""str""#,
            r#"[]"#,
            r#"{"#,
            r#"{"a":"unterminated}"#,
            "",
            "   ",
            "\u{0}\u{0}",
            r#"{"a":[[[[]]]]}"#,
            r#"{"a":-12.5E+10}"#,
            r#"{"a":1E5}"#,
            r#"{"a":"\/"}"#,
        ];
        for c in cases {
            assert_eq!(is_valid(c.as_bytes()), serde_valid(c.as_bytes()), "{c:?}");
        }
        let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
        assert!(!is_valid(deep.as_bytes()));
    }

    #[test]
    fn blankness_from_raw_json() {
        assert!(raw_string_is_blank(br#" \n\t\r \u0020\u3000"#));
        assert!(raw_string_is_blank("\u{a0} ".as_bytes()));
        assert!(!raw_string_is_blank(br#"\n a"#));
        assert!(!raw_string_is_blank(br#"\u0041"#));
        assert!(!raw_string_is_blank(br#"\""#));
        assert!(!raw_string_is_blank("é".as_bytes()));
    }

    #[test]
    fn walks_fields_and_decodes() {
        let line = br#"{"type":"user","n":{"x":[1,"s"]},"id":"a\"b\u00e9\ud83e\udd80","t":true}"#;
        let (mut ty, mut id, mut t) = (None, None, false);
        object_line(line, |s, k| {
            if k.is("type") {
                ty = s.opt_string()?.map(|r| r.decode());
            } else if k.is("id") {
                id = s.opt_string()?.map(|r| r.decode());
            } else if k.is("t") {
                t = s.opt_true()?;
            } else {
                s.skip()?;
            }
            Ok(())
        })
        .unwrap();
        assert_eq!(ty.as_deref(), Some("user"));
        assert_eq!(id.as_deref(), Some("a\"bé🦀"));
        assert!(t);
    }

    #[test]
    fn raw_value_is_the_exact_span() {
        let line = br#"{"a": [1, {"b":"c"}] ,"d":"e\"f","g":  null}"#;
        let mut raws = Vec::new();
        object_line(line, |s, _| s.raw_value().map(|r| raws.push(r.to_vec()))).unwrap();
        assert_eq!(raws, vec![br#"[1, {"b":"c"}]"#.to_vec(), br#""e\"f""#.to_vec(), b"null".to_vec()]);
        assert!(Scanner::new(b"[1,").raw_value().is_err());
    }

    fn json_value() -> impl Strategy<Value = serde_json::Value> {
        let leaf = prop_oneof![
            Just(serde_json::Value::Null),
            any::<bool>().prop_map(serde_json::Value::Bool),
            any::<i64>().prop_map(|n| serde_json::json!(n)),
            any::<f64>().prop_filter("finite", |f| f.is_finite()).prop_map(|f| serde_json::json!(f)),
            "(\\PC|[\"\\\\\n\u{1b}]){0,200}".prop_map(serde_json::Value::String),
        ];
        leaf.prop_recursive(4, 32, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..6).prop_map(serde_json::Value::Array),
                prop::collection::btree_map("\\PC{0,8}", inner, 0..6).prop_map(|m| serde_json::Value::Object(m.into_iter().collect())),
            ]
        })
    }

    /// `escaped_bytes`, a byte at a time.
    fn escaped_bytes_slowly(backslash: u64, carry: &mut u64) -> (u64, u64) {
        let (mut escaped, mut escape, mut pending) = (0u64, 0u64, *carry == 1);
        for k in 0..64 {
            if pending {
                escaped |= 1 << k;
                pending = false;
            } else if backslash >> k & 1 == 1 {
                escape |= 1 << k;
                pending = true;
            }
        }
        *carry = u64::from(pending);
        (escaped, escape)
    }

    #[test]
    fn strings_across_block_edges_agree_with_serde() {
        // Runs of backslashes, escapes, quotes and control bytes at every offset around the
        // 16- and 64-byte blocks the scanner reads, valid and not.
        let tails =
            [r#"\""#, r#"\\""#, r#"\\\""#, r#"\\\\""#, r#"\"x""#, r#"\u00e9""#, r#"\u00g9""#, r#"\x""#, "\\\u{1}\"", "\u{1}\"", r#"\u12""#, r#"\"#, r#"""#];
        for pad in 0..140 {
            for t in tails {
                let line = format!(r#"{{"k":"{}{}}}"#, "a".repeat(pad), t);
                let bytes = line.as_bytes();
                assert_eq!(is_valid(bytes), serde_valid(bytes), "{line:?}");
                if is_valid(bytes) {
                    let decoded: serde_json::Value = serde_json::from_slice(bytes).unwrap();
                    let mut got = None;
                    object_line(bytes, |s, _| s.string().map(|r| got = Some(r.decode().into_owned()))).unwrap();
                    assert_eq!(got.as_deref(), decoded["k"].as_str(), "{line:?}");
                }
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]
        #[test]
        fn escape_masks_agree_with_a_byte_loop(backslash in any::<u64>(), sparse in any::<u64>(), carry in 0u64..2) {
            for b in [backslash, backslash & sparse, backslash | sparse] {
                let (mut fast, mut slow) = (carry, carry);
                prop_assert_eq!(escaped_bytes(b, &mut fast), escaped_bytes_slowly(b, &mut slow));
                prop_assert_eq!(fast, slow);
            }
        }


        #[test]
        fn valid_json_is_valid(v in json_value()) {
            let s = serde_json::to_vec(&v).unwrap();
            prop_assert!(is_valid(&s));
        }

        #[test]
        fn mutations_agree_with_serde(v in json_value(), at in any::<prop::sample::Index>(), byte in prop_oneof![Just(b'"'), Just(b'\\'), Just(b','), Just(b'}'), Just(b']'), Just(b'e'), Just(b'-'), Just(b'.'), Just(0u8), Just(b'\t'), Just(b'u'), Just(b'0'), Just(b' ')], delete in any::<bool>()) {
            let mut s = serde_json::to_vec(&v).unwrap();
            let i = at.index(s.len());
            if delete { s.remove(i); } else { s.insert(i, byte); }
            if std::str::from_utf8(&s).is_ok() {
                prop_assert_eq!(is_valid(&s), serde_valid(&s), "{:?}", String::from_utf8_lossy(&s));
            }
        }

        #[test]
        fn strings_are_written_like_serde(text in "(\\PC|[\"\\\\\n\r\t\u{0}-\u{1f}\u{7f}]){0,300}", skip in 0usize..17) {
            // Every start offset, so that special bytes fall on every 16-byte block edge.
            let text: String = text.chars().skip(skip).collect();
            let mut out = b"x".to_vec();
            write_json_string(&mut out, &text);
            let serde = serde_json::to_vec(&text).unwrap();
            prop_assert_eq!(&out[1..], serde.as_slice());
            prop_assert_eq!(json_string_len(text.as_bytes()), serde.len() - 2);
        }

        #[test]
        fn the_avx2_loop_agrees_with_the_baseline(v in json_value(), at in any::<prop::sample::Index>(), byte in prop_oneof![Just(b'"'), Just(b'\\'), Just(b'u'), Just(0u8), Just(b'\n'), Just(b'x')], from in 0usize..64) {
            // Strings of JSON text (quotes and escapes everywhere), mutated, read from any offset.
            let mut s = serde_json::to_vec(&serde_json::to_string(&v).unwrap()).unwrap();
            let i = at.index(s.len());
            s.insert(i, byte);
            s.extend_from_slice(&[b' '; 64]);
            let from = from.min(s.len() - 1);
            let (mut e1, mut e2) = (false, false);
            let baseline = long_string_baseline(&s, from, &mut e1);
            let dispatched = long_string(&s, from, &mut e2);
            prop_assert_eq!(baseline, dispatched);
            prop_assert_eq!(e1, e2);
        }

        #[test]
        fn strings_decode_like_serde(text in "(\\PC|[\"\\\\\n\t\u{1b}]){0,300}") {
            let enc = serde_json::to_vec(&text).unwrap();
            let mut s = Scanner::new(&enc);
            let raw = s.string().unwrap();
            prop_assert_eq!(raw.decode(), text);
        }

        /// Every escape JSON has, `\\uXXXX` ones (surrogate pairs included) among plain runs of
        /// any length, decode as serde_json decodes them, appended after what `out` held.
        #[test]
        fn escapes_decode_like_serde(pieces in prop::collection::vec(prop_oneof![
            "\\PC{0,40}".prop_map(|t: String| t.replace(['"', '\\'], "")),
            prop::sample::select(vec!["\\\"", "\\\\", "\\/", "\\b", "\\f", "\\n", "\\r", "\\t"]).prop_map(str::to_owned),
            any::<char>().prop_map(|c| c.encode_utf16(&mut [0; 2]).iter().map(|u| format!("\\u{u:04X}")).collect::<String>()),
        ], 0..40)) {
            let body = pieces.concat();
            let want: String = serde_json::from_str(&format!("\"{body}\"")).unwrap();
            let mut out = b"kept".to_vec();
            unescape_into(body.as_bytes(), &mut out);
            prop_assert_eq!(String::from_utf8(out).unwrap(), format!("kept{want}"));
        }
    }
}
