//! Configuration files: parse, validate, build. `tools` is the tool registry that tells
//! `orphans` what each tool does.

pub mod tools;
