//! The on-disk image of one [`Record`], sans-IO.
//!
//! Every record is stored as one self-checking image, in one of two format
//! versions. Without a cluster secret records are written *unsealed*
//! (version 1, a CRC only):
//!
//! ```text
//! offset  size  field
//! 0       4     magic, the bytes `RGNT`
//! 4       2     format version, big-endian: 1
//! 6       4     payload length L, big-endian (at most MAX_PAYLOAD)
//! 10      L     payload: the postcard encoding of the Record
//! 10+L    4     CRC32C (Castagnoli) of bytes 0..10+L, big-endian
//! ```
//!
//! With a secret they are written *sealed* (version 2, see [`super::seal`]):
//!
//! ```text
//! offset  size  field
//! 0       4     magic, the bytes `RGNT`
//! 4       2     format version, big-endian: 2
//! 6       8     key id of the record key that sealed it
//! 14      4     payload length L, big-endian (at most MAX_PAYLOAD)
//! 18      L     payload: the postcard encoding of the Record
//! 18+L    32    HMAC-SHA256 of bytes 0..18+L under that record key
//! ```
//!
//! [`decode_with`] checks, in order: the magic, that the header is complete,
//! the version, the announced length, that the image is exactly as long as the
//! header says (no truncation, no trailing bytes); then for version 1 the CRC,
//! and that unsealed records are accepted (not when the master has a secret);
//! for version 2 that the master has a secret, that it knows the key id, and
//! the MAC; and finally that the payload is one whole `Record`. Postcard never
//! sees a byte that was not verified. Every failure is a [`Damage`] naming
//! what is wrong; [`decode_named_with`] wraps it in a [`RecordError`] that
//! also names the record (a file or a node), so an operator can find it. A
//! damaged, planted or unverifiable record is never returned as if it were
//! good.
//!
//! [`encode`] and [`decode`] are the shorthands of a store without a secret
//! ([`Sealing::none`]): they write unsealed images and refuse sealed ones.
//!
//! The format is pinned by the committed images in `fixtures/store/`;
//! changing the layout or the postcard encoding of `Record` is a
//! [`FORMAT_VERSION`] bump.

use super::seal::{KeyId, Seal, Sealing, KEY_ID_LEN, RECORD_MAC_LEN};
use super::Record;
use std::fmt;

/// The first four bytes of every record image.
pub const MAGIC: [u8; 4] = *b"RGNT";

/// The newest format version this build writes and reads (it reads every
/// version from [`UNSEALED_VERSION`] on).
pub const FORMAT_VERSION: u16 = SEALED_VERSION;

/// The version of an unsealed image (a CRC only); written without a secret.
pub const UNSEALED_VERSION: u16 = 1;

/// The version of a sealed image (key id and MAC); written with a secret.
pub const SEALED_VERSION: u16 = 2;

/// Bytes before the payload of an unsealed image: magic, version, payload
/// length. (The shortest header of any version.)
pub const HEADER_LEN: usize = 10;

/// Bytes before the payload of a sealed image: magic, version, key id,
/// payload length.
pub const SEALED_HEADER_LEN: usize = 6 + KEY_ID_LEN + 4;

/// Bytes of the trailing checksum of an unsealed image.
pub const CRC_LEN: usize = 4;

/// Bytes of the trailing MAC of a sealed image.
pub const MAC_LEN: usize = RECORD_MAC_LEN;

/// The largest payload accepted (records are small; this bounds what a
/// damaged length field can make a reader expect).
pub const MAX_PAYLOAD: u32 = 1 << 20;

