//! The frame codec: length-prefixed postcard, sans-IO.
//!
//! A frame is a 4-byte big-endian body length followed by the postcard
//! encoding of one [`Message`]. [`encode`] writes frames; [`Decoder`] takes
//! bytes in chunks of any size and yields whole messages. The length prefix is
//! checked against the configured maximum *before* any space is reserved for
//! the body, so a hostile prefix cannot make a peer allocate.

use crate::protocol::{Message, PROTOCOL_VERSION};
use std::fmt;

/// Bytes in the length prefix.
pub const LEN_PREFIX: usize = 4;

/// The default maximum body size: 1 MiB.
pub const DEFAULT_MAX_FRAME: usize = 1 << 20;

/// Why bytes from a peer were refused. After an error the [`Decoder`] stays
/// failed: the runtime closes that connection (and only that one).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DecodeError {
    /// The length prefix announces a body larger than allowed.
    FrameTooLarge {
        /// The announced body length.
        len: u64,
        /// The configured maximum.
        max: usize,
    },
    /// The body is not a valid message.
    Malformed {
        /// The body length.
        len: usize,
        /// What postcard (or the framing) found wrong.
        detail: String,
    },
    /// A `Hello` with a protocol version this build does not speak.
    UnsupportedVersion {
        /// The version the peer sent.
        got: u16,
        /// The version this build speaks.
        supported: u16,
    },
    /// A `Hello` from a peer of another cluster.
    WrongCluster {
        /// The cluster the peer named.
        got: String,
        /// The cluster this node belongs to.
        expected: String,
    },
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DecodeError::FrameTooLarge { len, max } => {
                write!(f, "frame of {len} bytes exceeds the maximum of {max} bytes")
            }
            DecodeError::Malformed { len, detail } => {
                write!(f, "malformed frame of {len} bytes: {detail}")
            }
            DecodeError::UnsupportedVersion { got, supported } => write!(
                f,
                "unsupported protocol version {got} (this build speaks version {supported})"
            ),
            DecodeError::WrongCluster { got, expected } => {
                write!(f, "peer belongs to cluster {got:?}, expected cluster {expected:?}")
            }
        }
    }
}

impl std::error::Error for DecodeError {}

/// The length of the frame of `msg` (prefix and body), counted without
/// encoding it.
pub fn frame_len(msg: &Message) -> usize {
    // Counting into a size flavor cannot fail: plain data (see encode_into).
    let body = postcard::serialize_with_flavor::<Message, _, usize>(
        msg,
        postcard::ser_flavors::Size::default(),
    )
    .expect("postcard size of plain data cannot fail");
    LEN_PREFIX + body
}

/// Appends the frame of `msg` to `out`, reserving its length first (a
/// large message is not copied through doubling buffers).
pub fn encode_into(msg: &Message, out: &mut Vec<u8>) {
    out.reserve(frame_len(msg));
    let start = out.len();
    out.extend_from_slice(&[0; LEN_PREFIX]);
    let taken = std::mem::take(out);
    // Serializing into a Vec cannot fail: every message type is plain data
    // with no maps of non-string keys or custom serializers that error.
    let mut grown = postcard::to_extend(msg, taken).expect("postcard into a Vec cannot fail");
    let body = (grown.len() - start - LEN_PREFIX) as u32;
    grown[start..start + LEN_PREFIX].copy_from_slice(&body.to_be_bytes());
    *out = grown;
}

/// The frame of `msg` as a new buffer of exactly its length.
pub fn encode(msg: &Message) -> Vec<u8> {
    let mut out = Vec::with_capacity(frame_len(msg));
    encode_into(msg, &mut out);
    out
}

/// What a [`Decoder`] checks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DecoderConfig {
    /// The largest body accepted.
    pub max_frame: usize,
    /// When set, a `Hello` naming another cluster is refused.
    pub cluster: Option<String>,
}

impl Default for DecoderConfig {
    fn default() -> Self {
        DecoderConfig { max_frame: DEFAULT_MAX_FRAME, cluster: None }
    }
}

/// An incremental frame decoder: feed any byte chunks, take whole messages.
#[derive(Debug)]
pub struct Decoder {
    config: DecoderConfig,
    buf: Vec<u8>,
    /// Bytes of `buf` before this offset are consumed.
    start: usize,
    failed: Option<DecodeError>,
}

impl Decoder {
    /// A decoder with the given limits.
    pub fn new(config: DecoderConfig) -> Self {
        Decoder { config, buf: Vec::new(), start: 0, failed: None }
    }

