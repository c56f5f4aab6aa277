//! regent-std: the shared I/O layer of regent.
#![warn(missing_docs)]
