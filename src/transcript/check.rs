//! The check verb's pipeline as a function: a [`Pipeline`] with the preset stage list
//! `[validate, loss]` behind the parse front, over bytes in memory or fed in chunks. What the shells
//! check, the tests and the fuzz targets check here: one path, no second validation.

use super::checker::{collect, feed_parallel, Options, Stats, StrictStop};
use super::finding::Finding;
use super::formats::Format;
use super::pipeline::{Event, Pipeline};
use super::stages::{loss::Loss, validate::Validate};
use std::time::Duration;

/// The check pipeline over one whole stream: the parse front reads as `opts` say, then the
/// `validate` and `loss` stages. Feed it, then give [`Pipeline::finish`]'s events to [`findings`].
pub fn pipeline(opts: Options) -> Pipeline {
    Pipeline::transcript(opts, vec![Box::new(Validate::new(Duration::MAX)), Box::new(Loss::new(Duration::MAX))], Duration::MAX)
}

/// The findings among a finished pipeline's events: demotions applied, sorted by line.
pub fn findings(events: Vec<Event>) -> Vec<Finding> {
    collect(events.into_iter().filter_map(|e| match e {
        Event::Output(o) => Some(o),
        _ => None,
    }))
}

/// Checks a whole in-memory transcript: the findings (demotions applied, sorted by line), the
/// stats and the format. With `opts.jobs` over 1, parsed on that many threads
/// ([`feed_parallel`]), which gives the same result.
pub fn check_bytes(input: &[u8], opts: Options) -> Result<(Vec<Finding>, Stats, Option<Format>), StrictStop> {
    let jobs = opts.jobs;
    let mut p = pipeline(opts);
    if jobs > 1 {
        let mut rest = input;
        let front = p.checker_mut().expect("a transcript pipeline");
        feed_parallel(front, jobs, 64 << 10, |buf| {
            let n = buf.len().min(rest.len());
            buf[..n].copy_from_slice(&rest[..n]);
            rest = &rest[n..];
            n
        })?;
    } else {
        p.feed(input)?;
    }
    let (events, stats, format) = p.finish()?;
    Ok((findings(events), stats, format))
}
