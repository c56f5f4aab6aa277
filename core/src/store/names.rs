//! Node and file names for record keys, safe for any id.
//!
//! A key maps to a stem: `epoch`, `w-<id>` for a worker, `f-<id>` for a
//! framework, `h-<seq>` (twenty decimal digits) for a finished framework,
//! `revocations` for the revoked tokens, `t-<name>` for a tenant. In the id, ASCII letters, digits, `-`, `_` and `.` are kept and
//! every other byte is written `%XX` (upper-case hex), so no id can produce a
//! `/`, a NUL, a hidden file, `.`/`..` or a name that collides with another
//! key. An escaped id longer than [`MAX_ESCAPED`] bytes (file names are limited
//! to 255 bytes) is shortened to a readable prefix, `~`, and 128 bits of the
//! SHA-256 of the id; `~` never occurs in an unshortened name, so the two forms
//! cannot collide. The filesystem store adds an extension; the ZooKeeper store
//! uses the stem as the node name under `<root>/state/`.

use super::RecordKey;
use sha2::{Digest, Sha256};
use std::fmt::Write as _;

/// The stem of the revocations record (no id can produce it: ids get a
/// one-letter prefix and a dash).
pub const REVOCATIONS_STEM: &str = "revocations";

/// The longest escaped id kept whole in a file name.
pub const MAX_ESCAPED: usize = 200;

/// How much of an over-long escaped id is kept, for the operator's eyes.
const SHORT_PREFIX: usize = 100;

/// The stem (file name without extension, ZooKeeper node name) a key is
/// stored under.
pub fn key_stem(key: &RecordKey) -> String {
    match key {
        RecordKey::Epoch => "epoch".to_owned(),
        RecordKey::Worker(w) => with_prefix("w-", w.as_str()),
        RecordKey::Framework(f) => with_prefix("f-", f.as_str()),
        // Twenty digits: every u64, and names sort in the history's order.
        RecordKey::History(seq) => format!("h-{seq:020}"),
        RecordKey::Revocations => REVOCATIONS_STEM.to_owned(),
        RecordKey::Tenant(t) => with_prefix("t-", t),
    }
}

fn with_prefix(prefix: &str, id: &str) -> String {
    let escaped = escape(id);
    let mut out = String::with_capacity(prefix.len() + escaped.len().min(MAX_ESCAPED + 40));
    out.push_str(prefix);
    if escaped.len() <= MAX_ESCAPED {
        out.push_str(&escaped);
    } else {
        // Cut at an escape boundary: never in the middle of a `%XX`.
        let mut cut = SHORT_PREFIX;
        while cut > 0 && escaped.as_bytes()[cut - 1] == b'%'
            || cut > 1 && escaped.as_bytes()[cut - 2] == b'%'
        {
            cut -= 1;
        }
        out.push_str(&escaped[..cut]);
        out.push('~');
        let digest = Sha256::digest(id.as_bytes());
        for b in &digest[..16] {
            let _ = write!(out, "{b:02x}");
        }
    }
    out
}

fn escape(id: &str) -> String {
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
