//! The on-disk image of one [`Record`], sans-IO.
//!
//! Every record is stored as one self-checking image:
//!
//! ```text
//! offset  size  field
//! 0       4     magic, the bytes `RGNT`
//! 4       2     format version, big-endian (currently 1)
//! 6       4     payload length L, big-endian (at most MAX_PAYLOAD)
//! 10      L     payload: the postcard encoding of the Record
//! 10+L    4     CRC32C (Castagnoli) of bytes 0..10+L, big-endian
//! ```
//!
//! [`decode`] checks, in order: the magic, that the header is complete, the
//! version, the announced length, that the image is exactly as long as the
//! header says (no truncation, no trailing bytes), the CRC, and finally that
//! the payload is one whole `Record`. Every failure is a [`Damage`] naming what
//! is wrong; [`decode_named`] wraps it in a [`RecordError`] that also names the
//! record (a file or a node), so an operator can find it. A damaged record is
//! never returned as if it were good.
//!
//! The format is pinned by the committed images in `fixtures/store/`;
//! changing the layout or the postcard encoding of `Record` is a
//! [`FORMAT_VERSION`] bump.

use super::Record;
use std::fmt;

/// The first four bytes of every record image.
pub const MAGIC: [u8; 4] = *b"RGNT";

/// The format version this build writes and reads.
pub const FORMAT_VERSION: u16 = 1;

/// Bytes before the payload: magic, version, payload length.
pub const HEADER_LEN: usize = 10;

/// Bytes of the trailing checksum.
pub const CRC_LEN: usize = 4;

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
        /// header is complete, otherwise the header length.
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
        /// The version this build reads.
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
            Damage::UnknownVersion { version, supported } => {
                write!(f, "unknown format version {version} (this build reads version {supported})")
            }
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
    postcard_len(record)
}

/// The length of the postcard encoding of `value`, counted without
/// allocating.
pub(crate) fn postcard_len<T: serde::Serialize + ?Sized>(value: &T) -> usize {
    // Counting into a size flavor cannot fail: records are plain data with
    // no custom serializers.
    postcard::serialize_with_flavor::<T, _, usize>(value, postcard::ser_flavors::Size::default())
        .expect("postcard size of plain data cannot fail")
}

/// Appends the image of `record` to `out`; on an error `out` is unchanged.
pub fn encode_into(record: &Record, out: &mut Vec<u8>) -> Result<(), EncodeError> {
    let payload = payload_len(record);
    if payload > MAX_PAYLOAD as usize {
        return Err(EncodeError::TooLarge {
            key: record.key().to_string(),
            len: payload,
            max: MAX_PAYLOAD,
        });
    }
    let start = out.len();
    out.reserve(HEADER_LEN + payload + CRC_LEN);
    out.extend_from_slice(&MAGIC);
    out.extend_from_slice(&FORMAT_VERSION.to_be_bytes());
    out.extend_from_slice(&(payload as u32).to_be_bytes());
    let taken = std::mem::take(out);
    // Serializing into a Vec cannot fail: records are plain data with no
    // custom serializers or maps with non-string keys.
    let mut grown = postcard::to_extend(record, taken).expect("postcard into a Vec cannot fail");
    debug_assert_eq!(grown.len() - start - HEADER_LEN, payload, "size flavor agrees");
    let crc = crc32c::crc32c(&grown[start..]);
    grown.extend_from_slice(&crc.to_be_bytes());
    *out = grown;
    Ok(())
}

/// The image of `record` as a new buffer.
pub fn encode(record: &Record) -> Result<Vec<u8>, EncodeError> {
    let mut out = Vec::new();
    encode_into(record, &mut out)?;
    Ok(out)
}

