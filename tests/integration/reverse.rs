//! The reverse-paged reader agrees with the forward one: on every real fixture, on the data
//! cases and on generated corpora, with page sizes from 1 byte up, it frames the same lines
//! (numbers, offsets, bytes, too-long and torn reports), and the context it finds reading
//! backwards is the one a forward read finds.

use super::framing::{backward, forward};
use super::support::{data, generate, jsonl_files};
use proptest::prelude::*;
use transcriptd::cli::rebuilt::scan;
use transcriptd::transcript::checker::{read_line, Outcome};
use transcriptd::transcript::context::chain::{walk, Node};
use transcriptd::transcript::context::compaction::{Cut, Preserved};
use transcriptd::transcript::context::model_context::{ModelContextScan, RolloutItem};
use transcriptd::transcript::context::resume::preserved_relink;
use transcriptd::transcript::formats::claude_code::ClaudeFields;
use transcriptd::transcript::lines::{lines, Block, LineSplitter};
use transcriptd::transcript::model::Entry;
use transcriptd::transcript::reverse::{LineBytes, SourceLine};
use transcriptd::transcript::{check_bytes, Format};

/// The context a forward read finds: complete lines within the limit, after the last Claude
/// boundary, or the Codex scan fed from an in-memory list, Pi's or Qwen Code's resume order, or
/// everything.
fn forward_context(input: &[u8], max: usize) -> Vec<SourceLine> {
    let (_, _, format) = check_bytes(input, Default::default()).unwrap();
    let mut all = Vec::new();
    let mut s = LineSplitter::new(max);
    s.feed(input, &mut |b| {
        if let Block::Lines { offset, bytes } = b {
            all.extend(lines(0, offset, bytes).filter(|l| l.bytes.len() <= max).map(|l| SourceLine::new(l.offset, l.bytes)));
        }
    });
    match format {
        Some(Format::ClaudeCode) => {
            let last = all
                .iter()
                .rposition(|l| matches!(read_line(0, &l.bytes, usize::MAX, format), Outcome::Parsed(_, p) if matches!(p.entry, Entry::Compaction { .. })));
            // Records of another thread than the main conversation's (subagents that Claude Code
            // 1.0.x wrote into the main file) are not context; the main conversation's
            // `isSidechain` is the boundary's, or the oldest message's.
            let side = |l: &SourceLine| serde_json::from_slice::<serde_json::Value>(&l.bytes).is_ok_and(|v| v["isSidechain"] == true);
            let message = |l: &SourceLine| matches!(read_line(0, &l.bytes, usize::MAX, format), Outcome::Parsed(_, p) if matches!(p.entry, Entry::Message(_)));
            let main = match last {
                Some(i) => Some(side(&all[i])),
                None => all.iter().find(|l| message(l)).map(side),
            };
            let from = last.map_or(0, |i| i + 1);
            // A boundary that preserves messages brings them back from before it, relinked
            // (`resume::preserved_relink`, given every line before the boundary at once).
            let mut kept = all.split_off(from);
            let mut relink = None;
            if let Some(b) = last {
                if let Some(p) = Preserved::of(&all[b].bytes) {
                    let fields = |l: SourceLine| {
                        let f = ClaudeFields::read(&l.bytes).unwrap_or(ClaudeFields::Other { sidechain: false });
                        (l, f)
                    };
                    let older = all[..b].to_vec().into_iter().map(fields).collect();
                    let mut cut = Cut { boundary: Some(fields(all[b].clone())), lines: kept.into_iter().map(fields).collect(), preserved: Some((p, older)) };
                    relink = preserved_relink(&mut cut);
                    kept = cut.lines.into_iter().map(|(l, _)| l).collect();
                }
            }
            // The agent sends the chain of the leaf (`context::chain`), walked from the
            // boundary on; a subagent's own file is kept whole.
            let sent = if main == Some(true) {
                vec![true; kept.len()]
            } else {
                let mut nodes: Vec<Option<Node>> = last.map(|b| &all[b]).into_iter().chain(&kept).map(|l| Node::read(&l.bytes)).collect();
                if let Some(r) = &relink {
                    r.apply(&mut nodes);
                }
                let skip = usize::from(last.is_some());
                let w = walk(&nodes, false);
                (0..kept.len()).map(|i| w.sent[i + skip] || !nodes[i + skip].as_ref().is_some_and(|n| n.message)).collect()
            };
            kept.into_iter().zip(sent).filter(|(l, sent)| *sent && main.is_none_or(|m| side(l) == m)).map(|(l, _)| l).collect()
        }
        Some(Format::Codex) => {
            let mut scan = ModelContextScan::new();
            for l in all.iter().rev() {
                if scan.push(RolloutItem::read(l.offset, &l.bytes)).is_complete() {
                    break;
                }
            }
            let head = all.first().map(|l| RolloutItem::read(l.offset, &l.bytes));
            scan.finish(head).into_iter().map(|i| SourceLine { offset: i.offset, bytes: i.bytes }).collect()
        }
        Some(Format::Pi) => {
            // Pi loads the whole file and sends the path from its last entry, cut at the last
            // compaction of that path (its truth is Pi's own code: oracle.rs); here, the same
            // order read forwards.
            use transcriptd::transcript::formats::pi;
            let fields: Vec<Option<pi::Fields>> =
                all.iter().map(|l| std::str::from_utf8(&l.bytes).ok().and_then(|_| pi::Fields::read(&l.bytes).ok())).collect();
            let (order, _) = pi::resume_order(&fields);
            let mut all: Vec<Option<SourceLine>> = all.into_iter().map(Some).collect();
            order.into_iter().filter_map(|i| all[i].take()).collect()
        }
        Some(Format::Qwen) => {
            // Qwen Code loads the whole file and sends the chain from its last conversation
            // record, from the last compression on it (its truth is Qwen Code itself:
            // oracle.rs); here, the same order read forwards.
            use transcriptd::transcript::formats::qwen;
            let fields: Vec<Option<qwen::Fields>> =
                all.iter().map(|l| std::str::from_utf8(&l.bytes).ok().and_then(|_| qwen::Fields::read(&l.bytes).ok())).collect();
            let (order, _) = qwen::resume_order(&fields);
            let mut all: Vec<Option<SourceLine>> = all.into_iter().map(Some).collect();
            order.into_iter().filter_map(|i| all[i].take()).collect()
        }
        Some(Format::Gemini) => {
            // Gemini CLI's loader over the whole file, read forwards: each record's last version
            // in its first place (the line its version came from, the record as it reads).
            use transcriptd::transcript::formats::gemini;
            let texts: Vec<&[u8]> = all.iter().map(|l| if std::str::from_utf8(&l.bytes).is_ok() { &l.bytes[..] } else { &b""[..] }).collect();
            let records = gemini::resolve(&texts);
            records.into_iter().map(|(i, m)| SourceLine::new(all[i].offset, &serde_json::to_vec(&serde_json::Value::Object(m)).unwrap())).collect()
        }
        Some(Format::Copilot) => {
            // Copilot sends from its last successful compaction, whose summary comes after the
            // user messages before it (its truth is Copilot itself: oracle_copilot.rs).
            use transcriptd::transcript::formats::copilot;
            let utf8 = |l: &SourceLine| std::str::from_utf8(&l.bytes).is_ok();
            match all.iter().rposition(|l| utf8(l) && copilot::is_compaction(&l.bytes)) {
                Some(c) => {
                    let prompts: Vec<String> = all[..c].iter().filter(|l| utf8(l)).filter_map(|l| copilot::prompt(&l.bytes)).collect();
                    let mut kept = all.split_off(c);
                    kept[0].bytes = LineBytes::copy(&copilot::summarised(&kept[0].bytes, &prompts).unwrap());
                    kept
                }
                None => all,
            }
        }
        _ => all,
    }
}

