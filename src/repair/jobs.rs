//! The files a repair covers: paths walked into [`Job`]s (outputs mirrored under `--out`,
//! shards applied), the `--out` that would reach an input refused, and [`Walked::reach`], where
//! a link met by a walk may lead.

use super::SkipWhy;
use crate::sources::batch::{self, Input, Skipped};
use anyhow::Context;
use std::collections::{HashMap, HashSet};
use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path, PathBuf};

/// Whether `rel` (a path relative to the root it was found under) belongs to shard `i` of `n`.
pub fn in_shard(rel: &Path, (i, n): (u64, u64)) -> bool {
    xxhash_rust::xxh3::xxh3_64(rel.to_string_lossy().as_bytes()) % n == i
}

/// One file to repair.
#[derive(Debug, Clone)]
pub struct Job {
    /// The transcript.
    pub input: PathBuf,
    /// Where the repaired file goes (the input itself with --in-place).
    pub output: PathBuf,
    /// The path relative to the root it was found under (for shards and reports).
    pub rel: PathBuf,
    /// Found by walking a directory: where a link met on the way may lead ([`Walked`]). `None`
    /// for a path named as it is (a link named is the user's choice, and is followed).
    pub walked: Option<Walked>,
}

/// What a repair may reach through the links a walk meets (a tree others can write, repaired by
/// root: issue 28). A file reached through a symbolic link (the file's own name or a directory
/// on the way) is repaired only when it resolves inside the paths given (unless `outside`:
/// `--follow-links-outside`), and never when its owner is not the owner of every link on the
/// way: a link never makes a repair write another user's file. Checked when the jobs are made,
/// at each attempt, and again just before the swap, with the same rules.
#[derive(Debug, Clone)]
pub struct Walked {
    /// The directory given, as given (`input` is `root/rel`).
    pub root: PathBuf,
    /// Every path given, resolved.
    pub roots: std::sync::Arc<Vec<PathBuf>>,
    /// `--follow-links-outside`: a link may lead out of the roots (still never to a file of
    /// another owner).
    pub outside: bool,
}

/// Where a walked job leads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reach {
    /// No link on the way: the path is the file.
    Direct,
    /// Through links, to this resolved path, which the rules allow.
    Linked(PathBuf),
    /// Not repaired: why, as a word and for people.
    Refused(SkipWhy, String),
}

impl Walked {
    /// Where `rel` under the root leads, and whether a repair may write there.
    pub fn reach(&self, rel: &Path) -> std::io::Result<Reach> {
        let mut at = self.root.clone();
        let mut links = Vec::new();
        for c in rel.components() {
            at.push(c);
            let m = std::fs::symlink_metadata(&at)?;
            if m.file_type().is_symlink() {
                links.push((at.clone(), m.uid()));
            }
        }
        if links.is_empty() {
            return Ok(Reach::Direct);
        }
        let resolved = std::fs::canonicalize(&at)?;
        let owner = std::fs::metadata(&resolved)?.uid();
        let shown = |l: &Path| match std::fs::read_link(l) {
            Ok(t) => format!("{} -> {}", l.display(), t.display()),
            Err(_) => l.display().to_string(),
        };
        if !self.outside && !self.roots.iter().any(|r| resolved.starts_with(r)) {
            let (first, _) = &links[0];
            return Ok(Reach::Refused(
                SkipWhy::LinkOutside,
                format!(
                    "reached through the symbolic link {}, it resolves to {}, outside the paths given: not repaired (--follow-links-outside repairs such files)",
                    shown(first),
                    resolved.display()
                ),
            ));
        }
        if let Some((l, uid)) = links.iter().find(|(_, uid)| *uid != owner) {
            return Ok(Reach::Refused(
                SkipWhy::LinkOwner,
                format!(
                    "reached through the symbolic link {} (owner uid {uid}), it resolves to {}, owned by uid {owner}: not repaired (a link never makes a repair write another user's file)",
                    shown(l),
                    resolved.display()
                ),
            ));
        }
        Ok(Reach::Linked(resolved))
    }
}

/// `p` made absolute with links resolved as far as it exists; the rest (to be created)
/// appended with `.` and `..` applied.
fn canonical_lenient(p: &Path) -> std::io::Result<PathBuf> {
    let abs = if p.is_absolute() { p.to_path_buf() } else { std::env::current_dir()?.join(p) };
    let comps: Vec<Component<'_>> = abs.components().collect();
    for k in (1..=comps.len()).rev() {
        let head: PathBuf = comps[..k].iter().collect();
        if let Ok(mut out) = std::fs::canonicalize(&head) {
            for c in &comps[k..] {
                match c {
                    Component::ParentDir => {
                        out.pop();
                    }
                    Component::Normal(n) => out.push(n),
                    _ => {}
                }
            }
            return Ok(out);
        }
    }
    Ok(abs)
}

/// The files a repair covers, and what its walk met besides.
pub struct Jobs {
    /// One per file, in path order.
    pub jobs: Vec<Job>,
    /// Paths the walk skipped.
    pub skipped: Vec<Skipped>,
    /// Directories given that hold no `*.jsonl` file.
    pub empty_dirs: Vec<PathBuf>,
}

