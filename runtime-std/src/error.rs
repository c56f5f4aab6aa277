//! Printing errors with their causes.
//!
//! Every fallible public function of `regent-std` returns an error enum of
//! its domain ([`crate::net::NetError`], [`crate::host::HostError`],
//! [`crate::store::StoreError`], [`crate::http::HttpError`],
//! [`crate::exec::shim::ShimError`], [`crate::pumps::PumpError`]). Each
//! variant names what failed; an underlying cause is its
//! [`source`](std::error::Error::source). [`report`] is how a program shows
//! one: the error and every cause, joined with `": "`.

use std::error::Error;

/// `error: cause: its cause...`: `e`'s text followed by each cause in its
/// source chain, joined with `": "`. A cause whose text the line already
/// holds (a message that quotes its source, `cannot open {path}: {source}`)
/// is not repeated.
pub fn report(e: &dyn Error) -> String {
    let mut line = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let text = c.to_string();
        if !text.is_empty() && !line.contains(&text) {
            line.push_str(": ");
            line.push_str(&text);
        }
        cause = c.source();
    }
    line
}

/// `impl From<$error> for String` through [`report`]: the binary's commands
/// that still return `Result<_, String>` take these errors with `?`, and
/// print them with their causes.
macro_rules! into_report {
    ($($error:ty),* $(,)?) => {$(
        impl From<$error> for String {
            fn from(e: $error) -> String {
                $crate::error::report(&e)
            }
        }
    )*};
}
pub(crate) use into_report;

#[cfg(test)]
mod tests {
    use super::report;
    use std::fmt;
    use std::io;

    #[derive(Debug)]
    struct Outer {
        quotes: bool,
        source: io::Error,
    }

    impl fmt::Display for Outer {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            if self.quotes {
                write!(f, "cannot open /x: {}", self.source)
            } else {
                f.write_str("cannot open /x")
            }
        }
    }

    impl std::error::Error for Outer {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.source)
        }
    }

    #[test]
    fn a_report_names_every_cause_once() {
        let gone = || io::Error::new(io::ErrorKind::NotFound, "no such file");
        assert_eq!(
            report(&Outer { quotes: false, source: gone() }),
            "cannot open /x: no such file"
        );
        assert_eq!(report(&Outer { quotes: true, source: gone() }), "cannot open /x: no such file");
    }
}
