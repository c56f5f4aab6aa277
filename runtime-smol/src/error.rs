//! The error enums of regent-smol's library, and how the binary prints them.
//!
//! Every fallible public function returns its domain's error enum
//! ([`crate::client::ClientError`], [`crate::client::DeadlineError`],
//! [`crate::logs::LogsError`], ...): a caller matches on the variant; the
//! text is what the `regent` binary prints. An underlying typed error is
//! the variant's [`source`](std::error::Error::source).
//! [`regent_std::error::report`] prints one with every cause.

/// `impl From<$error> for String` through [`regent_std::error::report`]:
/// the binary's commands that return `Result<_, String>` take these errors
/// with `?`, and print them with their causes.
macro_rules! into_report {
    ($($error:ty),* $(,)?) => {$(
        impl From<$error> for String {
            fn from(e: $error) -> String {
                regent_std::error::report(&e)
            }
        }
    )*};
}
pub(crate) use into_report;
