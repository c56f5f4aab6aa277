//! The cluster secret: the one credential every daemon of a cluster shares.
//! The handshake and frame MACs ([`crate::auth`]) and the store's record
//! seals ([`crate::store::seal`]) derive their keys from it; its bytes never
//! appear in a `Debug` or a log.

use std::fmt;

/// The shortest cluster secret accepted, in bytes.
pub const MIN_SECRET_LEN: usize = 16;

/// The cluster secret. Its `Debug` never shows the bytes.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(Vec<u8>);

impl Secret {
    /// A secret of at least [`MIN_SECRET_LEN`] bytes (32 random bytes are
    /// recommended; any bytes are accepted, a passphrase included).
    pub fn new(bytes: impl Into<Vec<u8>>) -> Result<Secret, SecretError> {
        let bytes = bytes.into();
        if bytes.len() < MIN_SECRET_LEN {
            return Err(SecretError::TooShort { len: bytes.len(), min: MIN_SECRET_LEN });
        }
        Ok(Secret(bytes))
    }

    /// The secret's bytes, for a runtime that must derive other credentials
    /// from it (ZooKeeper digest ACLs). Never log them.
    pub fn expose(&self) -> &[u8] {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Secret(<{} bytes redacted>)", self.0.len())
    }
}

/// Why a cluster secret was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SecretError {
    /// Fewer bytes than [`MIN_SECRET_LEN`].
    TooShort {
        /// The secret's length.
        len: usize,
        /// The minimum.
        min: usize,
    },
}

impl fmt::Display for SecretError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SecretError::TooShort { len, min } => {
                write!(f, "cluster secret of {len} bytes is too short (at least {min} bytes)")
            }
        }
    }
}

impl std::error::Error for SecretError {}