/// Decodes one whole image. Never panics, whatever the bytes.
pub fn decode(bytes: &[u8]) -> Result<Record, Damage> {
    let n = bytes.len();
    let magic_seen = n.min(MAGIC.len());
    if bytes[..magic_seen] != MAGIC[..magic_seen] {
        return Err(Damage::BadMagic { found: bytes[..magic_seen].to_vec() });
    }
    if n >= 6 {
        let version = u16::from_be_bytes([bytes[4], bytes[5]]);
        if version != FORMAT_VERSION {
            return Err(Damage::UnknownVersion { version, supported: FORMAT_VERSION });
        }
    }
    if n < HEADER_LEN {
        return Err(Damage::Truncated { len: n, expected: HEADER_LEN, in_header: true });
    }
    let len = u32::from_be_bytes([bytes[6], bytes[7], bytes[8], bytes[9]]);
    if len > MAX_PAYLOAD {
        return Err(Damage::TooLarge { len, max: MAX_PAYLOAD });
    }
    let body_end = HEADER_LEN + len as usize;
    let expected = body_end + CRC_LEN;
    if n < expected {
        return Err(Damage::Truncated { len: n, expected, in_header: false });
    }
    if n > expected {
        return Err(Damage::TrailingBytes { len: n, expected });
    }
    let stored = u32::from_be_bytes([
        bytes[body_end],
        bytes[body_end + 1],
        bytes[body_end + 2],
        bytes[body_end + 3],
    ]);
    let computed = crc32c::crc32c(&bytes[..body_end]);
    if stored != computed {
        return Err(Damage::CrcMismatch { stored, computed });
    }
    let len = len as usize;
    match postcard::take_from_bytes::<Record>(&bytes[HEADER_LEN..body_end]) {
        Ok((record, [])) => Ok(record),
        Ok((_, rest)) => Err(Damage::Malformed {
            len,
            detail: format!("{} bytes left over after the record", rest.len()),
        }),
        Err(e) => Err(Damage::Malformed { len, detail: e.to_string() }),
    }
}

/// Decodes one whole image, naming the record (a file or node path) in the
/// error.
pub fn decode_named(record: &str, bytes: &[u8]) -> Result<Record, RecordError> {
    decode(bytes).map_err(|damage| RecordError { record: record.to_owned(), damage })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::{Epoch, FrameworkId, Incarnation, WorkerId};
    use crate::store::{FrameworkRecord, WorkerRecord};
    use quickcheck::{Arbitrary, Gen, QuickCheck};

    fn worker() -> Record {
        Record::Worker(WorkerRecord {
            id: WorkerId::new("worker-1"),
            incarnation: Incarnation(0xfeed),
            cores: 8,
            memory_mb: 16384,
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
            id: WorkerId("w".repeat(MAX_PAYLOAD as usize)),
            incarnation: Incarnation(1),
            cores: 1,
            memory_mb: 1,
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
        img[4..6].copy_from_slice(&2u16.to_be_bytes());
        let err = decode(&img).unwrap_err();
        assert_eq!(err, Damage::UnknownVersion { version: 2, supported: 1 });
        assert_eq!(err.to_string(), "unknown format version 2 (this build reads version 1)");
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
        img.extend_from_slice(&FORMAT_VERSION.to_be_bytes());
        img.extend_from_slice(&(payload.len() as u32).to_be_bytes());
        img.extend_from_slice(&payload);
        let crc = crc32c::crc32c(&img);
        img.extend_from_slice(&crc.to_be_bytes());
        assert!(matches!(decode(&img), Err(Damage::Malformed { .. })));
        // Left-over payload bytes after a whole record are malformed too.
        let mut payload = postcard::to_allocvec(&Record::Epoch(Epoch(1))).unwrap();
        payload.push(0);
        let mut img = MAGIC.to_vec();
        img.extend_from_slice(&FORMAT_VERSION.to_be_bytes());
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
                    id: WorkerId(String::arbitrary(g)),
                    incarnation: Incarnation(u64::arbitrary(g)),
                    cores: u32::arbitrary(g),
                    memory_mb: u64::arbitrary(g),
                }),
                _ => Record::Framework(FrameworkRecord {
                    id: FrameworkId(String::arbitrary(g)),
                    name: String::arbitrary(g),
                    failover_timeout_ms: u64::arbitrary(g),
                    groups: if bool::arbitrary(g) {
                        vec![]
                    } else {
                        vec![crate::store::GroupRecord {
                            spec: crate::protocol::GroupSpec {
                                group: String::arbitrary(g),
                                slots: 2,
                                command: Vec::arbitrary(g),
                                env: Vec::arbitrary(g),
                                cores: u32::arbitrary(g),
                                memory_mb: u64::arbitrary(g),
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
                        }]
                    },
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
                h.extend_from_slice(&FORMAT_VERSION.to_be_bytes());
                h.extend_from_slice(&(img.len() as u32).to_be_bytes());
                h.append(&mut img);
                img = h;
            }
            let _ = decode(&img);
            true
        }
        QuickCheck::new().quickcheck(prop as fn(Vec<u8>, bool) -> bool);
    }
}
