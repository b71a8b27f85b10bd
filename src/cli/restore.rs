//! `transcriptd restore SESSION`: puts a session back from the snapshot store (the daemon's
//! `snapshot` sink), byte for byte, as it was before it was lost or at a given time.
//!
//! Which bytes: the file as it was at `--at TIME`; without it, when the file is gone, the last
//! bytes the store holds of it; when it is there (truncated, emptied, rewritten), the newest
//! incarnation other than the one on disk (the one whose bytes the file still starts with). Where: its own path, or `--out`. A file the agent holds
//! open for writing is never replaced; a file that is replaced is kept beside it
//! (`NAME.jsonl.<time>.replaced.jsonl`, which no verb reads as a session).

use super::args::OutputArgs;
use super::{Exit, OutputFormat};
use crate::snapshots::{parse_time, Store, Stream};
use anyhow::{bail, Context as _};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// Arguments of `transcriptd restore`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The session: its id or a prefix of it (the transcript's file name holds it), or the
    /// transcript's path.
    pub session: String,
    /// The snapshot store (the `dir` of the daemon's `snapshot` sink).
    #[arg(long, value_name = "DIR", conflicts_with = "config")]
    pub store: Option<PathBuf>,
    /// The daemon's configuration file, whose `snapshot` sink names the store.
    #[arg(long, short = 'c', value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// The file as it was at this time (RFC 3339, "2026-12-03T10:00:00Z"; local times without
    /// an offset are UTC).
    #[arg(long, value_name = "TIME", value_parser = parse_at)]
    pub at: Option<SystemTime>,
    /// Write it here instead of its own path (which must not exist).
    #[arg(long, value_name = "PATH")]
    pub out: Option<PathBuf>,
    /// List what the store holds of the session (each incarnation of its file) and restore
    /// nothing.
    #[arg(long)]
    pub list: bool,
    /// How results are written.
    #[command(flatten)]
    pub output: OutputArgs,
}

fn parse_at(s: &str) -> Result<SystemTime, String> {
    parse_time(s).ok_or_else(|| format!("{s:?} is not a time like 2026-12-03T10:00:00Z"))
}

/// Runs the verb.
pub fn run(args: Args) -> anyhow::Result<Exit> {
    let root = store_dir(&args)?;
    let store = Store::at(&root);
    if !root.join("streams").is_dir() {
        bail!("{}: not a snapshot store (no streams/ in it)", root.display());
    }
    let all = store.streams().with_context(|| format!("reading the snapshot store {}", root.display()))?;
    let path = matching_path(&all, &args.session)?;
    let mut streams: Vec<&Stream> = all.iter().filter(|s| s.path == path).collect();
    streams.sort_by_key(|s| (s.started, s.name.clone()));
    let mut out = args.output.stdout();
    if args.list {
        list(&mut out, &path, &streams, args.output.format())?;
        out.flush()?;
        return Ok(Exit::Clean);
    }
    let dest = args.out.clone().unwrap_or_else(|| path.clone());
    let on_disk = std::fs::symlink_metadata(&dest).ok();
    let Some((stream, end)) = choose(&store, &streams, args.at, args.out.is_none().then_some(on_disk.as_ref()).flatten().map(|m| (dest.as_path(), m)))? else {
        if args.output.summary() {
            eprintln!(
                "{}: holds everything the store has of it: nothing to do (--list shows what it holds, --at TIME restores an earlier state)",
                dest.display()
            );
        }
        return Ok(Exit::Clean);
    };
    if stream.from > 0 {
        bail!("the store holds {} from byte {} only (the daemon first read it there): nothing restored", path.display(), stream.from);
    }
    let mut bytes = Vec::with_capacity(end as usize);
    store.read(stream, 0, end, &mut bytes).with_context(|| format!("reading {} from the store", path.display()))?;
    let as_of = stream.extents.iter().find(|e| e.0 >= end).map_or(stream.last_write(), |e| e.1);

    let mut backup = None;
    if let Some(meta) = &on_disk {
        if args.out.is_some() {
            bail!("{}: exists (--out writes a new file)", dest.display());
        }
        if !meta.file_type().is_file() {
            bail!("{}: not a regular file: nothing restored", dest.display());
        }
        use std::os::unix::fs::MetadataExt as _;
        let (writers, _) = crate::sources::holders::writers_of(meta.dev(), meta.ino());
        if let Some(h) = writers.first() {
            bail!("{}: {} (pid {}) has it open for writing: stop it first, then restore", dest.display(), h.command, h.pid);
        }
        if std::fs::read(&dest).is_ok_and(|now| now == bytes) {
            if args.output.summary() {
                eprintln!("{}: already holds those {} bytes: nothing to do", dest.display(), bytes.len());
            }
            return Ok(Exit::Clean);
        }
        let b = backup_name(&dest);
        std::fs::hard_link(&dest, &b).with_context(|| format!("keeping {} as {}", dest.display(), b.display()))?;
        backup = Some(b);
    }
    if let Some(d) = dest.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(d).with_context(|| format!("making {}", d.display()))?;
    }
    crate::sinks::atomic::write_file(&dest, &bytes, None).with_context(|| format!("writing {}", dest.display()))?;

    let resume = resume_command(&dest, &bytes);
    match args.output.format() {
        OutputFormat::Json => {
            let v = serde_json::json!({
                "file": dest.display().to_string(),
                "from": path.display().to_string(),
                "bytes": bytes.len(),
                "as_of": humantime::format_rfc3339_seconds(as_of).to_string(),
                "stream": stream.name,
                "replaced": backup.as_ref().map(|b| b.display().to_string()),
                "resume": resume,
            });
            serde_json::to_writer(&mut out, &v)?;
            out.write_all(b"\n")?;
        }
        OutputFormat::Text => {
            writeln!(out, "{}: restored, {} bytes as of {}", dest.display(), bytes.len(), humantime::format_rfc3339_seconds(as_of))?;
            if let Some(b) = &backup {
                writeln!(out, "  what was there is kept as {}", b.display())?;
            }
            if let Some(r) = &resume {
                writeln!(out, "  resume it with: {r}")?;
            }
        }
    }
    out.flush()?;
    Ok(Exit::Clean)
}

