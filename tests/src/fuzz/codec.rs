//! Fuzz target `codec`: the frame codec with a fuzzed [`DecoderConfig`].
//!
//! Input layout: a flags byte (bits 0–1 the maximum frame: the default,
//! 64 bytes, 0, or two more bytes; bit 2 a cluster to check, then its name
//! from the next bytes; bit 3 the mode), then:
//!
//! * **body** (bit 3 clear): the rest is one frame body for
//!   [`codec::decode_body`]. The plain [`FrameOpener`] must agree with it
//!   (a handshake body aside), and what decodes must encode to a frame no
//!   longer than the body (postcard's encoding is the shortest) that
//!   decodes back to the same message.
//! * **stream** (bit 3 set): up to 16 chunk lengths, then a byte stream fed
//!   in those chunks both to the incremental [`Decoder`] and to a
//!   [`FrameReader`] whose bodies go through `decode_body`: both must yield
//!   the same messages and fail at the same point with the same error.
//!
//! Invariants: no panic, the two paths agree, round trips hold.

use super::frames::round_trip;
use super::Source;
use regent_core::auth::{is_handshake_body, FrameError, FrameOpener, FrameReader};
use regent_core::codec::{
    self, DecodeError, Decoder, DecoderConfig, DEFAULT_MAX_FRAME, LEN_PREFIX,
};
use regent_core::protocol::Message;

/// Runs one input (see the module docs).
pub fn target(data: &[u8]) {
    let mut src = Source::new(data);
    let flags = src.u8();
    let max_frame = match flags % 4 {
        0 => DEFAULT_MAX_FRAME,
        1 => 64,
        2 => 0,
        _ => usize::from(src.u16()),
    };
    let cluster = (flags & 4 != 0).then(|| String::from_utf8_lossy(src.sized(8)).into_owned());
    let config = DecoderConfig { max_frame, cluster };
    if flags & 8 == 0 {
        body(src.rest(), &config);
    } else {
        let chunks: Vec<usize> = (0..src.below(17)).map(|_| usize::from(src.u8())).collect();
        stream(src.rest(), &chunks, &config);
    }
}

fn body(body: &[u8], config: &DecoderConfig) {
    let decoded = codec::decode_body(body, config);
    let opened = FrameOpener::plain().open(body, config);
    if is_handshake_body(body) {
        assert_eq!(opened, Err(FrameError::PeerRequiresSecret));
    } else {
        assert_eq!(
            opened,
            decoded.clone().map_err(FrameError::Decode),
            "opener and codec disagree"
        );
    }
    match decoded {
        Ok(msg) => {
            let frame = codec::encode(&msg);
            assert!(
                frame.len() - LEN_PREFIX <= body.len(),
                "{} re-encoded to {} bytes from a body of {}",
                msg.kind(),
                frame.len() - LEN_PREFIX,
                body.len()
            );
            round_trip(&msg, config);
        }
        Err(e) => {
            // Every refusal can be told to an operator.
            let _ = e.to_string();
        }
    }
}

fn stream(stream: &[u8], chunks: &[usize], config: &DecoderConfig) {
    let mut decoder = Decoder::new(config.clone());
    let mut reader = FrameReader::new(config.max_frame);
    let mut rest = stream;
    let mut plan = chunks.iter();
    while !rest.is_empty() {
        let n = plan.next().copied().unwrap_or(rest.len()).min(rest.len());
        let (chunk, tail) = rest.split_at(n);
        rest = tail;
        let fed = (decoder.feed(chunk), reader.feed(chunk));
        assert_eq!(fed.0, fed.1, "Decoder and FrameReader disagree on feeding");
        if fed.0.is_err() {
            return;
        }
        loop {
            let from_decoder = decoder.next_message();
            let from_reader: Result<Option<Message>, DecodeError> = match reader.next_body() {
                Ok(Some(body)) => codec::decode_body(body, config).map(Some),
                Ok(None) => Ok(None),
                Err(e) => Err(e),
            };
            assert_eq!(from_decoder, from_reader, "Decoder and FrameReader + decode_body disagree");
            match from_decoder {
                Ok(Some(msg)) => round_trip(&msg, config),
                Ok(None) => break,
                Err(_) => {
                    assert!(decoder.next_message().is_err(), "a failed decoder recovered");
                    return;
                }
            }
        }
        assert_eq!(
            decoder.buffered(),
            reader.buffered(),
            "Decoder and FrameReader buffer differently"
        );
    }
}
