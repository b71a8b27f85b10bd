//! Security advisories against `Cargo.lock`, offline.
//!
//! Two sources, in RustSec's terms (an advisory names a package, the version ranges `patched`
//! and `unaffected`; every other version is affected):
//! - `tests/data/advisories.toml`, the snapshot kept in the repository: every advisory of the
//!   RustSec database that touched a crate of this lockfile when the snapshot was taken (its
//!   header says when, and from which database commit). It always runs, so CI checks without a
//!   network.
//! - a whole RustSec advisory database checked out on disk, when `TRANSCRIPTD_ADVISORY_DB` names
//!   its directory (the one holding `crates/`): every advisory of it, so that the snapshot can be
//!   brought up to date (`TRANSCRIPTD_ADVISORY_DB=… cargo test advisories` lists what it lacks).
//!
//! Unmaintained and unsound crates count as much as vulnerable ones: the lockfile may hold none
//! of them, unless an entry of `ALLOWED` below says why.

use super::support::root;
use semver::{Version, VersionReq};
use std::path::Path;

/// Advisories accepted on purpose, with the reason. Empty: nothing is accepted today.
const ALLOWED: &[(&str, &str)] = &[];

/// One advisory: what it concerns and which versions it does not affect.
#[derive(Debug, Clone)]
struct Advisory {
    id: String,
    package: String,
    kind: String,
    patched: Vec<VersionReq>,
    unaffected: Vec<VersionReq>,
}

impl Advisory {
    /// Reads the `[advisory]` and `[versions]` tables of a RustSec entry (or of the snapshot).
    fn from_toml(v: &toml::Value) -> Advisory {
        let a = &v["advisory"];
        let reqs = |key: &str| -> Vec<VersionReq> {
            v.get("versions")
                .and_then(|t| t.get(key))
                .and_then(|l| l.as_array())
                .map(|l| l.iter().map(|r| parse_req(r.as_str().unwrap())).collect())
                .unwrap_or_default()
        };
        Advisory {
            id: a["id"].as_str().unwrap().to_owned(),
            package: a["package"].as_str().unwrap().to_owned(),
            kind: a.get("informational").and_then(|k| k.as_str()).unwrap_or("vulnerability").to_owned(),
            patched: reqs("patched"),
            unaffected: reqs("unaffected"),
        }
    }

    /// Whether `version` of the package is affected.
    fn affects(&self, version: &Version) -> bool {
        !self.patched.iter().chain(&self.unaffected).any(|r| r.matches(version))
    }
}

/// RustSec writes ranges as `">= 0.16.3"` or `"^0.9, < 0.9.4"`; semver reads both once the
/// blanks after the operators are gone.
fn parse_req(text: &str) -> VersionReq {
    let squeezed: String = text.split(',').map(|p| p.trim().replace(' ', "")).collect::<Vec<_>>().join(", ");
    VersionReq::parse(&squeezed).unwrap_or_else(|e| panic!("version range {text:?}: {e}"))
}

/// The packages of `Cargo.lock` that come from crates.io: (name, version).
fn locked() -> Vec<(String, Version)> {
    let lock = toml::Value::Table(toml::from_str(&std::fs::read_to_string(root().join("Cargo.lock")).unwrap()).unwrap());
    lock["package"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p.get("source").and_then(|s| s.as_str()).is_some_and(|s| s.starts_with("registry+")))
        .map(|p| (p["name"].as_str().unwrap().to_owned(), Version::parse(p["version"].as_str().unwrap()).unwrap()))
        .collect()
}

/// Every advisory of a RustSec database checkout (`crates/<name>/RUSTSEC-*.md`, TOML between
/// the first pair of ```toml fences).
fn database(dir: &Path) -> Vec<Advisory> {
    let mut all = Vec::new();
    for krate in std::fs::read_dir(dir.join("crates")).unwrap() {
        for entry in std::fs::read_dir(krate.unwrap().path()).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_none_or(|e| e != "md") {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            let front = text.split("```toml").nth(1).and_then(|t| t.split("```").next()).unwrap_or_else(|| panic!("{}: no ```toml block", path.display()));
            let v = toml::Value::Table(toml::from_str(front).unwrap_or_else(|e| panic!("{}: {e}", path.display())));
            if v["advisory"].get("withdrawn").is_none() {
                all.push(Advisory::from_toml(&v));
            }
        }
    }
    all
}

/// The snapshot kept in the repository.
fn snapshot() -> Vec<Advisory> {
    let v = toml::Value::Table(toml::from_str(&std::fs::read_to_string(root().join("tests/data/advisories.toml")).unwrap()).unwrap());
    v["advisories"].as_array().unwrap().iter().map(Advisory::from_toml).collect()
}

/// "crate version: ID (kind)" for each locked package an advisory affects and `ALLOWED` does not name.
fn hits(advisories: &[Advisory], lock: &[(String, Version)]) -> Vec<String> {
    let mut out = Vec::new();
    for (name, version) in lock {
        for a in advisories.iter().filter(|a| &a.package == name && a.affects(version)) {
            if !ALLOWED.iter().any(|(id, _)| *id == a.id) {
                out.push(format!("{name} {version}: {} ({})", a.id, a.kind));
            }
        }
    }
    out
}

#[test]
fn the_lockfile_holds_no_crate_with_an_advisory() {
    let lock = locked();
    assert!(lock.len() > 100, "Cargo.lock read: {} packages", lock.len());
    let snap = snapshot();
    let found = hits(&snap, &lock);
    assert!(found.is_empty(), "advisories in Cargo.lock (tests/data/advisories.toml):\n{}", found.join("\n"));
    let Some(dir) = std::env::var_os("TRANSCRIPTD_ADVISORY_DB") else { return };
    let db = database(Path::new(&dir));
    assert!(db.len() > 500, "{} advisories read from {dir:?}", db.len());
    let found = hits(&db, &lock);
    assert!(found.is_empty(), "advisories in Cargo.lock (the database at {dir:?}):\n{}", found.join("\n"));
    // Every advisory of the database about a locked crate is in the snapshot, so that CI, which
    // has only the snapshot, would see it if the lockfile went back to an affected version.
    let missing: Vec<&String> =
        db.iter().filter(|a| lock.iter().any(|(n, _)| n == &a.package)).map(|a| &a.id).filter(|id| !snap.iter().any(|s| &&s.id == id)).collect();
    assert!(missing.is_empty(), "advisories about locked crates missing from tests/data/advisories.toml: {missing:?}");
}

#[test]
fn the_advisory_check_finds_the_crates_the_security_review_found() {
    // The lockfile of 5aa1e68 held lru 0.12.5 (unsound) and paste 1.0.15 (unmaintained), through
    // ratatui 0.29; the snapshot must see both, and not lru 0.18.5.
    let snap = snapshot();
    let old = [("lru".to_owned(), Version::new(0, 12, 5)), ("paste".to_owned(), Version::new(1, 0, 15)), ("lru".to_owned(), Version::new(0, 18, 5))];
    let found = hits(&snap, &old);
    assert!(found.iter().any(|f| f.starts_with("lru 0.12.5: RUSTSEC-2026-0002")), "{found:?}");
    assert!(found.iter().any(|f| f.starts_with("lru 0.12.5: RUSTSEC-2026-0253")), "{found:?}");
    assert!(found.iter().any(|f| f.starts_with("paste 1.0.15: RUSTSEC-2024-0436")), "{found:?}");
    assert!(!found.iter().any(|f| f.starts_with("lru 0.18.5")), "{found:?}");
}
