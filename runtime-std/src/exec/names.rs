//! File names for executor ids, and the escaping used inside records.
//!
//! In a file name, ASCII letters, digits, `-`, `_` and `.` are kept and every
//! other byte is written `%XX` (upper-case hex); a leading `.` is escaped too,
//! so no id can produce a `/`, a NUL, a hidden file or `.`/`..`. The empty id
//! is written `%` (an escape is always three bytes, so `%` alone is never
//! produced otherwise). An escaped id longer than [`MAX_ESCAPED`] bytes is
//! shortened to a readable prefix, `~` and 128 bits of the SHA-256 of the id;
//! `~` never occurs in an unshortened name, so the two forms cannot collide.

use sha2::{Digest, Sha256};
use std::fmt::Write as _;

/// The longest escaped id kept whole in a file name.
pub const MAX_ESCAPED: usize = 200;

/// How much of an over-long escaped id is kept, for the operator's eyes.
const SHORT_PREFIX: usize = 100;

/// The file (or directory) name for an id.
pub fn file_name(id: &str) -> String {
    if id.is_empty() {
        return "%".to_owned();
    }
    let mut escaped = escape(id);
    if escaped.starts_with('.') {
        escaped.replace_range(0..1, "%2E");
    }
    if escaped.len() <= MAX_ESCAPED {
        return escaped;
    }
    // Cut at an escape boundary: never in the middle of a `%XX`.
    let mut cut = SHORT_PREFIX;
    while cut > 0 && escaped.as_bytes()[cut - 1] == b'%'
        || cut > 1 && escaped.as_bytes()[cut - 2] == b'%'
    {
        cut -= 1;
    }
    let mut out = escaped[..cut].to_owned();
    out.push('~');
    let digest = Sha256::digest(id.as_bytes());
    for b in &digest[..16] {
        let _ = write!(out, "{b:02x}");
    }
    out
}

/// Percent-escapes every byte but ASCII letters, digits, `-`, `_` and `.`.
pub fn escape(id: &str) -> String {
    let mut out = String::with_capacity(id.len());
    for &b in id.as_bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.') {
            out.push(b as char);
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

/// Reverses [`escape`]; `None` for a malformed escape or invalid UTF-8.
pub fn unescape(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = s.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_safe_and_distinct() {
        assert_eq!(file_name("exec-1.a_b"), "exec-1.a_b");
        assert_eq!(file_name("a/b"), "a%2Fb");
        assert_eq!(file_name("."), "%2E");
        assert_eq!(file_name(".."), "%2E.");
        assert_eq!(file_name(".hidden"), "%2Ehidden");
        assert_eq!(file_name(""), "%");
        assert_ne!(file_name("%2E"), file_name("."));
        let long = "x/".repeat(200);
        let name = file_name(&long);
        assert!(name.len() < 255 && name.contains('~'), "{name}");
        assert_ne!(name, file_name(&"x/".repeat(201)));
    }

    #[test]
    fn escape_round_trips() {
        for id in ["", "plain", "a b\nc=d%", "ünï/cødé", ".."] {
            assert_eq!(unescape(&escape(id)).as_deref(), Some(id));
        }
        assert_eq!(unescape("%4"), None);
        assert_eq!(unescape("%zz"), None);
    }
}