fn corpora() -> Vec<Vec<u8>> {
    let mut inputs: Vec<Vec<u8>> = jsonl_files(&data("real")).iter().chain(jsonl_files(&data("context")).iter()).map(|f| std::fs::read(f).unwrap()).collect();
    let dir = tempfile::tempdir().unwrap();
    for (i, extra) in
        [&["--split-assistant"][..], &["--merge-results", "--faults", "0.02", "--truncate-last", "1"], &["--layout", "type-first", "--malformed", "0.01"]]
            .iter()
            .enumerate()
    {
        let f = dir.path().join(format!("g{i}.jsonl"));
        let seed = (20 + i).to_string();
        let mut args = vec!["--lines", "1500", "--seed", &seed, "--compact-boundary", "0.1"];
        args.extend_from_slice(extra);
        generate(&f, &args);
        inputs.push(std::fs::read(&f).unwrap());
    }
    inputs
}

#[test]
fn every_fixture_and_corpus_frames_the_same_lines_backwards() {
    for (i, input) in corpora().iter().enumerate() {
        for max in [64 << 20, 2000] {
            let fwd = forward(input, max);
            for pages in [&[1usize][..], &[2], &[7, 1, 300], &[4096], &[1 << 20]] {
                assert_eq!(backward(input, max, pages), fwd, "corpus {i}, max {max}, pages {pages:?}");
            }
        }
    }
}

