//! `transcriptd tap`: the records of a running daemon as they are emitted, from its `/tap`
//! endpoint (Server-Sent Events), as JSON lines or readable lines. Records the daemon dropped
//! because this client was too slow are said on stderr with their count.

use super::args::{FilterArgs, OutputArgs};
use super::client::{self, SseParser};
use super::safe;
use super::{Exit, OutputFormat};
use anyhow::Context;
use http_body_util::BodyExt;
use std::io::Write;

/// Arguments of `transcriptd tap`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The daemon's listener (the prometheus sink's address).
    #[arg(long, value_name = "ADDR", default_value = client::DEFAULT_ADDR)]
    pub addr: String,
    /// A file whose first line is the bearer token the listener asks for (the prometheus
    /// sink's `token_file`).
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<std::path::PathBuf>,
    /// Which findings (other records pass, unless --type leaves them out).
    #[command(flatten)]
    pub filter: FilterArgs,
    /// Only records of this type (repeatable: finding, file_opened, compaction, …).
    #[arg(long = "type", value_name = "TYPE")]
    pub types: Vec<String>,
    /// Only records of files matching this glob (`*` also crosses `/`).
    #[arg(long, value_name = "GLOB")]
    pub file: Option<String>,
    /// Stop after this many records.
    #[arg(long, value_name = "N")]
    pub count: Option<u64>,
    /// How records are written (-o json: each record as the daemon wrote it).
    #[command(flatten)]
    pub out: OutputArgs,
}

/// The query string `/tap` is asked with.
pub fn query(args: &Args) -> String {
    let f = args.filter.filter();
    let mut q: Vec<String> = Vec::new();
    q.extend(f.kinds.iter().map(|k| format!("kind={}", k.as_str())));
    if let Some(s) = f.severity {
        q.push(format!("severity={}", s.as_str()));
    }
    q.extend(args.types.iter().map(|t| format!("type={}", encode(t))));
    if let Some(g) = &args.file {
        q.push(format!("file={}", encode(g)));
    }
    if q.is_empty() {
        "/tap".into()
    } else {
        format!("/tap?{}", q.join("&"))
    }
}

fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' | b'*' | b'/' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// One record as a readable line: `time type file[:line] [severity: kind: message]`.
pub fn text_line(v: &serde_json::Value, paint: super::style::Paint) -> String {
    let s = |k: &str| v.get(k).and_then(serde_json::Value::as_str).unwrap_or("");
    let time = s("time");
    let ty = s("type");
    let file = s("file");
    let line = v.get("line").and_then(serde_json::Value::as_u64);
    let rest = match ty {
        "finding" => {
            let at = paint.at(file, line.unwrap_or(0), s("severity"), s("kind"), s("message"));
            return format!("{} {at}", safe::line(time));
        }
        "finding_demoted" | "finding_retracted" => format!("{}: {}", s("kind"), s("reason")),
        "file_opened" => format!("format {} from offset {}", s("format"), v.get("offset").and_then(serde_json::Value::as_u64).unwrap_or(0)),
        "file_closed" => match v.get("to").and_then(serde_json::Value::as_str) {
            Some(to) => format!("{} to {to}", s("reason")),
            None => s("reason").to_owned(),
        },
        "repaired" => format!("into {} (+{} -{} ~{})", s("output"), v["inserted"], v["removed"], v["modified"]),
        "repair_planned" => format!("{} edits", v["edits"]),
        _ => String::new(),
    };
    let place = match line {
        Some(l) => format!("{file}:{l}"),
        None => file.to_owned(),
    };
    // Everything here but the words above came from the daemon, and from transcripts before
    // that: controls escaped ([`safe`]).
    let text = if rest.is_empty() { format!("{time} {ty} {place}") } else { format!("{time} {ty} {place}: {rest}") };
    safe::line(&text).into_owned()
}

/// Runs `transcriptd tap`: until the daemon closes the stream, `--count` records, or a broken
/// pipe.
pub fn run(args: Args) -> anyhow::Result<Exit> {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().context("starting the runtime")?;
    rt.block_on(follow(args))
}

async fn follow(args: Args) -> anyhow::Result<Exit> {
    let path = query(&args);
    let token = client::read_token(args.token_file.as_deref())?;
    let resp = client::get(&args.addr, &path, token.as_deref()).await?;
    let mut body = resp.into_body();
    let mut out = args.out.stdout();
    let json = args.out.format() == OutputFormat::Json;
    let paint = args.out.paint();
    let mut parser = SseParser::default();
    let mut n = 0u64;
    let mut missed = 0u64;
    while let Some(frame) = body.frame().await {
        let frame = frame.context("reading the tap")?;
        let Some(data) = frame.data_ref() else { continue };
        let skipped = parser.skipped;
        let events = parser.push(data);
        if parser.skipped > skipped && !args.out.quiet {
            out.flush()?;
            super::style::warning(format!(
                "an event of over {} MiB without its end was skipped: the peer is not a transcriptd daemon, or a broken one",
                client::MAX_EVENT_BYTES >> 20
            ));
        }
        for e in events {
            match e.kind.as_str() {
                "missed" => {
                    let m = serde_json::from_str::<serde_json::Value>(&e.data).ok().and_then(|v| v["missed"].as_u64()).unwrap_or(0);
                    missed += m;
                    out.flush()?;
                    if !args.out.quiet {
                        super::style::warning(format!("{m} records missed: this client took them too slowly (the daemon dropped them for it, nothing else)"));
                    }
                }
                _ => {
                    if json {
                        out.write_all(e.data.as_bytes())?;
                        out.write_all(b"\n")?;
                    } else {
                        let v: serde_json::Value = serde_json::from_str(&e.data).context("a record that is not JSON")?;
                        writeln!(out, "{}", text_line(&v, paint))?;
                    }
                    n += 1;
                    if args.count.is_some_and(|c| n >= c) {
                        out.flush()?;
                        return Ok(Exit::Clean);
                    }
                }
            }
        }
        out.flush()?;
    }
    out.flush()?;
    if args.out.summary() {
        eprintln!("transcriptd tap: the daemon closed the stream after {n} records{}", if missed > 0 { format!(" ({missed} missed)") } else { String::new() });
    }
    Ok(Exit::Clean)
}
