//! The in-place swap's two ends: the backup linked (or copied) before the rename, and after
//! it the bytes a writer still appends to the old file carried into the new one
//! ([`follow_old`], at most [`FOLLOW_MAX`]), then the backup kept or removed.

use super::{complete_lines_end, list, Carried, Report, Settings, FOLLOW_MAX, QUIET};
use crate::sinks::atomic::{self, Keep};
use crate::sources::holders::{self, Holder};
use crate::sources::regular::Identity;
use anyhow::Context;
use std::fs::File;
use std::io::Write;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The backup of an in-place repair: a hard link to the old file.
pub(super) struct Backup {
    pub(super) path: PathBuf,
    /// Made by this run (not one a stopped run left).
    pub(super) created: bool,
    /// Names of the old file besides its own and the backup's.
    pub(super) other_links: u64,
}

/// Links the old file (`path`, open as `old`) under `<name><suffix>`, or the first free
/// `<name><suffix>.N`, never overwriting anything; reuses a backup that already is a link to
/// it (a run stopped before its swap left it). Copies when the file system refuses the link.
pub(super) fn link_backup(path: &Path, suffix: &str, old: &File, before: Identity, keep: Keep) -> anyhow::Result<Backup> {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let nlink = old.metadata()?.nlink();
    for k in 0u32.. {
        let candidate = path.with_file_name(if k == 0 { format!("{name}{suffix}") } else { format!("{name}{suffix}.{k}") });
        match std::fs::symlink_metadata(&candidate) {
            Ok(m) if m.is_file() && (m.dev(), m.ino()) == (before.dev, before.ino) => {
                return Ok(Backup { path: candidate, created: false, other_links: nlink.saturating_sub(2) });
            }
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e).with_context(|| format!("looking at {}", candidate.display())),
        }
        match std::fs::hard_link(path, &candidate) {
            Ok(()) => {
                let m = std::fs::symlink_metadata(&candidate)?;
                if (m.dev(), m.ino()) != (before.dev, before.ino) {
                    let _ = std::fs::remove_file(&candidate);
                    anyhow::bail!("{} was replaced by another file during the repair", path.display());
                }
                atomic::sync_dir(atomic::parent_dir(&candidate))?;
                return Ok(Backup { path: candidate, created: true, other_links: nlink.saturating_sub(1) });
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(_) => {
                let len = old.metadata()?.len();
                atomic::copy_file(old, len, &candidate, Some(keep)).with_context(|| format!("writing backup {}", candidate.display()))?;
                return Ok(Backup { path: candidate, created: true, other_links: nlink.saturating_sub(1) });
            }
        }
    }
    unreachable!("an endless supply of names")
}

/// After an in-place swap: carries what was appended to the old file into the new one, then
/// keeps or (with `--no-backup`, when nothing was appended) removes the backup.
pub(super) fn after_swap(old: &File, covered: u64, live: bool, new: &File, backup: Backup, s: &Settings, report: &mut Report) -> std::io::Result<()> {
    let f = follow_old(old, covered, live, new)?;
    report.carried = f.carried;
    let shown = backup.path.display().to_string();
    if f.carried.bytes > 0 {
        report.notes.push(format!(
            "{} line{} ({} bytes) appended to the old file during the repair were carried into the repaired file",
            f.carried.lines,
            if f.carried.lines == 1 { "" } else { "s" },
            f.carried.bytes
        ));
    }
    if f.interleaved {
        report
            .notes
            .push("another process appended to the repaired file while lines were carried over: those lines may not be in the order they were written".into());
    }
    if f.truncated {
        report.notes.push(format!("the old file shrank after the swap (it was truncated): it is kept as {shown}"));
    }
    if !f.still_writing.is_empty() {
        report.notes.push(format!(
            "{} still holds the old file open for writing after {}s: what it writes from now on goes to {shown} only (restart it so that it opens the repaired file)",
            list(&f.still_writing),
            FOLLOW_MAX.as_secs()
        ));
    } else if f.timed_out {
        report.notes.push(format!(
            "the old file was still growing after {}s (written by a process this one cannot see): what is appended from now on goes to {shown} only",
            FOLLOW_MAX.as_secs()
        ));
    }
    if s.backup.is_some() {
        report.backup = Some(shown);
        return Ok(());
    }
    // --no-backup: a name this run did not make is not removed (a link the user made, or one a
    // stopped run left: it cannot tell them apart).
    if !backup.created {
        report.notes.push(format!("{shown}, a link to the old file made before this run, is left as it is despite --no-backup"));
        report.backup = Some(shown);
        return Ok(());
    }
    // An old file that grew is never deleted.
    if f.grew || f.truncated || f.timed_out {
        report.notes.push(format!("the old file is kept as {shown} despite --no-backup: a writer appended to it during the repair"));
        report.backup = Some(shown);
        return Ok(());
    }
    std::fs::remove_file(&backup.path)?;
    // Appended between the last look and the unlink: still readable through the descriptor.
    let len = old.metadata()?.len();
    if len > f.end {
        let late = copy_appended(old, f.end, len, new)?;
        report.carried.bytes += late.bytes;
        report.carried.lines += late.lines;
        report.notes.push(format!("{} bytes appended to the old file as its backup was removed were carried into the repaired file", late.bytes));
    }
    Ok(())
}

