//! Session ids: what a user may type as a prefix, and how an id is read from a file or directory
//! name without opening it.
//!
//! Lookup must stay fast over a hundred thousand sessions, so ids come from names only:
//!
//! - Claude Code and the flat layout: `<id>.jsonl` → the stem.
//! - Codex: `rollout-<timestamp>-<id>.jsonl` → the id after the timestamp.
//! - Session directories: `<timestamp>-<id>/` → the id after the timestamp.
//!
//! A name ending in a UUID (`8-4-4-4-12` hex digits) has that UUID as its id. Otherwise the
//! timestamp is the leading run of `-`-separated tokens made of digits (and `T`, `Z`, `.`, `_`),
//! the first with at least four digits, and the id is what follows; an id that itself starts
//! with such a token cannot be told apart from the timestamp unless it is a UUID.
//!
//! A prefix is restricted to `[A-Za-z0-9_-]`: it is only ever compared with names, never joined
//! to a path, and the restriction makes sure that `../x` or `a/b` could not reach outside a root
//! even if it were. Pure: no IO.

/// The longest prefix accepted (ids are far shorter; this bounds error messages).
pub const MAX_PREFIX_LEN: usize = 200;

/// Why a prefix was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum PrefixError {
    /// The prefix is empty.
    #[error("the prefix is empty")]
    Empty,
    /// The prefix is longer than [`MAX_PREFIX_LEN`].
    #[error("the prefix is longer than {MAX_PREFIX_LEN} characters")]
    TooLong,
    /// The prefix has a character that no session id has.
    #[error("{0:?} is not allowed: a session id has only letters, digits, `-` and `_`")]
    BadChar(char),
}

/// Whether `c` may appear in a session id prefix.
pub fn is_id_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '-' || c == '_'
}

/// Checks a prefix typed by a user.
pub fn validate_prefix(prefix: &str) -> Result<(), PrefixError> {
    if prefix.is_empty() {
        return Err(PrefixError::Empty);
    }
    if let Some(c) = prefix.chars().find(|&c| !is_id_char(c)) {
        return Err(PrefixError::BadChar(c));
    }
    if prefix.len() > MAX_PREFIX_LEN {
        return Err(PrefixError::TooLong);
    }
    Ok(())
}

/// Whether `s` is a UUID in its textual form (`8-4-4-4-12` hex digits, either case).
pub fn is_uuid(s: &str) -> bool {
    /// Whether each byte value is an ASCII hex digit: one load per byte, no branches, since
    /// a lookup tests every directory name it meets.
    const HEX: [bool; 256] = {
        let mut t = [false; 256];
        let mut i = 0;
        while i < 256 {
            t[i] = (i as u8).is_ascii_hexdigit();
            i += 1;
        }
        t
    };
    let b = s.as_bytes();
    b.len() == 36
        && b[8] == b'-'
        && b[13] == b'-'
        && b[18] == b'-'
        && b[23] == b'-'
        && [&b[..8], &b[9..13], &b[14..18], &b[19..23], &b[24..]].iter().all(|part| part.iter().fold(true, |ok, c| ok & HEX[*c as usize]))
}

/// Where the leading timestamp of `b` ends: the end of its leading run of `-`-separated
/// timestamp tokens (digits and `T`, `Z`, `.`, `_`, starting with a digit; the first with at
/// least four digits), 0 when there is none. With `keep_last`, the last token is never taken.
/// Byte-wise, since a lookup runs this on every directory name it meets.
fn leading_timestamp(b: &[u8], keep_last: bool) -> usize {
    let (mut end, mut start, mut lead, mut in_lead) = (0, 0, 0, true);
    for i in 0..=b.len() {
        // A `-` past the end closes the last token.
        let c = b.get(i).copied().unwrap_or(b'-');
        if c == b'-' {
            if lead == 0 || (start == 0 && lead < 4) || (keep_last && i == b.len()) {
                return end;
            }
            end = i;
            (start, lead, in_lead) = (i + 1, 0, true);
        } else if c.is_ascii_digit() {
            lead += usize::from(in_lead);
        } else if matches!(c, b'T' | b'Z' | b'.' | b'_') {
            in_lead = false;
        } else {
            return end;
        }
    }
    end
}

/// Splits `<timestamp>-<id>` into its timestamp and id; `None` when the name has no leading
/// timestamp or nothing after it.
pub fn split_timestamped(name: &str) -> Option<(&str, &str)> {
    let b = name.as_bytes();
    // Every timestamp starts with a year: most names are rejected here.
    if b.len() < 6 || !b[..4].iter().all(u8::is_ascii_digit) {
        return None;
    }
    // `-` is ASCII, so both slices below start at character boundaries.
    if b.len() > 37 && b[b.len() - 37] == b'-' {
        let (head, uuid) = (&name[..b.len() - 37], &name[b.len() - 36..]);
        if is_uuid(uuid) && leading_timestamp(head.as_bytes(), false) == head.len() {
            return Some((head, uuid));
        }
    }
    let end = leading_timestamp(b, true);
    let id = name.get(end + 1..).filter(|id| end > 0 && !id.is_empty())?;
    Some((&name[..end], id))
}

/// The id of a Codex rollout file stem `rollout-<timestamp>-<id>`; `None` when the stem does not
/// start with `rollout-`. A rollout without a timestamp has the rest of the stem as its id.
pub fn rollout_id(stem: &str) -> Option<&str> {
    let rest = stem.strip_prefix("rollout-").filter(|r| !r.is_empty())?;
    Some(split_timestamped(rest).map_or(rest, |(_, id)| id))
}

