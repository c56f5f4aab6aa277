//! Cross-crate property and simulation suites for regent.
