//! Record keys: how stored records are sealed under the cluster secret.
//!
//! With a cluster secret every record a master writes is *sealed*: it
//! carries the [`KeyId`] of the key it was sealed under and an HMAC-SHA256
//! over its header and payload (the layout is in [`super::format`]). A
//! record someone planted or altered without the secret is then refused by
//! name when a master loads it, instead of being trusted (a framework record
//! holds the commands a leader launches on every worker).
//!
//! # Keys
//!
//! ```text
//! record key = HMAC-SHA256(secret, "regent-store-v2-record-key")
//! key id     = first 8 bytes of HMAC-SHA256(record key, "regent-store-v2-key-id")
//! ```
//!
//! The labels differ from every label of the wire handshake
//! ([`crate::auth`]), so a record MAC is never a valid wire MAC or the other
//! way round. The key id is a public fingerprint: it tells which secret
//! sealed a record (so a secret can be rotated) and reveals nothing of the
//! key or the secret.
//!
//! # Which records a master accepts
//!
//! A [`Sealing`] is the set of keys a master knows: the key of its current
//! secret (every write uses it) and the keys of previous secrets (read only,
//! for a rotation). [`super::format::decode_with`] refuses, each with its own
//! [`super::format::Damage`]:
//!
//! * a sealed record whose MAC does not verify ([`BadMac`]);
//! * a record sealed under a key id none of the keys has ([`UnknownKey`]);
//! * with a secret, an unsealed record ([`Unsealed`]), unless the sealing was
//!   made [`Sealing::accepting_unsealed`] (only `regent store seal` does, at
//!   the operator's word);
//! * without a secret, a sealed record: it cannot be verified
//!   ([`CannotVerify`]).
//!
//! A MAC proves a record was written by a holder of the secret, not that it
//! is the latest version: someone who can write the store can put back an
//! older sealed image of the same record. Keep the store writable only by
//! the masters (filesystem permissions; ZooKeeper ACLs, see the smol
//! runtime's `zk` module).
//!
//! [`BadMac`]: super::format::Damage::BadMac
//! [`UnknownKey`]: super::format::Damage::UnknownKey
//! [`Unsealed`]: super::format::Damage::Unsealed
//! [`CannotVerify`]: super::format::Damage::CannotVerify

use crate::secret::Secret;
use hmac::{Hmac, Mac};
use sha2::Sha256;
use std::fmt;

type HmacSha256 = Hmac<Sha256>;

/// Bytes of a key id.
pub const KEY_ID_LEN: usize = 8;

/// Bytes of a record MAC (full HMAC-SHA256).
pub const RECORD_MAC_LEN: usize = 32;

const LABEL_RECORD_KEY: &[u8] = b"regent-store-v2-record-key";
const LABEL_KEY_ID: &[u8] = b"regent-store-v2-key-id";

/// The public fingerprint of a record key (see the [module docs](self)).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct KeyId(pub [u8; KEY_ID_LEN]);

impl fmt::Display for KeyId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for b in self.0 {
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

impl fmt::Debug for KeyId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "KeyId({self})")
    }
}

/// How a record that decoded was protected.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Seal {
    /// An unsealed image (format version 1: a CRC only).
    Unsealed,
    /// Sealed under the key with this id (format version 2).
    Sealed(KeyId),
}

/// One record key, derived from a cluster secret. Its `Debug` shows the key
/// id only.
#[derive(Clone)]
pub struct SealKey {
    mac: HmacSha256,
    id: KeyId,
}

impl SealKey {
    /// The record key of `secret` (see the [module docs](self)).
    pub fn derive(secret: &Secret) -> SealKey {
        let key = hmac(secret.expose(), LABEL_RECORD_KEY);
        let full = hmac(&key, LABEL_KEY_ID);
        let mut id = [0; KEY_ID_LEN];
        id.copy_from_slice(&full[..KEY_ID_LEN]);
        SealKey { mac: HmacSha256::new_from_slice(&key).expect("any key length"), id: KeyId(id) }
    }

    /// The key's id.
    pub fn id(&self) -> KeyId {
        self.id
    }

    /// The MAC of `bytes` under this key.
    pub(crate) fn mac(&self, bytes: &[u8]) -> [u8; RECORD_MAC_LEN] {
        let mut m = self.mac.clone();
        m.update(bytes);
        m.finalize().into_bytes().into()
    }

    /// Whether `mac` is the MAC of `bytes` under this key (constant time).
    pub(crate) fn verifies(&self, bytes: &[u8], mac: &[u8]) -> bool {
        let mut m = self.mac.clone();
        m.update(bytes);
        m.verify_slice(mac).is_ok()
    }
}

impl fmt::Debug for SealKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SealKey(id {})", self.id)
    }
}

fn hmac(key: &[u8], label: &[u8]) -> [u8; RECORD_MAC_LEN] {
    let mut m = HmacSha256::new_from_slice(key).expect("HMAC takes keys of any length");
    m.update(label);
    m.finalize().into_bytes().into()
}

