//! Settings written as strings and read as typed values: sizes, addresses, formats, policies.

use crate::transcript::repair::OrphanPolicy;
use crate::transcript::Format;
use serde::{Deserialize, Serialize};
use std::net::SocketAddr;

/// A setting written as a string (a size, an address, a name) and read once, when the file is:
/// the text as written, and its value or why it has none. Text that does not read is a problem
/// of validation ([`Config::resolve`](super::Config::resolve)) that names the key and its line, not an error of the
/// TOML: the rest of its element is still read and checked with the others. The TOML surface
/// is the string.
#[derive(Debug, Clone, PartialEq)]
pub struct Parsed<T> {
    text: String,
    value: Result<T, String>,
}

/// How a [`Parsed`] setting reads its text.
pub trait Setting: Sized {
    /// The value `text` means, or what is wrong with it.
    fn read(text: &str) -> Result<Self, String>;
}

impl<T: Setting> Parsed<T> {
    /// `text`, read.
    pub fn new(text: impl Into<String>) -> Self {
        let text = text.into();
        let value = T::read(&text);
        Parsed { text, value }
    }
}

impl<T> Parsed<T> {
    /// The text as written.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The value, or what is wrong with the text.
    pub fn read(&self) -> Result<&T, &str> {
        self.value.as_ref().map_err(String::as_str)
    }

    /// The value, in a validated configuration.
    ///
    /// # Panics
    ///
    /// When the text did not read: validation refuses such a configuration.
    pub fn get(&self) -> &T {
        match &self.value {
            Ok(v) => v,
            Err(m) => panic!("a setting of an unvalidated configuration: {m}"),
        }
    }
}

impl<'de, T: Setting> Deserialize<'de> for Parsed<T> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d).map(Parsed::new)
    }
}

impl<T> Serialize for Parsed<T> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.text.serialize(s)
    }
}

impl Setting for OrphanPolicy {
    fn read(text: &str) -> Result<Self, String> {
        text.parse()
    }
}

/// A format setting: `auto` (`None`: detected per file) or a format's name.
impl Setting for Option<Format> {
    fn read(text: &str) -> Result<Self, String> {
        match text {
            "auto" => Ok(None),
            f => f.parse().map(Some),
        }
    }
}

impl Setting for SocketAddr {
    fn read(text: &str) -> Result<Self, String> {
        text.parse().map_err(|e| format!("{text}: {e}"))
    }
}

/// A number of bytes, written with an optional unit ("64MiB", see [`parse_size`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ByteSize(usize);

impl ByteSize {
    /// The number of bytes.
    pub fn bytes(self) -> usize {
        self.0
    }
}

impl Setting for ByteSize {
    fn read(text: &str) -> Result<Self, String> {
        parse_size(text).map(ByteSize)
    }
}

/// Parses a byte size: a number with an optional unit (`k`, `M`, `G`, `KiB`, `MiB`, `GiB`:
/// binary; `kB`, `MB`, `GB`: decimal).
pub fn parse_size(s: &str) -> Result<usize, String> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let n: usize = num.parse().map_err(|_| format!("invalid size `{s}`"))?;
    let mult: usize = match unit.trim() {
        "" | "B" | "b" => 1,
        "k" | "K" | "KiB" | "kiB" => 1 << 10,
        "m" | "M" | "MiB" => 1 << 20,
        "g" | "G" | "GiB" => 1 << 30,
        "kB" | "KB" => 1_000,
        "MB" => 1_000_000,
        "GB" => 1_000_000_000,
        u => return Err(format!("unknown size unit `{u}` in `{s}`")),
    };
    n.checked_mul(mult).ok_or_else(|| format!("size `{s}` is too large"))
}
