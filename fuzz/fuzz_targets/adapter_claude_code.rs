//! The claude_code adapter on any line: no panic; it reads a line exactly when the line is a JSON
//! object; detection and the validator take whatever it reads.

#![no_main]

use libfuzzer_sys::fuzz_target;
use transcriptd::transcript::formats::{Detector, Format};
use transcriptd::transcript::scan;
use transcriptd::transcript::stages::validate::Validator;

fuzz_target!(|data: &[u8]| {
    // Framing hands adapters valid UTF-8 lines only.
    if std::str::from_utf8(data).is_err() {
        return;
    }
    let object = scan::object_line(data, |s, _| s.skip()).is_ok();
    let parsed = Format::ClaudeCode.parse(data);
    assert_eq!(parsed.is_ok(), object, "read as an object or not");
    let mut d = Detector::new();
    d.observe(data);
    if let Ok(p) = parsed {
        let mut v = Validator::new(Format::ClaudeCode);
        v.push(1, &p, &mut |_| {});
        v.push(2, &p, &mut |_| {});
        v.finish(&mut |_| {});
    }
});