/// The store: `--store`, or the `snapshot` sink of `--config`.
fn store_dir(args: &Args) -> anyhow::Result<PathBuf> {
    if let Some(s) = &args.store {
        return Ok(s.clone());
    }
    let Some(c) = &args.config else {
        bail!("name the snapshot store: --store DIR, or --config FILE (the daemon's configuration, with a `snapshot` sink)");
    };
    let cfg = crate::config::Config::load(c).map_err(|e| anyhow::anyhow!("{e}"))?;
    let dirs: Vec<PathBuf> = cfg
        .sinks
        .iter()
        .filter_map(|s| match s {
            crate::config::SinkConfig::Snapshot { dir, .. } => Some(dir.clone()),
            _ => None,
        })
        .collect();
    match dirs.as_slice() {
        [] => bail!("{}: has no `snapshot` sink", c.display()),
        [d] => Ok(if d.is_relative() { c.parent().unwrap_or(Path::new(".")).join(d) } else { d.clone() }),
        _ => bail!("{}: has {} `snapshot` sinks: name one with --store", c.display(), dirs.len()),
    }
}

/// The one transcript path `session` names among the streams.
fn matching_path(all: &[Stream], session: &str) -> anyhow::Result<PathBuf> {
    let as_path = Path::new(session);
    if session.contains('/') {
        let abs = std::path::absolute(as_path).unwrap_or_else(|_| as_path.to_path_buf());
        if all.iter().any(|s| s.path == abs) {
            return Ok(abs);
        }
        bail!("the snapshot store holds nothing of {}", abs.display());
    }
    if session.is_empty() {
        bail!("name a session");
    }
    // The file's name holds the id, or, for Copilot CLI's `<id>/events.jsonl`, its directory's.
    let named = |p: &Path| {
        let name = |p: Option<&std::ffi::OsStr>| p.and_then(|n| n.to_str()).is_some_and(|n| n.contains(session));
        name(p.file_name()) || (p.file_name().is_some_and(|n| n == "events.jsonl") && name(p.parent().and_then(Path::file_name)))
    };
    let mut paths: Vec<&Path> = all.iter().filter(|s| named(&s.path)).map(|s| s.path.as_path()).collect();
    paths.sort();
    paths.dedup();
    match paths.as_slice() {
        [] => bail!("the snapshot store holds no transcript whose name contains {session:?}"),
        [p] => Ok(p.to_path_buf()),
        more => {
            let list: Vec<String> = more.iter().take(10).map(|p| format!("  {}", p.display())).collect();
            bail!("{session:?} names {} transcripts; give more of the id, or the path:\n{}", more.len(), list.join("\n"))
        }
    }
}