/// The record keys a master knows: which key it seals with and which it
/// accepts (see the [module docs](self)). [`Sealing::none`] (the default) is
/// a master without a secret.
#[derive(Clone, Debug, Default)]
pub struct Sealing {
    current: Option<SealKey>,
    previous: Vec<SealKey>,
    accept_unsealed: bool,
}

impl Sealing {
    /// No secret: records are written unsealed, and sealed records are
    /// refused (they cannot be verified).
    pub fn none() -> Sealing {
        Sealing::default()
    }

    /// Seals with `secret`'s key and accepts only records sealed under it.
    pub fn with_secret(secret: &Secret) -> Sealing {
        Sealing {
            current: Some(SealKey::derive(secret)),
            previous: Vec::new(),
            accept_unsealed: false,
        }
    }

    /// The same sealing, also accepting records sealed under `previous` (a
    /// secret being rotated out). Writes still use the current key; a key
    /// already known is not added twice. Without a current secret this
    /// changes nothing: records are only ever accepted under the key writes
    /// would use, or a previous one.
    pub fn and_previous(mut self, previous: &Secret) -> Sealing {
        let key = SealKey::derive(previous);
        if self.current.is_some() && !self.key_ids().contains(&key.id) {
            self.previous.push(key);
        }
        self
    }

    /// The same sealing, also accepting unsealed records (CRC-checked)
    /// although it has a secret. Only for sealing a store that predates its
    /// secret, at the operator's word (`regent store seal --accept-unsealed`):
    /// a master never accepts them.
    pub fn accepting_unsealed(mut self) -> Sealing {
        self.accept_unsealed = true;
        self
    }

    /// Whether records are written sealed (there is a current secret).
    pub fn is_sealing(&self) -> bool {
        self.current.is_some()
    }

    /// The id of the key writes use, if any.
    pub fn current_key_id(&self) -> Option<KeyId> {
        self.current.as_ref().map(SealKey::id)
    }

    /// The ids of every accepted key, the current one first.
    pub fn key_ids(&self) -> Vec<KeyId> {
        self.current.iter().chain(&self.previous).map(SealKey::id).collect()
    }

    /// Whether an unsealed record is accepted: without a secret, or when
    /// [`accepting_unsealed`](Self::accepting_unsealed).
    pub fn accepts_unsealed(&self) -> bool {
        self.current.is_none() || self.accept_unsealed
    }

    /// Whether a record that decoded with `seal` should be written again to
    /// be sealed under the current key (it is unsealed, or sealed under a
    /// previous key). Never without a secret.
    pub fn needs_reseal(&self, seal: Seal) -> bool {
        match (&self.current, seal) {
            (None, _) => false,
            (Some(_), Seal::Unsealed) => true,
            (Some(k), Seal::Sealed(id)) => k.id != id,
        }
    }

    /// The key writes use.
    pub(crate) fn current(&self) -> Option<&SealKey> {
        self.current.as_ref()
    }

    /// The accepted key with id `id`.
    pub(crate) fn find(&self, id: KeyId) -> Option<&SealKey> {
        self.current.iter().chain(&self.previous).find(|k| k.id == id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secret(s: &str) -> Secret {
        Secret::new(s.as_bytes().to_vec()).unwrap()
    }

    #[test]
    fn key_ids_are_stable_distinct_and_reveal_nothing() {
        let a = SealKey::derive(&secret("a cluster secret of some length"));
        let a2 = SealKey::derive(&secret("a cluster secret of some length"));
        let b = SealKey::derive(&secret("another cluster secret entirely"));
        assert_eq!(a.id(), a2.id());
        assert_ne!(a.id(), b.id());
        assert_eq!(a.id().to_string().len(), 2 * KEY_ID_LEN);
        assert!(!format!("{a:?}").contains("cluster"));
        assert_eq!(format!("{a:?}"), format!("SealKey(id {})", a.id()));
    }

    #[test]
    fn sealing_sets() {
        let a = secret("a cluster secret of some length");
        let b = secret("another cluster secret entirely");
        let none = Sealing::none();
        assert!(!none.is_sealing() && none.accepts_unsealed() && none.key_ids().is_empty());
        assert!(!none.needs_reseal(Seal::Unsealed));
        let s = Sealing::with_secret(&a).and_previous(&b).and_previous(&a).and_previous(&b);
        assert_eq!(s.key_ids(), vec![SealKey::derive(&a).id(), SealKey::derive(&b).id()]);
        assert_eq!(s.current_key_id(), Some(SealKey::derive(&a).id()));
        assert!(!s.accepts_unsealed());
        assert!(s.clone().accepting_unsealed().accepts_unsealed());
        assert!(s.needs_reseal(Seal::Unsealed));
        assert!(s.needs_reseal(Seal::Sealed(SealKey::derive(&b).id())));
        assert!(!s.needs_reseal(Seal::Sealed(SealKey::derive(&a).id())));
        assert!(Sealing::none().and_previous(&a).key_ids().is_empty());
    }
}