/// What is wrong with a record image.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Damage {
    /// The image ends early (a torn write, or a truncated file).
    Truncated {
        /// How many bytes there are.
        len: usize,
        /// How many bytes the image needs: the full image length when the
        /// header is complete, otherwise the header length (the shortest
        /// header, [`HEADER_LEN`], while the version is not yet known).
        expected: usize,
        /// Whether the image ends inside the header (so the full length is
        /// unknown).
        in_header: bool,
    },
    /// The image does not start with [`MAGIC`].
    BadMagic {
        /// The first bytes found (up to four).
        found: Vec<u8>,
    },
    /// The header names a format version this build cannot read.
    UnknownVersion {
        /// The version found.
        version: u16,
        /// The newest version this build reads (it reads every version from
        /// 1 up to this one).
        supported: u16,
    },
    /// The header announces a payload larger than [`MAX_PAYLOAD`].
    TooLarge {
        /// The announced payload length.
        len: u32,
        /// The maximum.
        max: u32,
    },
    /// The image is longer than its header says.
    TrailingBytes {
        /// How many bytes there are.
        len: usize,
        /// How many bytes the header accounts for.
        expected: usize,
    },
    /// The checksum does not match the contents (a flipped bit, a torn or
    /// mixed write).
    CrcMismatch {
        /// The checksum stored in the image.
        stored: u32,
        /// The checksum of the bytes found.
        computed: u32,
    },
    /// The checksum matches but the payload is not one whole record (written
    /// by an incompatible build without a version bump).
    Malformed {
        /// The payload length.
        len: usize,
        /// What postcard found wrong.
        detail: String,
    },
    /// A well-formed record stored under the name of another key.
    WrongKey {
        /// The name it is stored under.
        stored_as: String,
        /// The key the record names.
        found: String,
    },
    /// A record node in a ZooKeeper shard its name does not hash to (see
    /// [`crate::zk::layout`]): no write of regent's puts it there, and no
    /// write or delete would ever find it there.
    Misplaced {
        /// Where it is, relative to `<root>/state/`.
        stored_as: String,
        /// Where a node of that name belongs.
        belongs_at: String,
    },
    /// A sealed record whose MAC does not verify under the key its key id
    /// names: altered, or planted by someone without the cluster secret.
    BadMac {
        /// The key id the record names.
        key_id: KeyId,
    },
    /// A record sealed under a key none of this master's secrets (current
    /// or previous) derive.
    UnknownKey {
        /// The key id the record names.
        key_id: KeyId,
        /// The ids of the keys this master knows, the current one first.
        known: Vec<KeyId>,
    },
    /// An unsealed record, and this master has a cluster secret: written
    /// before the secret was set, or planted by someone without it.
    Unsealed,
    /// A sealed record, and this master has no cluster secret to verify it
    /// with.
    CannotVerify {
        /// The key id the record names.
        key_id: KeyId,
    },
}

impl fmt::Display for Damage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Damage::Truncated { len, expected, in_header: true } => {
                write!(f, "truncated at byte {len} of at least {expected} (inside the header)")
            }
            Damage::Truncated { len, expected, .. } => {
                write!(f, "truncated at byte {len} of {expected}")
            }
            Damage::BadMagic { found } => {
                write!(f, "bad magic {found:02x?} (expected {MAGIC:02x?})")
            }
            Damage::UnknownVersion { version, supported } => write!(
                f,
                "unknown format version {version} (this build reads versions {UNSEALED_VERSION} to {supported})"
            ),
            Damage::TooLarge { len, max } => write!(
                f,
                "header announces a payload of {len} bytes, more than the maximum of {max}"
            ),
            Damage::TrailingBytes { len, expected } => write!(
                f,
                "{} trailing bytes: image is {len} bytes, header accounts for {expected}",
                len - expected
            ),
            Damage::CrcMismatch { stored, computed } => {
                write!(f, "CRC mismatch: stored {stored:#010x}, computed {computed:#010x}")
            }
            Damage::Malformed { len, detail } => {
                write!(f, "malformed payload of {len} bytes: {detail}")
            }
            Damage::WrongKey { stored_as, found } => {
                write!(f, "stored as {stored_as:?} but holds the record of {found}")
            }
            Damage::Misplaced { stored_as, belongs_at } => {
                write!(f, "stored as {stored_as:?} but a node of that name belongs at {belongs_at:?}")
            }
            Damage::BadMac { key_id } => write!(
                f,
                "MAC does not verify under record key {key_id}: the record was altered, or \
                 planted by someone without the cluster secret"
            ),
            Damage::UnknownKey { key_id, known } => {
                write!(f, "sealed under record key {key_id}, which is not derived from ")?;
                match known.split_first() {
                    None => f.write_str("any secret of this master")?,
                    Some((current, previous)) => {
                        write!(f, "this master's cluster secret (key {current})")?;
                        for p in previous {
                            write!(f, " or a previous secret (key {p})")?;
                        }
                    }
                }
                f.write_str(
                    ": it was sealed with another secret (give that one with \
                     --previous-secret-file to read it), or planted",
                )
            }
            Damage::Unsealed => f.write_str(
                "not sealed, and this master has a cluster secret: either written before the \
                 secret was set (check the store with `regent store dump`, then seal it with \
                 `regent store seal --accept-unsealed`), or planted by someone without the secret",
            ),
            Damage::CannotVerify { key_id } => write!(
                f,
                "sealed under record key {key_id}, and this master has no cluster secret to verify \
                 it with (start it with the --secret-file the store was sealed with)"
            ),
        }
    }
}

impl std::error::Error for Damage {}

/// A damaged record, named.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordError {
    /// Which record: a file path or a node path, as the store names it.
    pub record: String,
    /// What is wrong with it.
    pub damage: Damage,
}

impl fmt::Display for RecordError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "record {}: {}", self.record, self.damage)
    }
}

impl std::error::Error for RecordError {}

