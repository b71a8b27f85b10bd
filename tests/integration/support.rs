//! Helpers shared by the integration tests.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The repository root.
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `tests/data/<rel>`.
pub fn data(rel: &str) -> PathBuf {
    root().join("tests/data").join(rel)
}

/// Runs the built binary with `args`.
pub fn transcriptd(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_transcriptd")).args(args).output().expect("run transcriptd")
}

/// Runs the built binary in `dir`.
pub fn transcriptd_in(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_transcriptd")).current_dir(dir).args(args).output().expect("run transcriptd")
}

/// Every `*.jsonl` file under `dir`, sorted.
pub fn jsonl_files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = walkdir::WalkDir::new(dir)
        .into_iter()
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_file() && e.path().extension().is_some_and(|x| x == "jsonl"))
        .map(|e| e.into_path())
        .collect();
    v.sort();
    v
}

/// Runs the transcript generator of `benches/` (stdlib Python) with `args`, writing `out`.
pub fn generate(out: &Path, args: &[&str]) {
    let status = Command::new("python3")
        .arg(root().join("benches/gen_transcripts.py"))
        .args(args)
        .arg("-o")
        .arg(out)
        .status()
        .expect("python3 runs the generator");
    assert!(status.success(), "generator failed: {args:?}");
}

/// Compares `actual` with the expectation file, or rewrites it when `UPDATE_EXPECT=1`.
pub fn expect_file(path: &Path, actual: &str) {
    if std::env::var_os("UPDATE_EXPECT").is_some() {
        std::fs::write(path, actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(path).unwrap_or_default();
    assert_eq!(actual, expected, "\n{} differs (UPDATE_EXPECT=1 rewrites it)", path.display());
}