    /// Appends received bytes. Fails at once when a complete length prefix
    /// announces an oversized body; nothing is reserved for it.
    pub fn feed(&mut self, bytes: &[u8]) -> Result<(), DecodeError> {
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        if self.start > 0 && self.start == self.buf.len() {
            self.buf.clear();
            self.start = 0;
        }
        // Accept only what can still belong to an acceptable frame: check the
        // prefix as soon as it is complete, before buffering further.
        self.buf.extend_from_slice(bytes);
        self.check_prefix()
    }

    fn check_prefix(&mut self) -> Result<(), DecodeError> {
        let pending = &self.buf[self.start..];
        if pending.len() >= LEN_PREFIX {
            let len = u32::from_be_bytes(pending[..LEN_PREFIX].try_into().expect("4 bytes"));
            if len as usize > self.config.max_frame {
                return Err(self.fail(DecodeError::FrameTooLarge {
                    len: u64::from(len),
                    max: self.config.max_frame,
                }));
            }
        }
        Ok(())
    }

    fn fail(&mut self, e: DecodeError) -> DecodeError {
        self.failed = Some(e.clone());
        self.buf = Vec::new();
        self.start = 0;
        e
    }

    /// The next whole message, `Ok(None)` when more bytes are needed.
    pub fn next_message(&mut self) -> Result<Option<Message>, DecodeError> {
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        self.check_prefix()?;
        let pending = &self.buf[self.start..];
        if pending.len() < LEN_PREFIX {
            return Ok(None);
        }
        let len = u32::from_be_bytes(pending[..LEN_PREFIX].try_into().expect("4 bytes")) as usize;
        if pending.len() < LEN_PREFIX + len {
            return Ok(None);
        }
        let body = &pending[LEN_PREFIX..LEN_PREFIX + len];
        let result = decode_body(body, &self.config);
        self.start += LEN_PREFIX + len;
        if self.start > 4096 && self.start * 2 > self.buf.len() {
            self.buf.drain(..self.start);
            self.start = 0;
        }
        match result {
            Ok(m) => Ok(Some(m)),
            Err(e) => Err(self.fail(e)),
        }
    }

    /// Bytes received but not yet returned as messages.
    pub fn buffered(&self) -> usize {
        self.buf.len() - self.start
    }
}

/// Decodes one frame body (without its length prefix).
pub fn decode_body(body: &[u8], config: &DecoderConfig) -> Result<Message, DecodeError> {
    // `Hello` is variant 0 and `version` its first field: read them first so
    // a peer of another version is named as such, not as malformed.
    if let Ok(((0u32, version), _)) = postcard::take_from_bytes::<(u32, u16)>(body) {
        if version != PROTOCOL_VERSION {
            return Err(DecodeError::UnsupportedVersion {
                got: version,
                supported: PROTOCOL_VERSION,
            });
        }
    }
    let msg = match postcard::take_from_bytes::<Message>(body) {
        Ok((msg, [])) => msg,
        Ok((_, rest)) => {
            return Err(DecodeError::Malformed {
                len: body.len(),
                detail: format!("{} trailing bytes after the message", rest.len()),
            })
        }
        Err(e) => return Err(DecodeError::Malformed { len: body.len(), detail: e.to_string() }),
    };
    if let (Message::Hello(h), Some(expected)) = (&msg, &config.cluster) {
        if &h.cluster != expected {
            return Err(DecodeError::WrongCluster {
                got: h.cluster.clone(),
                expected: expected.clone(),
            });
        }
    }
    Ok(msg)
}

/// The length of the postcard encoding of `value`, counted without
/// allocating.
pub fn postcard_len<T: serde::Serialize + ?Sized>(value: &T) -> usize {
    // Counting into a size flavor cannot fail: records are plain data with
    // no custom serializers.
    postcard::serialize_with_flavor::<T, _, usize>(value, postcard::ser_flavors::Size::default())
        .expect("postcard size of plain data cannot fail")
}

// The limits sized against the default frame.
const _: () = assert!(crate::limits::MAX_HISTORY_STATE_BYTES <= DEFAULT_MAX_FRAME / 4);
const _: () = assert!(crate::limits::MAX_ATTRIBUTES_STATE_BYTES <= DEFAULT_MAX_FRAME / 4);
// A queue holds at least one largest default frame, also under pressure.
const _: () = assert!(
    crate::limits::SEND_QUEUE_SHARE_UNDER_PRESSURE > DEFAULT_MAX_FRAME
        && crate::limits::MAX_SEND_QUEUE_BYTES >= crate::limits::SEND_QUEUE_SHARE_UNDER_PRESSURE
        && crate::limits::SEND_QUEUE_BUDGET_BYTES >= crate::limits::MAX_SEND_QUEUE_BYTES
);