/// A record that cannot be encoded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EncodeError {
    /// Its payload would exceed [`MAX_PAYLOAD`]; writing it would make it
    /// unreadable, so it is not written.
    TooLarge {
        /// The record's key.
        key: String,
        /// The payload length it would have.
        len: usize,
        /// The maximum.
        max: u32,
    },
}

impl fmt::Display for EncodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EncodeError::TooLarge { key, len, max } => write!(
                f,
                "record {key} would have a payload of {len} bytes, more than the maximum of {max}"
            ),
        }
    }
}

impl std::error::Error for EncodeError {}

/// The payload length (postcard encoding) of `record`, without encoding it.
pub fn payload_len(record: &Record) -> usize {
    crate::codec::postcard_len(record)
}

/// Appends the unsealed image of `record` to `out` (a store without a
/// secret); on an error `out` is unchanged.
pub fn encode_into(record: &Record, out: &mut Vec<u8>) -> Result<(), EncodeError> {
    encode_into_with(record, &Sealing::none(), out)
}

/// Appends the image of `record` to `out`, sealed under the current key of
/// `sealing` if it has one, else unsealed; on an error `out` is unchanged.
pub fn encode_into_with(
    record: &Record,
    sealing: &Sealing,
    out: &mut Vec<u8>,
) -> Result<(), EncodeError> {
    let payload = payload_len(record);
    if payload > MAX_PAYLOAD as usize {
        return Err(EncodeError::TooLarge {
            key: record.key().to_string(),
            len: payload,
            max: MAX_PAYLOAD,
        });
    }
    let key = sealing.current();
    let (header, trailer) =
        if key.is_some() { (SEALED_HEADER_LEN, MAC_LEN) } else { (HEADER_LEN, CRC_LEN) };
    let start = out.len();
    out.reserve(header + payload + trailer);
    out.extend_from_slice(&MAGIC);
    match key {
        Some(key) => {
            out.extend_from_slice(&SEALED_VERSION.to_be_bytes());
            out.extend_from_slice(&key.id().0);
        }
        None => out.extend_from_slice(&UNSEALED_VERSION.to_be_bytes()),
    }
    out.extend_from_slice(&(payload as u32).to_be_bytes());
    let taken = std::mem::take(out);
    // Serializing into a Vec cannot fail: records are plain data with no
    // custom serializers or maps with non-string keys.
    let mut grown = postcard::to_extend(record, taken).expect("postcard into a Vec cannot fail");
    debug_assert_eq!(grown.len() - start - header, payload, "size flavor agrees");
    match key {
        Some(key) => {
            let mac = key.mac(&grown[start..]);
            grown.extend_from_slice(&mac);
        }
        None => {
            let crc = crc32c::crc32c(&grown[start..]);
            grown.extend_from_slice(&crc.to_be_bytes());
        }
    }
    *out = grown;
    Ok(())
}

/// The unsealed image of `record` as a new buffer (a store without a
/// secret).
pub fn encode(record: &Record) -> Result<Vec<u8>, EncodeError> {
    encode_with(record, &Sealing::none())
}

/// The image of `record` as a new buffer, sealed under the current key of
/// `sealing` if it has one.
pub fn encode_with(record: &Record, sealing: &Sealing) -> Result<Vec<u8>, EncodeError> {
    let mut out = Vec::new();
    encode_into_with(record, sealing, &mut out)?;
    Ok(out)
}

/// Decodes one whole image as a store without a secret does
/// ([`Sealing::none`]): unsealed images only. Never panics, whatever the
/// bytes.
pub fn decode(bytes: &[u8]) -> Result<Record, Damage> {
    decode_with(bytes, &Sealing::none()).map(|(record, _)| record)
}

fn be_u32(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}

