//! Lenient, borrowing JSON pieces for the format adapters.
//!
//! A transcript line must be valid JSON, but the fields we read may have any shape: a future
//! version may turn a string into an object. Every type here accepts *any* JSON value and keeps
//! what it understands, so a surprising shape is "not present", never a parse error. Values we do
//! not need are skipped by serde_json without being decoded or allocated, and strings are borrowed
//! from the line when they contain no escapes.

use serde::de::value::MapAccessDeserializer;
use serde::de::{self, Deserialize, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;
use smallvec::SmallVec;
use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;

/// Implements the visitor methods for the JSON shapes a lenient type does not want: the value
/// is consumed and `Default` returned.
macro_rules! ignore_other_shapes {
    ($($skip:ident),*) => {
        ignore_other_shapes!(@one $($skip),*);
    };
    (@one $($skip:ident),*) => {
        fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> { Ok(Default::default()) }
        fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> { Ok(Default::default()) }
        fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> { Ok(Default::default()) }
        fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> { Ok(Default::default()) }
        fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> { Ok(Default::default()) }
        fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> { Ok(Default::default()) }
        $( ignore_other_shapes!(@skip $skip); )*
    };
    (@skip str) => {
        fn visit_str<E: de::Error>(self, _: &str) -> Result<Self::Value, E> { Ok(Default::default()) }
    };
    (@skip seq) => {
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
            while seq.next_element::<IgnoredAny>()?.is_some() {}
            Ok(Default::default())
        }
    };
    (@skip map) => {
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
            Ok(Default::default())
        }
    };
}

/// A string if the value is one, else `None`.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Str<'a>(pub Option<Cow<'a, str>>);

impl<'a> Str<'a> {
    /// The string, if present.
    pub fn get(&self) -> Option<&str> {
        self.0.as_deref()
    }
    /// Whether the value was exactly `s`.
    pub fn is(&self, s: &str) -> bool {
        self.0.as_deref() == Some(s)
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Str<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for V<'a> {
            type Value = Str<'a>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("any value")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(Str(Some(Cow::Borrowed(v))))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Str(Some(Cow::Owned(v.to_owned()))))
            }
            ignore_other_shapes!(seq, map);
        }
        d.deserialize_any(V(PhantomData))
    }
}

/// `true` only if the value is the JSON literal `true`.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Flag(pub bool);

impl<'de> Deserialize<'de> for Flag {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Flag;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("any value")
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<Self::Value, E> {
                Ok(Flag(v))
            }
            fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> { Ok(Flag(false)) }
            fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> { Ok(Flag(false)) }
            fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> { Ok(Flag(false)) }
            fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> { Ok(Flag(false)) }
            ignore_other_shapes!(@skip str);
            ignore_other_shapes!(@skip seq);
            ignore_other_shapes!(@skip map);
        }
        d.deserialize_any(V)
    }
}

/// A non-negative integer if the value is one (floats are truncated), else 0.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Count(pub u64);

impl<'de> Deserialize<'de> for Count {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Count;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("any value")
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
                Ok(Count(v))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
                Ok(Count(v.max(0) as u64))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Self::Value, E> {
                Ok(Count(if v.is_finite() && v > 0.0 { v as u64 } else { 0 }))
            }
            fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> { Ok(Count(0)) }
            fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> { Ok(Count(0)) }
            ignore_other_shapes!(@skip str);
            ignore_other_shapes!(@skip seq);
            ignore_other_shapes!(@skip map);
        }
        d.deserialize_any(V)
    }
}

/// The value if it is a JSON object that `T` reads, else `None`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Obj<T>(pub Option<T>);

impl<T> Default for Obj<T> {
    fn default() -> Self {
        Obj(None)
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Obj<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<T>(PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for V<T> {
            type Value = Obj<T>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("any value")
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
                T::deserialize(MapAccessDeserializer::new(map)).map(|t| Obj(Some(t)))
            }
            ignore_other_shapes!(str, seq);
        }
        d.deserialize_any(V(PhantomData))
    }
}

/// The elements if the value is an array (each read leniently by `T`), else empty.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Arr<T>(pub SmallVec<[T; 2]>);

