//! File names for record keys, safe for any id.
//!
//! A key maps to a file stem: `epoch`, `w-<id>` for a worker, `f-<id>` for a
//! framework. In the id, ASCII letters, digits, `-`, `_` and `.` are kept and
//! every other byte is written `%XX` (upper-case hex), so no id can produce a
//! `/`, a NUL, a hidden file, `.`/`..` or a name that collides with another
//! key. An escaped id longer than [`MAX_ESCAPED`] bytes (file names are limited
//! to 255 bytes) is shortened to a readable prefix, `~`, and 128 bits of the
//! SHA-256 of the id; `~` never occurs in an unshortened name, so the two forms
//! cannot collide. The record inside the file names its key; the loader checks
//! that the file name is the one its key maps to.

use regent_core::store::RecordKey;
use sha2::{Digest, Sha256};
use std::fmt::Write as _;

/// The extension of a committed record file.
pub const RECORD_EXT: &str = ".rec";

/// The suffix of a temporary file that a crash may leave behind.
pub const TEMP_SUFFIX: &str = ".tmp";

/// The longest escaped id kept whole in a file name.
pub const MAX_ESCAPED: usize = 200;

/// How much of an over-long escaped id is kept, for the operator's eyes.
const SHORT_PREFIX: usize = 100;

/// The file stem (name without [`RECORD_EXT`]) a key is stored under.
pub fn key_stem(key: &RecordKey) -> String {
    match key {
        RecordKey::Epoch => "epoch".to_owned(),
        RecordKey::Worker(w) => with_prefix("w-", w.as_str()),
        RecordKey::Framework(f) => with_prefix("f-", f.as_str()),
    }
}

/// The name of the committed file for a key.
pub fn record_file_name(key: &RecordKey) -> String {
    let mut s = key_stem(key);
    s.push_str(RECORD_EXT);
    s
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

#[cfg(test)]
mod tests {
    use super::*;
    use regent_core::{FrameworkId, WorkerId};

    #[test]
    fn plain_ids_stay_readable() {
        assert_eq!(key_stem(&RecordKey::Epoch), "epoch");
        assert_eq!(
            key_stem(&RecordKey::Worker(WorkerId::new("host-1.example_a"))),
            "w-host-1.example_a"
        );
        assert_eq!(
            record_file_name(&RecordKey::Framework(FrameworkId::new("fw 1/x"))),
            "f-fw%201%2Fx.rec"
        );
        assert_eq!(key_stem(&RecordKey::Worker(WorkerId::new(".."))), "w-..");
        assert_eq!(key_stem(&RecordKey::Worker(WorkerId::new("é"))), "w-%C3%A9");
    }

    #[test]
    fn long_ids_are_shortened_with_a_digest() {
        let long = "x".repeat(1000);
        let a = key_stem(&RecordKey::Worker(WorkerId::new(long.clone())));
        let b = key_stem(&RecordKey::Worker(WorkerId::new(format!("{long}y"))));
        assert_ne!(a, b);
        assert!(a.len() < 255 - RECORD_EXT.len() - TEMP_SUFFIX.len());
        assert!(a.contains('~'));
        let slashes = "/".repeat(300);
        let s = key_stem(&RecordKey::Worker(WorkerId::new(slashes)));
        assert!(!s.contains('/'));
        // The readable prefix never ends inside an escape.
        let before = s.split('~').next().unwrap();
        assert!(before.ends_with("%2F"), "{before}");
    }
}
