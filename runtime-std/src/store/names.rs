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

pub use regent_core::store::names::{key_stem, MAX_ESCAPED};
use regent_core::store::RecordKey;

/// The extension of a committed record file.
pub const RECORD_EXT: &str = ".rec";

/// The suffix of a temporary file that a crash may leave behind.
pub const TEMP_SUFFIX: &str = ".tmp";

/// The name of the committed file for a key.
pub fn record_file_name(key: &RecordKey) -> String {
    let mut s = key_stem(key);
    s.push_str(RECORD_EXT);
    s
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