/// What [`follow_old`] saw.
#[derive(Debug, Default)]
struct Followed {
    carried: Carried,
    /// Where the carrying stopped in the old file.
    end: u64,
    grew: bool,
    truncated: bool,
    /// Another process appended to the new file meanwhile.
    interleaved: bool,
    /// Gave up after [`FOLLOW_MAX`].
    timed_out: bool,
    /// Writers still holding the old file when the carrying gave up.
    still_writing: Vec<Holder>,
}

/// Appends to `new` what was appended to `old` past `from`, as it comes: whole lines while a
/// writer may still complete the last one, everything once no writer holds `old` open and it
/// has stayed quiet for [`QUIET`]. Gives up after [`FOLLOW_MAX`]. When the file was not `live`
/// (no writer was seen) and has not grown, returns at once.
fn follow_old(old: &File, from: u64, live: bool, new: &File) -> std::io::Result<Followed> {
    let mut f = Followed { end: from, ..Followed::default() };
    let id = Identity::of(&old.metadata()?);
    if !live && id.len == from {
        return Ok(f);
    }
    set_append(new)?;
    let started = Instant::now();
    let mut expected = new.metadata()?.len();
    let mut last_growth: Option<Instant> = None;
    let mut writers: Vec<Holder> = Vec::new();
    let mut scanned: Option<Instant> = None;
    loop {
        let len = old.metadata()?.len();
        if len < f.end {
            f.truncated = true;
            return Ok(f);
        }
        if scanned.is_none_or(|t| t.elapsed() >= Duration::from_millis(20)) {
            writers = holders::writers_of(id.dev, id.ino).0;
            scanned = Some(Instant::now());
        }
        let finished = writers.is_empty() && last_growth.is_none_or(|t| t.elapsed() >= QUIET);
        let timed_out = started.elapsed() >= FOLLOW_MAX;
        if len > f.end {
            // The whole rest once the writers are gone; whole lines while one may be writing.
            let upto = if finished { len } else { whole_lines_end(old, f.end, len)? };
            if upto > f.end {
                f.grew = true;
                last_growth = Some(Instant::now());
                if new.metadata()?.len() != expected {
                    f.interleaved = true;
                }
                let c = copy_appended(old, f.end, upto, new)?;
                expected = new.metadata()?.len();
                f.carried.bytes += c.bytes;
                f.carried.lines += c.lines;
                f.end = upto;
                if !timed_out {
                    continue;
                }
            }
        }
        if timed_out {
            f.timed_out = true;
            f.still_writing = writers;
            return Ok(f);
        }
        if finished && len == f.end {
            return Ok(f);
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// The end of the last whole line in `[from, to)` of `file` (`from` if there is none).
fn whole_lines_end(file: &File, from: u64, to: u64) -> std::io::Result<u64> {
    let end = complete_lines_end(file, to)?;
    Ok(end.max(from))
}

/// Appends bytes `[from, to)` of `old` to `new` (an append-mode handle), in writes that end at
/// line ends where they can (a line longer than the buffer is written in pieces), so that
/// another process appending whole lines to `new` cannot land inside one.
fn copy_appended(old: &File, from: u64, to: u64, mut new: &File) -> std::io::Result<Carried> {
    let mut buf = vec![0u8; ((to - from) as usize).min(8 << 20)];
    let mut at = from;
    let mut c = Carried::default();
    while at < to {
        let mut n = ((to - at) as usize).min(buf.len());
        old.read_exact_at(&mut buf[..n], at)?;
        if at + (n as u64) < to {
            n = memchr::memrchr(b'\n', &buf[..n]).map_or(n, |i| i + 1);
        }
        new.write_all(&buf[..n])?;
        c.bytes += n as u64;
        c.lines += memchr::memchr_iter(b'\n', &buf[..n]).count() as u64;
        at += n as u64;
    }
    new.sync_data()?;
    Ok(c)
}

/// Puts `file` in append mode: writes land at its end, whoever else appends.
fn set_append(file: &File) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    // SAFETY: fcntl on a descriptor borrowed for the call; no memory is passed.
    let flags = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_GETFL) };
    // SAFETY: as above.
    if flags < 0 || unsafe { libc::fcntl(file.as_raw_fd(), libc::F_SETFL, flags | libc::O_APPEND) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}