/// The stream, and the end of its bytes, that a restore puts back (`None`: the file on disk
/// holds everything the store has of it).
fn choose<'a>(
    store: &Store,
    streams: &[&'a Stream],
    at: Option<SystemTime>,
    on_disk: Option<(&Path, &std::fs::Metadata)>,
) -> anyhow::Result<Option<(&'a Stream, u64)>> {
    if let Some(t) = at {
        let s = streams.iter().rev().find(|s| s.started <= t && s.end_at(t).is_some()).context("the store holds nothing of the file at that time")?;
        return Ok(Some((s, s.end_at(t).expect("found"))));
    }
    let newest = streams.iter().rev().find(|s| !s.is_empty()).context("the store holds no byte of the file")?;
    let Some((path, meta)) = on_disk else { return Ok(Some((newest, newest.end()))) };
    // The file is there: the newest incarnation other than the one on disk, which is the one
    // of its inode that was not seen leaving and whose bytes the file still starts with (a file
    // cut while no daemon watched is not it; one that grew since is).
    use std::os::unix::fs::MetadataExt as _;
    let current = |s: &Stream| -> bool {
        if s.id != (meta.dev(), meta.ino()) || s.left.is_some() || meta.len() < s.end() || s.from > 0 {
            return false;
        }
        let mut held = Vec::with_capacity(s.end() as usize);
        let mut head = vec![0; s.end() as usize];
        store.read(s, 0, s.end(), &mut held).is_ok()
            && std::fs::File::open(path).and_then(|mut f| std::io::Read::read_exact(&mut f, &mut head)).is_ok()
            && head == held
    };
    Ok(streams.iter().rev().find(|s| !s.is_empty() && !current(s)).map(|s| (*s, s.end())))
}

fn list(out: &mut dyn std::io::Write, path: &Path, streams: &[&Stream], format: OutputFormat) -> anyhow::Result<()> {
    let t = |t: SystemTime| humantime::format_rfc3339_seconds(t).to_string();
    for s in streams {
        match format {
            OutputFormat::Json => {
                let v = serde_json::json!({
                    "file": path.display().to_string(),
                    "stream": s.name,
                    "from": s.from,
                    "bytes": s.end(),
                    "began": t(s.started),
                    "last_write": t(s.last_write()),
                    "left": s.left.as_ref().map(|(how, at)| serde_json::json!({"how": how, "at": t(*at)})),
                });
                serde_json::to_writer(&mut *out, &v)?;
                out.write_all(b"\n")?;
            }
            OutputFormat::Text => {
                let left = s.left.as_ref().map_or(String::new(), |(how, at)| format!(", then {how} at {}", t(*at)));
                writeln!(out, "{}: {} bytes from {} to {}{left} (stream {})", path.display(), s.end(), t(s.started), t(s.last_write()), s.name)?;
            }
        }
    }
    Ok(())
}

/// `NAME.jsonl.<time>.replaced.jsonl` beside `p` (a name no verb reads as a session).
fn backup_name(p: &Path) -> PathBuf {
    let stamp = humantime::format_rfc3339_seconds(SystemTime::now()).to_string().replace(':', "");
    let name = p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    p.with_file_name(format!("{name}.{stamp}.replaced.jsonl"))
}

/// The agent's own command that resumes the restored transcript, when it is one of an agent's.
fn resume_command(p: &Path, bytes: &[u8]) -> Option<String> {
    use crate::sessions::project::Agent;
    use crate::transcript::Format;
    let head = &bytes[..bytes.len().min(crate::sessions::info::HEAD_BYTES)];
    let stem = p.file_stem()?.to_str()?;
    match crate::sessions::info::detect_format(head)? {
        Format::ClaudeCode => {
            let cwd = crate::transcript::lines::lines(1, 0, head).take(64).find_map(|l| crate::sessions::lines::top_level_string(l.bytes, "cwd"))?;
            Some(Agent::ClaudeCode.resume_command(Path::new(cwd.as_ref()), stem))
        }
        Format::Codex => Some(Agent::Codex.resume_command(Path::new("."), crate::sessions::id::rollout_id(stem).unwrap_or(crate::sessions::id::file_id(stem)))),
        Format::Copilot => {
            // `<id>/events.jsonl`: the id is the directory's name, the directory the session's.
            let cwd = crate::sessions::project::copilot_cwd(head)?;
            let id = p.parent()?.file_name()?.to_str()?;
            crate::sessions::id::is_uuid(id).then(|| Agent::Copilot.resume_command(Path::new(&cwd), id))
        }
        _ => None,
    }
}