/// The id of a transcript file stem in the `file` layout: the UUID it ends with, after a `-`
/// (`codex-rollout-2026-02-23T20-34-25-<uuid>`) or a `_` (Pi's `<timestamp>_<uuid>`), the id
/// after a Gemini CLI `session-<timestamp>-`, or the whole stem.
pub fn file_id(stem: &str) -> &str {
    let b = stem.as_bytes();
    // Gemini CLI: `session-<YYYY-MM-DDTHH-MM>-<the session id's first 8 characters>`.
    if let Some((_, id)) = stem.strip_prefix("session-").and_then(split_timestamped) {
        return id;
    }
    if b.len() > 37 && matches!(b[b.len() - 37], b'-' | b'_') && is_uuid(&stem[b.len() - 36..]) {
        &stem[b.len() - 36..]
    } else {
        stem
    }
}

/// The id of a session directory: the id after its timestamp, or the whole name.
pub fn session_dir_id(name: &str) -> &str {
    split_timestamped(name).map_or(name, |(_, id)| id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_name_ending_in_a_uuid_has_it_as_its_id() {
        let u = "66666666-6666-4666-8666-666666666666";
        assert_eq!(file_id(&format!("codex-malformed-rollout-{u}")), u);
        assert_eq!(file_id(&format!("codex-rollout-2026-02-23T20-34-25-{u}")), u);
        assert_eq!(file_id(u), u);
        assert_eq!(file_id(&format!("2026-03-01T10-00-00-000Z_{u}")), u);
        assert_eq!(file_id("agent-36541525"), "agent-36541525");
        assert_eq!(file_id("session-2026-12-03T12-14-be9c0f73"), "be9c0f73", "Gemini CLI");
        assert_eq!(file_id(&format!("x{u}")), format!("x{u}"));
    }

    #[test]
    fn prefixes_are_id_characters_only() {
        assert_eq!(validate_prefix("4c2d"), Ok(()));
        assert_eq!(validate_prefix("agent-a881341"), Ok(()));
        assert_eq!(validate_prefix("019c8bfe-ec25_X"), Ok(()));
        assert_eq!(validate_prefix(""), Err(PrefixError::Empty));
        assert_eq!(validate_prefix("../x"), Err(PrefixError::BadChar('.')));
        assert_eq!(validate_prefix("a/b"), Err(PrefixError::BadChar('/')));
        assert_eq!(validate_prefix("a\\b"), Err(PrefixError::BadChar('\\')));
        assert_eq!(validate_prefix("a*"), Err(PrefixError::BadChar('*')));
        assert_eq!(validate_prefix("a\0"), Err(PrefixError::BadChar('\0')));
        assert_eq!(validate_prefix("é"), Err(PrefixError::BadChar('é')));
        assert_eq!(validate_prefix(&"a".repeat(MAX_PREFIX_LEN + 1)), Err(PrefixError::TooLong));
    }

    #[test]
    fn uuids() {
        assert!(is_uuid("019c8bfe-ec25-79e0-97d7-bda6a9c575ff"));
        assert!(is_uuid("258C7280-AE70-4798-800F-63464D01A85D"));
        assert!(!is_uuid("019c8bfe-ec25-79e0-97d7-bda6a9c575f"));
        assert!(!is_uuid("019c8bfe-ec25-79e0-97d7_bda6a9c575ff"));
        assert!(!is_uuid("019c8bfe-ec25-79e0-97d7-bda6a9c575fg"));
    }

    #[test]
    fn codex_rollout_names() {
        assert_eq!(rollout_id("rollout-2026-02-23T20-34-25-019c8bfe-ec25-79e0-97d7-bda6a9c575ff"), Some("019c8bfe-ec25-79e0-97d7-bda6a9c575ff"));
        assert_eq!(rollout_id("rollout-2026-02-23T20-34-25-abc"), Some("abc"));
        assert_eq!(rollout_id("rollout-foo"), Some("foo"));
        assert_eq!(rollout_id("rollout-"), None);
        assert_eq!(rollout_id("codex-rollout-2026-01-02T03-04-05-11111111-1111-4111-8111-111111111111"), None);
    }

    #[test]
    fn session_directory_names() {
        assert_eq!(split_timestamped("20260101T120000Z-abc123"), Some(("20260101T120000Z", "abc123")));
        assert_eq!(split_timestamped("2026-01-01T12-00-00-abc"), Some(("2026-01-01T12-00-00", "abc")));
        assert_eq!(split_timestamped("1767225600-s_1"), Some(("1767225600", "s_1")));
        // A UUID id may start with digits: the UUID is taken whole.
        assert_eq!(
            split_timestamped("20260101T120000-12345678-1234-1234-1234-123456789abc"),
            Some(("20260101T120000", "12345678-1234-1234-1234-123456789abc"))
        );
        // Otherwise an all-digit token is read as part of the timestamp, but the last token is
        // always left for the id.
        assert_eq!(split_timestamped("20260101-123-abc"), Some(("20260101-123", "abc")));
        assert_eq!(split_timestamped("20260101-123"), Some(("20260101", "123")));
        for not in ["-home-me-app", "2026", "202-abc", "abc-20260101", "20260101-", "ws1", "019c8bfe-ec25-79e0-97d7-bda6a9c575ff"] {
            assert_eq!(split_timestamped(not), None, "{not}");
        }
        assert_eq!(session_dir_id("20260101T120000Z-abc123"), "abc123");
        assert_eq!(session_dir_id("my-session"), "my-session");
        // Names that are not ASCII do not panic.
        assert_eq!(split_timestamped("2026-é-ééééééééééééééééééééééééééééééééééé"), Some(("2026", "é-ééééééééééééééééééééééééééééééééééé")));
    }
}