impl<T> Default for Arr<T> {
    fn default() -> Self {
        Arr(SmallVec::new())
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Arr<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<T>(PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for V<T> {
            type Value = Arr<T>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("any value")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                let mut v = SmallVec::new();
                while let Some(t) = seq.next_element::<T>()? {
                    v.push(t);
                }
                Ok(Arr(v))
            }
            ignore_other_shapes!(str, map);
        }
        d.deserialize_any(V(PhantomData))
    }
}

/// The JSON type of a value, without reading it.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// Absent (the field was not there).
    #[default]
    Missing,
    /// `null`.
    Null,
    /// A string.
    String,
    /// An object.
    Object,
    /// An array.
    Array,
    /// A number or boolean.
    Scalar,
}

impl<'de> Deserialize<'de> for Shape {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Shape;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("any value")
            }
            fn visit_bool<E: de::Error>(self, _: bool) -> Result<Shape, E> { Ok(Shape::Scalar) }
            fn visit_i64<E: de::Error>(self, _: i64) -> Result<Shape, E> { Ok(Shape::Scalar) }
            fn visit_u64<E: de::Error>(self, _: u64) -> Result<Shape, E> { Ok(Shape::Scalar) }
            fn visit_f64<E: de::Error>(self, _: f64) -> Result<Shape, E> { Ok(Shape::Scalar) }
            fn visit_unit<E: de::Error>(self) -> Result<Shape, E> { Ok(Shape::Null) }
            fn visit_str<E: de::Error>(self, _: &str) -> Result<Shape, E> { Ok(Shape::String) }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Shape, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(Shape::Array)
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Shape, A::Error> {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(Shape::Object)
            }
        }
        d.deserialize_any(V)
    }
}

/// Whether a value is text with something other than whitespace in it, judged from its raw JSON
/// without decoding it (so a long text costs a scan, not a copy). Non-string values are `None`.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Text(pub Option<bool>);

impl Text {
    /// `true` when the value was a string with a non-whitespace character.
    pub fn non_blank(self) -> bool {
        self.0 == Some(true)
    }
}

impl<'de> Deserialize<'de> for Text {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw = <&'de RawValue>::deserialize(d)?;
        let b = raw.get().as_bytes();
        if b.first() != Some(&b'"') {
            return Ok(Text(None));
        }
        Ok(Text(Some(!raw_string_is_blank(&b[1..b.len() - 1]))))
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

/// Parses a JSON string's content (already decoded) and says whether it is an object.
pub fn json_text_shape(s: &str) -> Option<Shape> {
    serde_json::from_str::<Shape>(s).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Deserialize, Default)]
    struct Probe<'a> {
        #[serde(default, borrow)]
        a: Str<'a>,
        #[serde(default)]
        b: Flag,
        #[serde(default)]
        c: Count,
        #[serde(default)]
        t: Text,
        #[serde(default)]
        s: Shape,
        #[serde(default)]
        o: Obj<Inner>,
        #[serde(default)]
        l: Arr<Count>,
    }
    #[derive(Deserialize, Default, Debug, PartialEq)]
    struct Inner {
        #[serde(default)]
        x: Count,
    }

    #[test]
    fn any_shape_is_accepted() {
        for v in ["1", "\"s\"", "null", "true", "[1,{\"a\":2}]", "{\"k\":[1]}", "-3.5"] {
            let line = format!(r#"{{"a":{v},"b":{v},"c":{v},"t":{v},"s":{v},"o":{v},"l":{v}}}"#);
            assert!(serde_json::from_str::<Probe>(&line).is_ok(), "{line}");
        }
    }

    #[test]
    fn values_are_read() {
        let p: Probe = serde_json::from_str(
            r#"{"a":"x\"y","b":true,"c":7,"t":" \n\u00a0x","s":{},"o":{"x":2},"l":[1,"z",3]}"#,
        )
        .unwrap();
        assert_eq!(p.a.get(), Some("x\"y"));
        assert!(p.b.0);
        assert_eq!(p.c.0, 7);
        assert!(p.t.non_blank());
        assert_eq!(p.s, Shape::Object);
        assert_eq!(p.o.0, Some(Inner { x: Count(2) }));
        assert_eq!(p.l.0.iter().map(|c| c.0).collect::<Vec<_>>(), vec![1, 0, 3]);
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
}