/// Decodes one whole image, accepting what `sealing` accepts (see the
/// [module docs](self)), and says how it was sealed. Never panics, whatever
/// the bytes.
pub fn decode_with(bytes: &[u8], sealing: &Sealing) -> Result<(Record, Seal), Damage> {
    let n = bytes.len();
    let magic_seen = n.min(MAGIC.len());
    if bytes[..magic_seen] != MAGIC[..magic_seen] {
        return Err(Damage::BadMagic { found: bytes[..magic_seen].to_vec() });
    }
    if n < 6 {
        return Err(Damage::Truncated { len: n, expected: HEADER_LEN, in_header: true });
    }
    let version = u16::from_be_bytes([bytes[4], bytes[5]]);
    let (header, trailer) = match version {
        UNSEALED_VERSION => (HEADER_LEN, CRC_LEN),
        SEALED_VERSION => (SEALED_HEADER_LEN, MAC_LEN),
        _ => return Err(Damage::UnknownVersion { version, supported: FORMAT_VERSION }),
    };
    if n < header {
        return Err(Damage::Truncated { len: n, expected: header, in_header: true });
    }
    let len = be_u32(&bytes[header - 4..header]);
    if len > MAX_PAYLOAD {
        return Err(Damage::TooLarge { len, max: MAX_PAYLOAD });
    }
    let body_end = header + len as usize;
    let expected = body_end + trailer;
    if n < expected {
        return Err(Damage::Truncated { len: n, expected, in_header: false });
    }
    if n > expected {
        return Err(Damage::TrailingBytes { len: n, expected });
    }
    let seal = if version == UNSEALED_VERSION {
        let stored = be_u32(&bytes[body_end..]);
        let computed = crc32c::crc32c(&bytes[..body_end]);
        if stored != computed {
            return Err(Damage::CrcMismatch { stored, computed });
        }
        if !sealing.accepts_unsealed() {
            return Err(Damage::Unsealed);
        }
        Seal::Unsealed
    } else {
        let mut id = [0; KEY_ID_LEN];
        id.copy_from_slice(&bytes[6..6 + KEY_ID_LEN]);
        let key_id = KeyId(id);
        if !sealing.is_sealing() {
            return Err(Damage::CannotVerify { key_id });
        }
        let Some(key) = sealing.find(key_id) else {
            return Err(Damage::UnknownKey { key_id, known: sealing.key_ids() });
        };
        if !key.verifies(&bytes[..body_end], &bytes[body_end..]) {
            return Err(Damage::BadMac { key_id });
        }
        Seal::Sealed(key_id)
    };
    let len = len as usize;
    match postcard::take_from_bytes::<Record>(&bytes[header..body_end]) {
        Ok((record, [])) => Ok((record, seal)),
        Ok((_, rest)) => Err(Damage::Malformed {
            len,
            detail: format!("{} bytes left over after the record", rest.len()),
        }),
        Err(e) => Err(Damage::Malformed { len, detail: e.to_string() }),
    }
}

/// Decodes one whole image as a store without a secret does, naming the
/// record (a file or node path) in the error.
pub fn decode_named(record: &str, bytes: &[u8]) -> Result<Record, RecordError> {
    decode(bytes).map_err(|damage| RecordError { record: record.to_owned(), damage })
}

/// Decodes one whole image with `sealing` (see [`decode_with`]), naming the
/// record (a file or node path) in the error.
pub fn decode_named_with(
    record: &str,
    bytes: &[u8],
    sealing: &Sealing,
) -> Result<(Record, Seal), RecordError> {
    decode_with(bytes, sealing).map_err(|damage| RecordError { record: record.to_owned(), damage })
}

