//! Points in time as the session files write them: RFC 3339 strings, in UTC (`…Z`, Claude Code
//! and Codex) or with an offset (`…+00:00`, what `chrono`'s `to_rfc3339` writes in meta
//! sidecars), and file modification times.
//!
//! Sessions are ordered by these values, and one list mixes values from meta sidecars, from the
//! last line of a transcript and from the file system, so they are all turned into one
//! comparable type. Comparing the strings would order `…+02:00` wrongly and cut ties at the
//! string's precision; parsing keeps the full nanosecond precision. Pure: no clock is read here.

use serde::{Serialize, Serializer};
use std::fmt;

/// A point in time: seconds and nanoseconds since the Unix epoch, UTC. Orders chronologically.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp {
    secs: i64,
    nanos: u32,
}

impl Timestamp {
    /// The instant `secs` seconds and `nanos` nanoseconds (below 10⁹) after the epoch.
    pub fn from_unix(secs: i64, nanos: u32) -> Self {
        Timestamp { secs: secs + i64::from(nanos / 1_000_000_000), nanos: nanos % 1_000_000_000 }
    }

    /// Seconds since the epoch.
    pub fn unix_secs(self) -> i64 {
        self.secs
    }

    /// Milliseconds since the epoch (what JavaScript's `Date.parse` gives, to the millisecond).
    pub fn unix_millis(self) -> i64 {
        self.secs * 1000 + i64::from(self.nanos / 1_000_000)
    }

    /// Parses an RFC 3339 date-time: `YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)`. `t`, `z` and a
    /// space instead of `T` are accepted, as RFC 3339 allows. Fractions finer than nanoseconds
    /// are truncated. `None` for anything else (no time zone, out-of-range fields).
    pub fn parse_rfc3339(s: &str) -> Option<Self> {
        let b = s.as_bytes();
        if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'T' | b't' | b' ') || b[13] != b':' || b[16] != b':' {
            return None;
        }
        let year = digits(&b[0..4])? as i64;
        let month = digits(&b[5..7])?;
        let day = digits(&b[8..10])?;
        let (hour, min, sec) = (digits(&b[11..13])?, digits(&b[14..16])?, digits(&b[17..19])?);
        if !(1..=12).contains(&month) || day == 0 || day > days_in_month(year, month) || hour > 23 || min > 59 || sec > 60 {
            return None;
        }
        let mut rest = &b[19..];
        let mut nanos = 0u32;
        if let Some(frac) = rest.strip_prefix(b".") {
            let n = frac.iter().take_while(|c| c.is_ascii_digit()).count();
            if n == 0 {
                return None;
            }
            for (i, d) in frac[..n].iter().take(9).enumerate() {
                nanos += u32::from(d - b'0') * 10u32.pow(8 - i as u32);
            }
            rest = &frac[n..];
        }
        let offset_secs = match rest {
            b"Z" | b"z" => 0,
            [sign @ (b'+' | b'-'), h1, h2, b':', m1, m2] => {
                let (h, m) = (digits(&[*h1, *h2])?, digits(&[*m1, *m2])?);
                if h > 23 || m > 59 {
                    return None;
                }
                let off = i64::from(h * 3600 + m * 60);
                if *sign == b'+' {
                    off
                } else {
                    -off
                }
            }
            _ => return None,
        };
        let days = days_from_civil(year, month, day);
        let secs = days * 86_400 + i64::from(hour * 3600 + min * 60 + sec) - offset_secs;
        Some(Timestamp { secs, nanos })
    }

    /// RFC 3339 in UTC with millisecond precision, as Claude Code and Codex write it:
    /// `2026-02-23T19:36:02.635Z`.
    pub fn to_rfc3339(self) -> String {
        let days = self.secs.div_euclid(86_400);
        let rem = self.secs.rem_euclid(86_400);
        let (y, m, d) = civil_from_days(days);
        format!("{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:03}Z", rem / 3600, rem % 3600 / 60, rem % 60, self.nanos / 1_000_000)
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_rfc3339())
    }
}

impl Serialize for Timestamp {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_rfc3339())
    }
}

/// The value of two to four ASCII digits.
fn digits(b: &[u8]) -> Option<u32> {
    b.iter().try_fold(0u32, |n, c| c.is_ascii_digit().then(|| n * 10 + u32::from(c - b'0')))
}

fn is_leap(y: i64) -> bool {
    y % 4 == 0 && (y % 100 != 0 || y % 400 == 0)
}

fn days_in_month(y: i64, m: u32) -> u32 {
    match m {
        2 if is_leap(y) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's `days_from_civil`).
fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let m = i64::from(m);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The date of a day number from [`days_from_civil`].
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ts(s: &str) -> Timestamp {
        Timestamp::parse_rfc3339(s).unwrap_or_else(|| panic!("{s} should parse"))
    }

    #[test]
    fn parses_what_the_agents_write() {
        assert_eq!(ts("1970-01-01T00:00:00Z"), Timestamp::from_unix(0, 0));
        assert_eq!(ts("2026-02-23T19:36:02.635Z"), Timestamp::from_unix(1_771_875_362, 635_000_000));
        // chrono's to_rfc3339: nanoseconds and a numeric offset.
        assert_eq!(ts("2026-02-23T19:36:02.635000001+00:00"), Timestamp::from_unix(1_771_875_362, 635_000_001));
        assert_eq!(ts("2026-02-23T21:36:02.635+02:00"), ts("2026-02-23T19:36:02.635Z"));
        assert_eq!(ts("2026-02-23T17:06:02.635-02:30"), ts("2026-02-23T19:36:02.635Z"));
        assert_eq!(ts("2026-02-23 19:36:02z"), ts("2026-02-23T19:36:02Z"));
        assert_eq!(ts("1969-12-31T23:59:59Z"), Timestamp::from_unix(-1, 0));
        assert_eq!(ts("2024-02-29T00:00:00Z").unix_secs(), 1_709_164_800);
    }

    #[test]
    fn rejects_what_is_not_rfc3339() {
        for s in [
            "",
            "2026-02-23",
            "2026-02-23T19:36:02",
            "2026-02-23T19:36:02.Z",
            "2026-13-01T00:00:00Z",
            "2025-02-29T00:00:00Z",
            "2026-02-23T24:00:00Z",
            "2026-02-23T19:36:02+0200",
            "2026-02-23T19:36:02Zjunk",
            "yesterday at noon, roughly",
            "２０２６-02-23T19:36:02Z",
        ] {
            assert_eq!(Timestamp::parse_rfc3339(s), None, "{s}");
        }
    }

    #[test]
    fn formats_in_utc_with_milliseconds_and_round_trips() {
        assert_eq!(ts("2026-02-23T21:36:02.635987+02:00").to_rfc3339(), "2026-02-23T19:36:02.635Z");
        assert_eq!(Timestamp::from_unix(-1, 0).to_rfc3339(), "1969-12-31T23:59:59.000Z");
        for secs in [0i64, 951_782_400, 1_709_164_800, 4_102_444_799, -86_400 * 365] {
            let t = Timestamp::from_unix(secs, 123_000_000);
            assert_eq!(ts(&t.to_rfc3339()), t);
        }
    }

    #[test]
    fn orders_chronologically_across_offsets() {
        let mut v = [ts("2026-01-01T10:00:00+05:00"), ts("2026-01-01T06:00:00Z"), ts("2026-01-01T05:59:59.999Z")];
        v.sort();
        assert_eq!(v, [ts("2026-01-01T05:00:00Z"), ts("2026-01-01T05:59:59.999Z"), ts("2026-01-01T06:00:00Z")]);
    }
}