/// Expands the paths into jobs: directories walked, outputs mirrored under `out`, shards
/// applied. Also returns the paths the walk skipped, and the directories without a transcript. Refuses (an error) an `--out` that reaches
/// an input by any spelling (a link, `..`), and two inputs that would share an output. Without
/// `out` (in place), a file named twice (a link and its target) is one job.
pub fn jobs(paths: &[PathBuf], out: Option<&Path>, shard: Option<(u64, u64)>, follow_links_outside: bool) -> anyhow::Result<Jobs> {
    let mut jobs = Vec::new();
    let mut skipped = Vec::new();
    let mut empty_dirs = Vec::new();
    let mut roots = Vec::new();
    // What a link met by a walk may lead to: the paths given, resolved.
    let given = std::sync::Arc::new(paths.iter().filter_map(|p| std::fs::canonicalize(p).ok()).collect::<Vec<_>>());
    for root in paths {
        let found = batch::expand(std::slice::from_ref(root));
        skipped.extend(found.skipped);
        empty_dirs.extend(found.empty_dirs);
        let is_dir = root.is_dir();
        if is_dir {
            roots.push((root, std::fs::canonicalize(root).with_context(|| format!("resolving {}", root.display()))?));
        }
        for input in found.inputs {
            let Input::File(input) = input else { anyhow::bail!("repair reads files, not stdin") };
            let rel = if is_dir { input.strip_prefix(root).unwrap_or(&input).to_path_buf() } else { PathBuf::from(input.file_name().unwrap_or_default()) };
            if shard.is_some_and(|s| !in_shard(&rel, s)) {
                continue;
            }
            let output = out.map_or_else(|| input.clone(), |o| o.join(&rel));
            let walked = is_dir.then(|| Walked { root: root.clone(), roots: given.clone(), outside: follow_links_outside });
            jobs.push(Job { input, output, rel, walked });
        }
    }
    // A walked link the rules refuse stands for no file: it neither takes the place of its
    // target (named in the tree too) nor counts as an input; its job reports why it is skipped.
    let refused = |job: &Job| job.walked.as_ref().is_some_and(|w| matches!(w.reach(&job.rel), Ok(Reach::Refused(..))));
    let mut seen: HashMap<PathBuf, usize> = HashMap::new();
    let Some(out) = out else {
        // In place: each file once, whichever name reached it.
        let mut kept = Vec::new();
        for job in jobs {
            if refused(&job) {
                kept.push(job);
                continue;
            }
            let key = std::fs::canonicalize(&job.input).unwrap_or_else(|_| job.input.clone());
            if seen.insert(key, kept.len()).is_none() {
                kept.push(job);
            }
        }
        return Ok(Jobs { jobs: kept, skipped, empty_dirs });
    };
    let out_c = canonical_lenient(out).with_context(|| format!("resolving {}", out.display()))?;
    for (root, root_c) in &roots {
        if out_c.starts_with(root_c) {
            anyhow::bail!(
                "--out {} is inside the input directory {} (both resolve under {}): the repaired files would land among the inputs; choose a directory outside it",
                out.display(),
                root.display(),
                root_c.display()
            );
        }
    }
    // The inputs' identities, looked up only if some output already exists.
    let mut ids: Option<HashSet<(u64, u64)>> = None;
    let input_ids = |jobs: &[Job]| jobs.iter().filter_map(|j| std::fs::metadata(&j.input).ok()).map(|m| (m.dev(), m.ino())).collect::<HashSet<_>>();
    // Outputs share few directories: each is resolved once.
    let mut dirs: HashMap<PathBuf, PathBuf> = HashMap::new();
    let mut kept: Vec<Job> = Vec::new();
    for i in 0..jobs.len() {
        let job = &jobs[i];
        if refused(job) {
            kept.push(job.clone());
            continue;
        }
        let parent = job.output.parent().unwrap_or(Path::new("")).to_path_buf();
        let dir_c = match dirs.get(&parent) {
            Some(d) => d.clone(),
            None => {
                let d = canonical_lenient(&parent)?;
                dirs.insert(parent, d.clone());
                d
            }
        };
        let oc = dir_c.join(job.output.file_name().unwrap_or_default());
        let hits_input = roots.iter().any(|(_, r)| oc.starts_with(r))
            || std::fs::symlink_metadata(&oc).is_ok()
                && std::fs::metadata(&oc).is_ok_and(|m| ids.get_or_insert_with(|| input_ids(&jobs)).contains(&(m.dev(), m.ino())));
        let job = job.clone();
        if hits_input {
            anyhow::bail!("--out would overwrite an input: {} resolves to {}; choose a directory outside the inputs", job.output.display(), oc.display());
        }
        match seen.get(&oc) {
            Some(&i) => {
                let other = &kept[i];
                let same = match (std::fs::metadata(&other.input), std::fs::metadata(&job.input)) {
                    (Ok(a), Ok(b)) => (a.dev(), a.ino()) == (b.dev(), b.ino()),
                    _ => false,
                };
                if !same {
                    anyhow::bail!(
                        "{} and {} would both be written to {}: repair them in separate runs (or with different --out directories)",
                        other.input.display(),
                        job.input.display(),
                        job.output.display()
                    );
                }
            }
            None => {
                seen.insert(oc, kept.len());
                kept.push(job);
            }
        }
    }
    Ok(Jobs { jobs: kept, skipped, empty_dirs })
}
