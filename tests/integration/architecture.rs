//! The core (`src/transcript/`) does no IO, reads no clock and knows no paths: the rule that
//! keeps it testable and shared by the batch verbs and the daemon. This test keeps the rule.

use super::support::root;

const FORBIDDEN: &[&str] = &[
    "std::fs",
    "std::net",
    "std::io::stdin",
    "std::io::stdout",
    "std::process",
    "std::env",
    "std::path",
    "std::time::Instant",
    "std::time::SystemTime",
    "SystemTime::now",
    "Instant::now",
    "tokio",
    "notify::",
    "use notify",
    "metrics::",
    "tracing::",
    "File::open",
];

#[test]
fn core_does_no_io_and_reads_no_clock() {
    let mut offenders = Vec::new();
    for f in super::support::jsonl_files(&root().join("src/transcript")).into_iter().chain(rust_files()) {
        let text = std::fs::read_to_string(&f).unwrap();
        // Unit tests may use the file system (temp dirs); only the code above them is checked.
        let code = text.split("#[cfg(test)]").next().unwrap_or("");
        for word in FORBIDDEN {
            if code.contains(word) {
                offenders.push(format!("{}: {word}", f.display()));
            }
        }
    }
    assert!(offenders.is_empty(), "the core must stay pure:\n{}", offenders.join("\n"));
}

fn rust_files() -> Vec<std::path::PathBuf> {
    walkdir::WalkDir::new(root().join("src/transcript"))
        .into_iter()
        .filter_map(Result::ok)
        .filter(|e| e.path().extension().is_some_and(|x| x == "rs"))
        .map(|e| e.into_path())
        .collect()
}

#[test]
fn the_guard_sees_the_core() {
    assert!(rust_files().len() >= 10, "src/transcript should hold the core's modules");
}