// The limits' record payload fits a store image (the limit is the smaller).
const _: () = assert!(crate::limits::MAX_RECORD_PAYLOAD <= MAX_PAYLOAD as usize);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::{Epoch, FrameworkId, Incarnation, WorkerId};
    use crate::secret::Secret;
    use crate::store::seal::SealKey;
    use crate::store::{FrameworkRecord, WorkerRecord};
    use quickcheck::{Arbitrary, Gen, QuickCheck};

    fn secret(s: &str) -> Secret {
        Secret::new(s.as_bytes().to_vec()).unwrap()
    }

    fn current() -> Secret {
        secret("the current cluster secret")
    }

    fn previous() -> Secret {
        secret("the previous cluster secret")
    }

    fn sealed() -> Sealing {
        Sealing::with_secret(&current())
    }

    fn worker() -> Record {
        Record::Worker(WorkerRecord {
            dead: false,
            id: WorkerId::new("worker-1"),
            incarnation: Incarnation(0xfeed),
            cores: 8,
            memory_mb: 16384,
            callback: None,
            maintenance: None,
        })
    }

    #[test]
    fn layout_is_header_payload_crc() {
        let img = encode(&Record::Epoch(Epoch(7))).unwrap();
        assert_eq!(&img[..4], b"RGNT");
        assert_eq!(&img[4..6], &[0, 1]);
        let len = u32::from_be_bytes(img[6..10].try_into().unwrap()) as usize;
        assert_eq!(img.len(), HEADER_LEN + len + CRC_LEN);
        let crc = u32::from_be_bytes(img[img.len() - 4..].try_into().unwrap());
        assert_eq!(crc, crc32c::crc32c(&img[..img.len() - 4]));
        assert_eq!(decode(&img), Ok(Record::Epoch(Epoch(7))));
    }

    #[test]
    fn encode_into_appends() {
        let mut out = vec![1, 2, 3];
        encode_into(&worker(), &mut out).unwrap();
        assert_eq!(&out[..3], &[1, 2, 3]);
        assert_eq!(decode(&out[3..]), Ok(worker()));
    }

    #[test]
    fn encode_of_an_oversized_record_is_an_error_that_leaves_the_buffer_alone() {
        let big = Record::Worker(WorkerRecord {
            dead: false,
            id: WorkerId("w".repeat(MAX_PAYLOAD as usize)),
            incarnation: Incarnation(1),
            cores: 1,
            memory_mb: 1,
            callback: None,
            maintenance: None,
        });
        let mut out = vec![1, 2, 3];
        let err = encode_into(&big, &mut out).unwrap_err();
        assert!(matches!(err, EncodeError::TooLarge { max: MAX_PAYLOAD, .. }), "{err}");
        assert_eq!(out, vec![1, 2, 3]);
        assert_eq!(payload_len(&worker()), encode(&worker()).unwrap().len() - HEADER_LEN - CRC_LEN);
    }

    #[test]
    fn truncation_at_every_offset_is_named_with_its_position() {
        let img = encode(&worker()).unwrap();
        for cut in 0..img.len() {
            let got = decode(&img[..cut]);
            let want = if cut < HEADER_LEN {
                Damage::Truncated { len: cut, expected: HEADER_LEN, in_header: true }
            } else {
                Damage::Truncated { len: cut, expected: img.len(), in_header: false }
            };
            assert_eq!(got, Err(want), "cut at {cut}");
        }
    }

    #[test]
    fn flipped_payload_bit_is_a_crc_mismatch() {
        let mut img = encode(&worker()).unwrap();
        img[HEADER_LEN + 2] ^= 0x10;
        assert!(matches!(decode(&img), Err(Damage::CrcMismatch { .. })));
    }

    #[test]
    fn unknown_version_is_named() {
        let mut img = encode(&worker()).unwrap();
        img[4..6].copy_from_slice(&3u16.to_be_bytes());
        let err = decode(&img).unwrap_err();
        assert_eq!(err, Damage::UnknownVersion { version: 3, supported: 2 });
        assert_eq!(err.to_string(), "unknown format version 3 (this build reads versions 1 to 2)");
    }

    #[test]
    fn bad_magic_and_oversized_length_and_trailing_bytes() {
        let mut img = encode(&worker()).unwrap();
        img[0] = b'X';
        assert_eq!(decode(&img), Err(Damage::BadMagic { found: b"XGNT".to_vec() }));
        let mut img = encode(&worker()).unwrap();
        img[6..10].copy_from_slice(&(MAX_PAYLOAD + 1).to_be_bytes());
        assert!(matches!(decode(&img), Err(Damage::TooLarge { .. })));
        let mut img = encode(&worker()).unwrap();
        let n = img.len();
        img.push(0);
        assert_eq!(decode(&img), Err(Damage::TrailingBytes { len: n + 1, expected: n }));
    }

    #[test]
    fn malformed_payload_with_valid_crc() {
        // A payload naming an enum variant that does not exist, with a
        // correct checksum: the CRC cannot catch it, the payload check must.
        let payload = [9u8, 0, 0];
        let mut img = MAGIC.to_vec();
        img.extend_from_slice(&UNSEALED_VERSION.to_be_bytes());
        img.extend_from_slice(&(payload.len() as u32).to_be_bytes());
        img.extend_from_slice(&payload);
        let crc = crc32c::crc32c(&img);
        img.extend_from_slice(&crc.to_be_bytes());
        assert!(matches!(decode(&img), Err(Damage::Malformed { .. })));
        // Left-over payload bytes after a whole record are malformed too.
        let mut payload = postcard::to_allocvec(&Record::Epoch(Epoch(1))).unwrap();
        payload.push(0);
        let mut img = MAGIC.to_vec();
        img.extend_from_slice(&UNSEALED_VERSION.to_be_bytes());
        img.extend_from_slice(&(payload.len() as u32).to_be_bytes());
        img.extend_from_slice(&payload);
        let crc = crc32c::crc32c(&img);
        img.extend_from_slice(&crc.to_be_bytes());
        assert_eq!(
            decode(&img),
            Err(Damage::Malformed {
                len: payload.len(),
                detail: "1 bytes left over after the record".into()
            })
        );
    }

    #[test]
    fn named_error_names_the_record() {
        let img = encode(&worker()).unwrap();
        let err = decode_named("/var/lib/regent/w-worker-1.rec", &img[..12]).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!("record /var/lib/regent/w-worker-1.rec: truncated at byte 12 of {}", img.len())
        );
    }

    /// A generated record for the properties.
    #[derive(Clone, Debug)]
    struct AnyRecord(Record);

    impl Arbitrary for AnyRecord {
        fn arbitrary(g: &mut Gen) -> Self {
            let r = match u8::arbitrary(g) % 3 {
                0 => Record::Epoch(Epoch(u64::arbitrary(g))),
                1 => Record::Worker(WorkerRecord {
                    dead: false,
                    id: WorkerId(String::arbitrary(g)),
                    incarnation: Incarnation(u64::arbitrary(g)),
                    cores: u32::arbitrary(g),
                    memory_mb: u64::arbitrary(g),
                    callback: None,
                    maintenance: None,
                }),
                _ => Record::Framework(FrameworkRecord {
                    id: FrameworkId(String::arbitrary(g)),
                    name: String::arbitrary(g),
                    failover_timeout_ms: u64::arbitrary(g),
                    groups: if bool::arbitrary(g) {
                        vec![]
                    } else {
                        vec![crate::store::GroupRecord {
                            replacing: Default::default(),
                            preempted: Default::default(),
                            counted: Default::default(),
                            deployment: None,
                            eras: Vec::new(),
                            spec: crate::protocol::GroupSpec {
                                group: String::arbitrary(g),
                                slots: 2,
                                command: Vec::arbitrary(g),
                                env: Vec::arbitrary(g),
                                cores: u32::arbitrary(g),
                                memory_mb: u64::arbitrary(g),
                                policy: Default::default(),
                                launch: Default::default(),
                            },
                            slots: vec![
                                crate::store::SlotOutcome::Done {
                                    executor: crate::ids::ExecutorId(String::arbitrary(g)),
                                },
                                crate::store::SlotOutcome::Failed {
                                    executor: crate::ids::ExecutorId(String::arbitrary(g)),
                                    reason: String::arbitrary(g),
                                },
                            ],
                            retries_used: u32::arbitrary(g),
                            restarts: if bool::arbitrary(g) {
                                [(
                                    1,
                                    crate::store::SlotRestart {
                                        failures: u32::arbitrary(g),
                                        not_before_ms: u64::arbitrary(g),
                                    },
                                )]
                                .into()
                            } else {
                                Default::default()
                            },
                        }]
                    },
                    callback: None,
                    registered_at_ms: Option::<u64>::arbitrary(g),
                    job: if bool::arbitrary(g) {
                        None
                    } else {
                        Some(crate::store::JobRecord {
                            version: u64::arbitrary(g),
                            keys: vec![crate::store::JobKey {
                                key: String::arbitrary(g),
                                version: u64::arbitrary(g),
                                change: crate::api::JobChange::Replayed,
                            }],
                        })
                    },
                    tenant: bool::arbitrary(g).then(|| "team-a".to_owned()),
                }),
            };
            AnyRecord(r)
        }
    }

    #[test]
    fn prop_round_trip() {
        fn prop(r: AnyRecord) -> bool {
            decode(&encode(&r.0).unwrap()) == Ok(r.0)
        }
        QuickCheck::new().quickcheck(prop as fn(AnyRecord) -> bool);
    }

    #[test]
    fn prop_every_single_bit_flip_is_detected() {
        fn prop(r: AnyRecord) -> bool {
            let img = encode(&r.0).unwrap();
            (0..img.len() * 8).all(|bit| {
                let mut bad = img.clone();
                bad[bit / 8] ^= 1 << (bit % 8);
                decode(&bad).is_err()
            })
        }
        QuickCheck::new().tests(50).quickcheck(prop as fn(AnyRecord) -> bool);
    }

    #[test]
    fn prop_every_truncation_is_detected() {
        fn prop(r: AnyRecord) -> bool {
            let img = encode(&r.0).unwrap();
            (0..img.len()).all(|cut| matches!(decode(&img[..cut]), Err(Damage::Truncated { .. })))
        }
        QuickCheck::new().quickcheck(prop as fn(AnyRecord) -> bool);
    }

    #[test]
    fn prop_arbitrary_bytes_never_panic() {
        fn prop(bytes: Vec<u8>, keep_header: bool) -> bool {
            let mut img = bytes;
            if keep_header {
                let mut h = MAGIC.to_vec();
                h.extend_from_slice(&UNSEALED_VERSION.to_be_bytes());
                h.extend_from_slice(&(img.len() as u32).to_be_bytes());
                h.append(&mut img);
                img = h;
            }
            let _ = decode(&img);
            true
        }
        QuickCheck::new().quickcheck(prop as fn(Vec<u8>, bool) -> bool);
    }

    #[test]
    fn sealed_layout_is_header_key_id_payload_mac() {
        use hmac::{Hmac, Mac};
        let img = encode_with(&worker(), &sealed()).unwrap();
        assert_eq!(&img[..4], b"RGNT");
        assert_eq!(&img[4..6], &[0, 2]);
        // The record key and its id, derived here from the documented
        // labels independently of the code under test.
        let hmac = |key: &[u8], data: &[u8]| {
            let mut m = Hmac::<sha2::Sha256>::new_from_slice(key).unwrap();
            m.update(data);
            m.finalize().into_bytes().to_vec()
        };
        let record_key = hmac(current().expose(), b"regent-store-v2-record-key");
        let key_id = &hmac(&record_key, b"regent-store-v2-key-id")[..8];
        assert_eq!(&img[6..14], key_id);
        let len = u32::from_be_bytes(img[14..18].try_into().unwrap()) as usize;
        assert_eq!(img.len(), SEALED_HEADER_LEN + len + MAC_LEN);
        assert_eq!(&img[18..18 + len], &postcard::to_allocvec(&worker()).unwrap()[..]);
        assert_eq!(&img[18 + len..], &hmac(&record_key, &img[..18 + len])[..]);
        let id = SealKey::derive(&current()).id();
        assert_eq!(decode_with(&img, &sealed()), Ok((worker(), Seal::Sealed(id))));
        // The same record, unsealed, is the version 1 image.
        let plain = encode_with(&worker(), &Sealing::none()).unwrap();
        assert_eq!(plain, encode(&worker()).unwrap());
        assert_eq!(&plain[4..6], &[0, 1]);
    }

    #[test]
    fn unsealed_records_are_refused_under_a_secret_unless_accepted() {
        let img = encode(&worker()).unwrap();
        let err = decode_named_with("/s/w-worker-1.rec", &img, &sealed()).unwrap_err();
        assert_eq!(err.damage, Damage::Unsealed);
        let msg = err.to_string();
        assert!(msg.starts_with("record /s/w-worker-1.rec: not sealed"), "{msg}");
        assert!(msg.contains("regent store seal --accept-unsealed"), "{msg}");
        let accepting = sealed().accepting_unsealed();
        assert_eq!(decode_with(&img, &accepting), Ok((worker(), Seal::Unsealed)));
        assert!(accepting.needs_reseal(Seal::Unsealed));
        // A damaged unsealed record is named as damaged, not as unsealed.
        let mut bad = img.clone();
        bad[HEADER_LEN] ^= 1;
        assert!(matches!(decode_with(&bad, &sealed()), Err(Damage::CrcMismatch { .. })));
    }

    #[test]
    fn sealed_records_are_refused_without_a_secret() {
        let img = encode_with(&worker(), &sealed()).unwrap();
        let key_id = SealKey::derive(&current()).id();
        let err = decode(&img).unwrap_err();
        assert_eq!(err, Damage::CannotVerify { key_id });
        assert!(err.to_string().contains("no cluster secret to verify it"), "{err}");
        assert!(err.to_string().contains(&key_id.to_string()), "{err}");
    }

    #[test]
    fn a_record_sealed_under_an_unknown_key_is_named_with_the_keys_known() {
        let old = Sealing::with_secret(&previous());
        let img = encode_with(&worker(), &old).unwrap();
        let (cur, prev) = (SealKey::derive(&current()).id(), SealKey::derive(&previous()).id());
        let err = decode_with(&img, &sealed()).unwrap_err();
        assert_eq!(err, Damage::UnknownKey { key_id: prev, known: vec![cur] });
        let msg = err.to_string();
        assert!(msg.contains(&format!("sealed under record key {prev}")), "{msg}");
        assert!(msg.contains(&format!("this master's cluster secret (key {cur})")), "{msg}");
        assert!(msg.contains("--previous-secret-file"), "{msg}");
    }

    #[test]
    fn rotation_reads_the_previous_key_and_writes_the_current_one() {
        let rotating = sealed().and_previous(&previous());
        let (cur, prev) = (SealKey::derive(&current()).id(), SealKey::derive(&previous()).id());
        let old = encode_with(&worker(), &Sealing::with_secret(&previous())).unwrap();
        let (record, seal) = decode_with(&old, &rotating).unwrap();
        assert_eq!((record.clone(), seal), (worker(), Seal::Sealed(prev)));
        assert!(rotating.needs_reseal(seal));
        let new = encode_with(&record, &rotating).unwrap();
        assert_eq!(&new[6..14], &cur.0);
        assert_eq!(new, encode_with(&record, &sealed()).unwrap());
        assert_eq!(decode_with(&new, &sealed()), Ok((worker(), Seal::Sealed(cur))));
        assert!(!rotating.needs_reseal(Seal::Sealed(cur)));
        // A rotating master still refuses unsealed records.
        assert_eq!(decode_with(&encode(&worker()).unwrap(), &rotating), Err(Damage::Unsealed));
    }

    #[test]
    fn altered_payload_key_id_or_mac_are_refused_by_name() {
        let img = encode_with(&worker(), &sealed()).unwrap();
        let key_id = SealKey::derive(&current()).id();
        let mut payload = img.clone();
        payload[SEALED_HEADER_LEN + 3] ^= 0x20;
        assert_eq!(decode_with(&payload, &sealed()), Err(Damage::BadMac { key_id }));
        let msg = decode_named_with("/x", &payload, &sealed()).unwrap_err().to_string();
        assert!(msg.contains("MAC does not verify under record key"), "{msg}");
        assert!(msg.contains("altered, or planted"), "{msg}");
        let mut mac = img.clone();
        let n = mac.len();
        mac[n - 1] ^= 1;
        assert_eq!(decode_with(&mac, &sealed()), Err(Damage::BadMac { key_id }));
        let mut id = img.clone();
        id[7] ^= 1;
        assert!(matches!(decode_with(&id, &sealed()), Err(Damage::UnknownKey { .. })));
        // A record re-sealed under another key, for another name: the MAC
        // binds the key id, so swapping in a known id fails the MAC.
        let other = encode_with(&worker(), &Sealing::with_secret(&previous())).unwrap();
        let mut swapped = other.clone();
        swapped[6..14].copy_from_slice(&key_id.0);
        assert_eq!(decode_with(&swapped, &sealed()), Err(Damage::BadMac { key_id }));
    }

    #[test]
    fn sealed_truncation_at_every_offset_is_named_with_its_position() {
        let img = encode_with(&worker(), &sealed()).unwrap();
        for cut in 0..img.len() {
            let want = if cut < 6 {
                Damage::Truncated { len: cut, expected: HEADER_LEN, in_header: true }
            } else if cut < SEALED_HEADER_LEN {
                Damage::Truncated { len: cut, expected: SEALED_HEADER_LEN, in_header: true }
            } else {
                Damage::Truncated { len: cut, expected: img.len(), in_header: false }
            };
            assert_eq!(decode_with(&img[..cut], &sealed()), Err(want), "cut at {cut}");
        }
    }

    #[test]
    fn prop_sealed_round_trip_under_rotation() {
        fn prop(r: AnyRecord) -> bool {
            let rotating = sealed().and_previous(&previous());
            let old = encode_with(&r.0, &Sealing::with_secret(&previous())).unwrap();
            let new = encode_with(&r.0, &rotating).unwrap();
            let prev = SealKey::derive(&previous()).id();
            let cur = SealKey::derive(&current()).id();
            decode_with(&old, &rotating) == Ok((r.0.clone(), Seal::Sealed(prev)))
                && decode_with(&new, &rotating) == Ok((r.0.clone(), Seal::Sealed(cur)))
                && decode_with(&new, &sealed()) == Ok((r.0.clone(), Seal::Sealed(cur)))
                && matches!(decode_with(&old, &sealed()), Err(Damage::UnknownKey { .. }))
                && matches!(decode(&new), Err(Damage::CannotVerify { .. }))
        }
        QuickCheck::new().tests(30).quickcheck(prop as fn(AnyRecord) -> bool);
    }

    #[test]
    fn prop_every_single_byte_change_of_a_sealed_image_is_refused() {
        fn prop(r: AnyRecord, xor: u8) -> bool {
            let xor = xor.max(1);
            // Refused even by a master that knows both keys and accepts
            // unsealed records (the most permissive sealing there is).
            let rotating = sealed().and_previous(&previous()).accepting_unsealed();
            let img = encode_with(&r.0, &sealed()).unwrap();
            (0..img.len()).all(|i| {
                let mut bad = img.clone();
                bad[i] ^= xor;
                decode_with(&bad, &rotating).is_err()
            }) && (0..img.len() * 8).all(|bit| {
                let mut bad = img.clone();
                bad[bit / 8] ^= 1 << (bit % 8);
                decode_with(&bad, &rotating).is_err()
            })
        }
        // Small records: every change costs a MAC over the whole image.
        QuickCheck::new().rng(Gen::new(12)).tests(40).quickcheck(prop as fn(AnyRecord, u8) -> bool);
    }

    #[test]
    fn prop_arbitrary_sealed_bytes_never_panic() {
        fn prop(bytes: Vec<u8>, key_id: u64, with_secret: bool) -> bool {
            let mut img = MAGIC.to_vec();
            img.extend_from_slice(&SEALED_VERSION.to_be_bytes());
            img.extend_from_slice(&key_id.to_be_bytes());
            img.extend_from_slice(&(bytes.len().saturating_sub(MAC_LEN) as u32).to_be_bytes());
            img.extend_from_slice(&bytes);
            let sealing = if with_secret { sealed() } else { Sealing::none() };
            let _ = decode_with(&img, &sealing);
            true
        }
        QuickCheck::new().quickcheck(prop as fn(Vec<u8>, u64, bool) -> bool);
    }
}
