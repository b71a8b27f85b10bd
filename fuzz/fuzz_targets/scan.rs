//! The JSON scanner accepts exactly what serde_json accepts, walks any object without panic,
//! and writes strings byte for byte as serde_json does.

#![no_main]

use libfuzzer_sys::fuzz_target;
use transcriptd::transcript::scan;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let ours = scan::is_valid(data);
    let serde = serde_json::from_slice::<serde::de::IgnoredAny>(data).is_ok();
    assert_eq!(ours, serde, "validity of {text:?}");
    let walked = scan::object_line(data, |s, _| s.skip()).is_ok();
    // An object is valid JSON whose first byte (past whitespace) opens one.
    let object = ours && text.trim_start_matches([' ', '\t', '\n', '\r']).starts_with('{');
    assert_eq!(walked, object, "object walk of {text:?}");
    let mut w = Vec::new();
    scan::write_json_string(&mut w, text);
    assert_eq!(w, serde_json::to_vec(text).expect("a string serializes"));
});
