//! The Copilot adapter on any line (`common::adapter`).

#![no_main]

mod common;

use libfuzzer_sys::fuzz_target;
use transcriptd::transcript::Format;

fuzz_target!(|data: &[u8]| common::adapter(Format::Copilot, data));