#[test]
fn the_context_found_backwards_is_the_one_found_forwards() {
    for (i, input) in corpora().iter().enumerate() {
        let want = forward_context(input, 64 << 20);
        for page in [1, 5, 4096, 16 << 10] {
            let got = scan(&mut &input[..], None, 64 << 20, page).unwrap();
            assert_eq!(got.context.lines, want, "corpus {i}, first page {page}");
        }
    }
}

#[test]
fn edge_cases_agree() {
    let bom = |s: &[u8]| [&b"\xEF\xBB\xBF"[..], s].concat();
    let with_bom: Vec<Vec<u8>> = [&b""[..], b"\n", b"x\n", b"  \r\n", b"{}", b"  ", b"0123456789\nab\n", b"ab"].iter().map(|s| bom(s)).collect();
    let plain: [&[u8]; 11] = [b"", b"\n", b"x", b"  ", b"a\n  ", b"\r\n", b"abc\r", b"0123456789\nab\n", b"ab\n0123456789", b"   \n       \n", b"a\r\r\nb"];
    for input in plain.iter().copied().chain(with_bom.iter().map(Vec::as_slice)) {
        for max in [1, 3, 5, 100] {
            let fwd = forward(input, max);
            assert_eq!(super::framing::forward_in(input, max, 1), fwd, "{input:?} max {max}: byte by byte");
            for page in [1, 2, 3, 7, 100] {
                assert_eq!(backward(input, max, &[page]), fwd, "{input:?} max {max} page {page}");
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]
    #[test]
    fn random_lines_and_pages(
        lines in proptest::collection::vec("[a-z \\r{}\"]{0,14}", 0..14),
        torn in proptest::option::of("[a-z\\r ]{1,9}"),
        pages in proptest::collection::vec(1usize..40, 1..8),
        max in 1usize..16,
        bom in any::<bool>(),
    ) {
        let mut input = if bom { b"\xEF\xBB\xBF".to_vec() } else { Vec::new() };
        input.extend_from_slice(lines.join("\n").as_bytes());
        if !lines.is_empty() { input.push(b'\n'); }
        if let Some(t) = torn { input.extend_from_slice(t.as_bytes()); }
        prop_assert_eq!(backward(&input, max, &pages), forward(&input, max));
    }

    #[test]
    fn random_pages_over_real_fixtures(file in 0usize..1000, pages in proptest::collection::vec(1usize..70_000, 1..6)) {
        let files = jsonl_files(&data("real"));
        let input = std::fs::read(&files[file % files.len()]).unwrap();
        prop_assert_eq!(backward(&input, 64 << 20, &pages), forward(&input, 64 << 20));
    }
}
