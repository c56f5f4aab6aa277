//! The cluster-secret handshake and per-frame MACs, sans-IO.
//!
//! With a cluster secret every connection starts with a mutual HMAC-SHA256
//! challenge–response, *before* [`Hello`](crate::protocol::Hello); after it
//! every frame carries a MAC under a per-connection, per-direction key and a
//! per-direction sequence number, so nothing can be injected, replayed,
//! reordered or reflected. Without a secret frames are plain, exactly as the
//! [`codec`] writes them, and [`Session::plain`] says so.
//!
//! # Shape
//!
//! The handshake is a tiny machine that sees one frame *body* at a time and
//! answers with a [`Step`]. It has no timers and no clock, so it does not take
//! the `handle(now, event)` shape of the big machines: a deadline for the
//! whole handshake is the connection's (the runtime applies the same one it
//! applies to `Hello`). Nonces are arguments; the runtime draws them from OS
//! entropy, fresh for every connection.
//!
//! # How a runtime drives a connection
//!
//! 1. Make a [`FrameReader`] with [`HANDSHAKE_MAX_BODY`] as its limit (a peer
//!    that has not proved the secret cannot make us buffer a large frame).
//! 2. Dialling side: `let (hs, frame) = Handshake::client(&secret, nonce)`, send
//!    `frame`. Accepting side: `let hs = Handshake::server(&secret, nonce)`.
//! 3. For every body from [`FrameReader::next_body`], call
//!    [`Handshake::receive`] and act on the [`Step`]:
//!    * [`Step::Send`]: send the frame, read on;
//!    * [`Step::Established`]: send its frame if any (the client's proof must go
//!      out before anything sealed), keep the [`Session`], raise the reader's
//!      limit to [`FrameOpener::max_body`] and go on to 4 with the bytes the
//!      reader still holds (a client may pipeline its first sealed frame right
//!      behind its proof);
//!    * [`Step::Failed`]: send its frame if any (a refusal that names the
//!      reason to the peer, best effort), log the [`AuthError`], close.
//! 4. Send every message with [`FrameSealer::seal`] (in the order they go on
//!    the wire) and open every received body with [`FrameOpener::open`]; any
//!    [`FrameError`] closes the connection.
//!
//! Without a secret the runtime skips 2–3 and uses [`Session::plain`]: sealing
//! is [`codec::encode`], opening is [`codec::decode_body`], except that a
//! handshake message from a peer that requires a secret is named
//! ([`FrameError::PeerRequiresSecret`]); the runtime may then send
//! [`refusal_frame`]`(`[`RefusalReason::NoSecret`]`)` so that peer reports
//! [`AuthError::PeerHasNoSecret`].
//!
//! # Handshake wire format (version 1)
//!
//! Each handshake message is the body of an ordinary length-prefixed frame
//! (4-byte big-endian length, see [`codec::LEN_PREFIX`]). Every body starts
//! with a 6-byte header: the magic [`MAGIC`] (`ff 52 47 41`, "\xffRGA"), the
//! version byte [`AUTH_VERSION`] and a kind byte. The magic's first byte can
//! never start a postcard [`Message`] (no variant index has that encoding), so
//! either side tells a handshake message from a plain frame; the version sits
//! at a fixed offset so a peer of another version is named as such.
//!
//! | kind | name             | after the header                       | body bytes |
//! |------|------------------|----------------------------------------|------------|
//! | 1    | client-nonce     | `nc` (32)                              | 38         |
//! | 2    | server-challenge | `ns` (32), `mac_s` (32)                | 70         |
//! | 3    | client-proof     | `mac_c` (32)                           | 38         |
//! | 4    | refusal          | reason (1, see [`RefusalReason`])      | 7          |
//! | 5    | client-token     | claims (1..=[`MAX_TOKEN_CLAIMS`]), `nc` (32) | 39..=1062 |
//!
//! ```text
//! client → server  client-nonce      nc
//! server → client  server-challenge  ns, mac_s = HMAC(secret, "regent-auth-v1-server" ‖ nc ‖ ns)
//! client → server  client-proof      mac_c = HMAC(secret, "regent-auth-v1-client" ‖ ns ‖ nc)
//! key_c2s = HMAC(secret, "regent-auth-v1-key-c2s" ‖ nc ‖ ns)
//! key_s2c = HMAC(secret, "regent-auth-v1-key-s2c" ‖ nc ‖ ns)
//! ```
//!
//! A client that holds a token instead of the secret ([`Handshake::client_with_token`],
//! docs/security.md) opens with client-token instead of client-nonce: the
//! token's claims bytes (the postcard encoding its text carries) and `nc`.
//! The server derives the token's proof key `K` =
//! [`Token::from_claims`]`(secret, claims).`[`proof_key`](Token::proof_key)
//! (the token's MAC, which only the secret's holder can compute from the
//! claims), and the same challenge–response runs with `K` in place of the
//! secret: `mac_s`, `mac_c` and the frame keys are the HMACs above keyed by
//! `K`. The client verifies `mac_s` under its token before it sends its
//! proof, so a server without the secret never obtains a proof, and a token
//! of another cluster or with altered claims fails there
//! ([`AuthError::TokenNotAccepted`], refusal [`RefusalReason::BadToken`]).
//! Once established the server knows the claims the client proved
//! ([`Handshake::token_claims`]); whether they are expired or revoked is the
//! master's to check (it has the wall clock and the revocation list). A
//! server of a build before tokens refuses kind 5 as a protocol error, which
//! a token client names ([`AuthError::TokenUnsupported`]).
//!
//! HMAC is HMAC-SHA256. The labels bind the direction, the nonces are fixed
//! length, so no MAC of one kind is ever a valid MAC of another: a server's
//! own challenge MAC replayed as a client proof fails, and so does a proof
//! from another connection (other nonces). The client verifies `mac_s`
//! before it sends its own proof, so a peer without the secret never obtains
//! a proof over nonces it chose. A peer that sends our own nonce back is
//! refused ([`AuthError::ReflectedNonce`]).
//!
//! # Sealed frames
//!
//! A sealed frame is `len ‖ body ‖ tag` where `body` is the postcard body the
//! codec would write, `len` (4-byte big-endian) counts `body ‖ tag`, and
//! `tag` is HMAC-SHA256(key of the direction, `seq` as 8 big-endian bytes ‖
//! `body`) truncated to its first [`TAG_LEN`] = 16 bytes (128 bits, as in
//! RFC 4868). `seq` counts the sealed frames of one direction from 0 and is
//! not sent: each end counts. A replayed, dropped, reordered or reflected
//! frame (the other direction has another key) therefore fails
//! ([`FrameError::BadMac`]). The MAC is verified before postcard sees a byte.

use crate::codec::{self, DecodeError, DecoderConfig, LEN_PREFIX};
use crate::protocol::Message;
use crate::secret::Secret;
use crate::token::{Claims, Token, TokenError};
use hmac::{Hmac, Mac};
use sha2::Sha256;
use std::fmt;

type HmacSha256 = Hmac<Sha256>;

/// The four bytes every handshake message starts with.
pub const MAGIC: [u8; 4] = [0xff, b'R', b'G', b'A'];

/// The handshake version this build speaks.
pub const AUTH_VERSION: u8 = 1;

/// Bytes of the per-frame MAC (HMAC-SHA256 truncated to 128 bits).
pub const TAG_LEN: usize = 16;

/// Bytes of a handshake nonce.
pub const NONCE_LEN: usize = 32;

/// Bytes of a handshake MAC (full HMAC-SHA256).
pub const MAC_LEN: usize = 32;

/// The largest frame body a [`FrameReader`] should accept before the peer has
/// proved the secret: room for every handshake message, and for a plain
/// `Hello` from a peer without a secret so it can be named as such.
pub const HANDSHAKE_MAX_BODY: usize = 4096;

/// The most claims bytes a client-token message may carry (a token's claims
/// are far smaller: every text claim is at most
/// [`MAX_CLAIM_TEXT`](crate::token::MAX_CLAIM_TEXT) bytes).
pub const MAX_TOKEN_CLAIMS: usize = 1024;

/// Bytes of the handshake header (magic, version, kind).
const HEADER: usize = MAGIC.len() + 2;

const LABEL_SERVER: &[u8] = b"regent-auth-v1-server";
const LABEL_CLIENT: &[u8] = b"regent-auth-v1-client";
const LABEL_C2S: &[u8] = b"regent-auth-v1-key-c2s";
const LABEL_S2C: &[u8] = b"regent-auth-v1-key-s2c";
const LABEL_KEY_ID: &[u8] = b"regent-auth-v1-key-id";

/// A per-connection nonce, fresh from OS entropy.
pub type Nonce = [u8; NONCE_LEN];

/// Which end of the connection a handshake is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    /// The side that dialled.
    Client,
    /// The side that accepted.
    Server,
}

/// What a refusal frame tells the peer. Refusals are not authenticated: they
/// only make the peer's log precise; the connection closes either way.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RefusalReason {
    /// The peer's handshake MAC did not verify: the secrets differ.
    WrongSecret,
    /// The sender has no cluster secret (sent by a node without one that got a
    /// handshake message).
    NoSecret,
    /// The sender requires a cluster secret and got a plain frame.
    SecretRequired,
    /// The sender does not speak the handshake version it got (the refusal is
    /// written in the sender's own version).
    UnsupportedVersion,
    /// A malformed or unexpected handshake message.
    Protocol,
    /// The token a client dialled with does not verify: issued with another
    /// cluster's secret, altered, or malformed.
    BadToken,
    /// A code this build does not know.
    Unknown(u8),
}

impl RefusalReason {
    fn code(self) -> u8 {
        match self {
            RefusalReason::WrongSecret => 1,
            RefusalReason::NoSecret => 2,
            RefusalReason::SecretRequired => 3,
            RefusalReason::UnsupportedVersion => 4,
            RefusalReason::Protocol => 5,
            RefusalReason::BadToken => 6,
            RefusalReason::Unknown(c) => c,
        }
    }

    fn from_code(c: u8) -> RefusalReason {
        match c {
            1 => RefusalReason::WrongSecret,
            2 => RefusalReason::NoSecret,
            3 => RefusalReason::SecretRequired,
            4 => RefusalReason::UnsupportedVersion,
            5 => RefusalReason::Protocol,
            6 => RefusalReason::BadToken,
            c => RefusalReason::Unknown(c),
        }
    }
}

impl fmt::Display for RefusalReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RefusalReason::WrongSecret => f.write_str("wrong cluster secret"),
            RefusalReason::NoSecret => f.write_str("it has no cluster secret"),
            RefusalReason::SecretRequired => f.write_str("it requires a cluster secret"),
            RefusalReason::UnsupportedVersion => f.write_str("unsupported handshake version"),
            RefusalReason::Protocol => f.write_str("handshake protocol error"),
            RefusalReason::BadToken => f.write_str(
                "the token does not verify (issued with another cluster secret, altered, or \
                 malformed)",
            ),
            RefusalReason::Unknown(c) => write!(f, "unknown reason code {c}"),
        }
    }
}

/// Why a handshake failed. The runtime logs it and closes the connection.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AuthError {
    /// A handshake MAC did not verify: the two nodes have different secrets
    /// (or someone without the secret is on the line).
    WrongSecret {
        /// `false`: this node found the peer's MAC wrong; `true`: the peer
        /// said it found ours wrong (an unauthenticated refusal).
        reported_by_peer: bool,
    },
    /// This node requires a secret and the peer has none: it sent a plain
    /// frame, or refused with [`RefusalReason::NoSecret`].
    PeerHasNoSecret,
    /// The peer speaks another handshake version.
    UnsupportedVersion {
        /// The version the peer sent.
        got: u8,
        /// The version this build speaks.
        supported: u8,
    },
    /// A body that is not a well-formed handshake message.
    Malformed {
        /// The body length.
        len: usize,
        /// What is wrong.
        detail: String,
    },
    /// A well-formed handshake message that does not fit this point of the
    /// handshake (such as our own message reflected back).
    UnexpectedMessage {
        /// What this side waited for.
        expected: &'static str,
        /// What came.
        got: &'static str,
    },
    /// The peer sent our own nonce back (a reflection).
    ReflectedNonce,
    /// The token does not verify: its claims under this cluster's secret
    /// give another proof key than the client holds (a token of another
    /// cluster, or altered claims), or its claims do not decode.
    TokenNotAccepted {
        /// `false`: this node found it wrong; `true`: the peer said so (an
        /// unauthenticated refusal).
        reported_by_peer: bool,
        /// What is wrong, when this node knows more than that.
        detail: Option<String>,
    },
    /// This node dialled with a token and the peer refused the token
    /// handshake as a protocol error: the peer predates tokens.
    TokenUnsupported,
    /// The peer refused the handshake for a reason not covered above.
    Refused {
        /// The reason it gave.
        reason: RefusalReason,
    },
}

impl fmt::Display for AuthError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AuthError::WrongSecret { reported_by_peer: false } => f.write_str(
                "wrong cluster secret: the peer's handshake MAC does not verify \
                 (the nodes are configured with different secrets)",
            ),
            AuthError::WrongSecret { reported_by_peer: true } => f.write_str(
                "wrong cluster secret: the peer refused our handshake MAC \
                 (the nodes are configured with different secrets)",
            ),
            AuthError::PeerHasNoSecret => {
                f.write_str("the peer has no cluster secret configured, and this node requires one")
            }
            AuthError::UnsupportedVersion { got, supported } => write!(
                f,
                "unsupported auth handshake version {got} (this build speaks version {supported})"
            ),
            AuthError::Malformed { len, detail } => {
                write!(f, "malformed auth handshake message of {len} bytes: {detail}")
            }
            AuthError::UnexpectedMessage { expected, got } => {
                write!(f, "unexpected auth handshake message: expected {expected}, got {got}")
            }
            AuthError::ReflectedNonce => {
                f.write_str("reflected handshake: the peer sent back this node's own nonce")
            }
            AuthError::TokenNotAccepted { reported_by_peer, detail } => {
                let who = if *reported_by_peer { "the peer refused" } else { "this node refused" };
                write!(
                    f,
                    "token not accepted: {who} the token handshake (the token was issued with \
                     another cluster secret, or altered)"
                )?;
                match detail {
                    Some(d) => write!(f, ": {d}"),
                    None => Ok(()),
                }
            }
            AuthError::TokenUnsupported => f.write_str(
                "the peer refused the token handshake as a protocol error: it is of a build \
                 that predates tokens (upgrade it, or dial with the cluster secret)",
            ),
            AuthError::Refused { reason } => write!(f, "the peer refused the handshake: {reason}"),
        }
    }
}

impl std::error::Error for AuthError {}

/// Why a frame after the handshake was refused. The runtime closes the
/// connection; the [`FrameOpener`] stays failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FrameError {
    /// A sealed body shorter than its MAC.
    Truncated {
        /// The body length.
        len: usize,
    },
    /// The MAC does not verify for the next expected sequence number: a
    /// tampered, replayed, reordered, reflected or injected frame.
    BadMac {
        /// The sequence number the frame was checked against.
        seq: u64,
    },
    /// The MAC verified but the body is not a valid message.
    Decode(DecodeError),
    /// This node has no secret and the peer sent a handshake message: the
    /// peer requires a cluster secret.
    PeerRequiresSecret,
}

impl fmt::Display for FrameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FrameError::Truncated { len } => write!(
                f,
                "truncated sealed frame: {len} bytes is shorter than its {TAG_LEN}-byte MAC"
            ),
            FrameError::BadMac { seq } => write!(
                f,
                "frame MAC does not verify at sequence number {seq} \
                 (tampered, replayed, reordered or injected frame)"
            ),
            FrameError::Decode(e) => write!(f, "authenticated frame: {e}"),
            FrameError::PeerRequiresSecret => {
                f.write_str("the peer requires a cluster secret, and this node has none configured")
            }
        }
    }
}

impl std::error::Error for FrameError {}

/// One decoded handshake message.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Wire {
    ClientNonce(Nonce),
    ClientToken { claims: Vec<u8>, nonce: Nonce },
    ServerChallenge { nonce: Nonce, mac: [u8; MAC_LEN] },
    ClientProof { mac: [u8; MAC_LEN] },
    Refusal(RefusalReason),
}

impl Wire {
    fn name(&self) -> &'static str {
        match self {
            Wire::ClientNonce(_) => "client-nonce",
            Wire::ClientToken { .. } => "client-token",
            Wire::ServerChallenge { .. } => "server-challenge",
            Wire::ClientProof { .. } => "client-proof",
            Wire::Refusal(_) => "refusal",
        }
    }

    fn kind(&self) -> u8 {
        match self {
            Wire::ClientNonce(_) => 1,
            Wire::ServerChallenge { .. } => 2,
            Wire::ClientProof { .. } => 3,
            Wire::Refusal(_) => 4,
            Wire::ClientToken { .. } => 5,
        }
    }

    /// The whole frame: length prefix, header, fields.
    fn frame(&self) -> Vec<u8> {
        let mut body = Vec::with_capacity(HEADER + 2 * NONCE_LEN);
        body.extend_from_slice(&MAGIC);
        body.push(AUTH_VERSION);
        body.push(self.kind());
        match self {
            Wire::ClientNonce(n) => body.extend_from_slice(n),
            Wire::ServerChallenge { nonce, mac } => {
                body.extend_from_slice(nonce);
                body.extend_from_slice(mac);
            }
            Wire::ClientProof { mac } => body.extend_from_slice(mac),
            Wire::Refusal(r) => body.push(r.code()),
            Wire::ClientToken { claims, nonce } => {
                body.extend_from_slice(claims);
                body.extend_from_slice(nonce);
            }
        }
        let mut out = Vec::with_capacity(LEN_PREFIX + body.len());
        // Handshake bodies are at most 1062 bytes.
        out.extend_from_slice(&(body.len() as u32).to_be_bytes());
        out.extend_from_slice(&body);
        out
    }

    /// Parses a body that starts with [`MAGIC`].
    fn parse(body: &[u8]) -> Result<Wire, AuthError> {
        let malformed = |detail: String| AuthError::Malformed { len: body.len(), detail };
        if body.len() < HEADER || body[..MAGIC.len()] != MAGIC {
            return Err(malformed("not an auth handshake message (no magic)".into()));
        }
        let version = body[MAGIC.len()];
        if version != AUTH_VERSION {
            return Err(AuthError::UnsupportedVersion { got: version, supported: AUTH_VERSION });
        }
        let kind = body[MAGIC.len() + 1];
        let rest = &body[HEADER..];
        if kind == 5 {
            let claims_len = rest.len().saturating_sub(NONCE_LEN);
            if !(1..=MAX_TOKEN_CLAIMS).contains(&claims_len) {
                return Err(malformed(format!(
                    "message kind 5 carries 1 to {MAX_TOKEN_CLAIMS} claims bytes and a \
                     {NONCE_LEN}-byte nonce after the header, got {} bytes",
                    rest.len()
                )));
            }
            let (claims, nonce) = rest.split_at(claims_len);
            return Ok(Wire::ClientToken {
                claims: claims.to_vec(),
                nonce: nonce.try_into().expect("length checked above"),
            });
        }
        let want = match kind {
            1 | 3 => NONCE_LEN,
            2 => NONCE_LEN + MAC_LEN,
            4 => 1,
            k => return Err(malformed(format!("unknown message kind {k}"))),
        };
        if rest.len() != want {
            return Err(malformed(format!(
                "message kind {kind} carries {want} bytes after the header, got {}",
                rest.len()
            )));
        }
        let arr = |s: &[u8]| -> [u8; 32] { s.try_into().expect("length checked above") };
        Ok(match kind {
            1 => Wire::ClientNonce(arr(rest)),
            2 => Wire::ServerChallenge {
                nonce: arr(&rest[..NONCE_LEN]),
                mac: arr(&rest[NONCE_LEN..]),
            },
            3 => Wire::ClientProof { mac: arr(rest) },
            _ => Wire::Refusal(RefusalReason::from_code(rest[0])),
        })
    }
}

/// The frame a node sends to refuse a handshake (for example
/// [`RefusalReason::NoSecret`] from a node without a secret that got a
/// handshake message, see [`FrameError::PeerRequiresSecret`]).
pub fn refusal_frame(reason: RefusalReason) -> Vec<u8> {
    Wire::Refusal(reason).frame()
}

/// Whether a frame body is a handshake message (starts with [`MAGIC`]).
pub fn is_handshake_body(body: &[u8]) -> bool {
    body.starts_with(&MAGIC)
}

fn hmac(key: &[u8], parts: &[&[u8]]) -> [u8; MAC_LEN] {
    let mut m = HmacSha256::new_from_slice(key).expect("HMAC takes keys of any length");
    for p in parts {
        m.update(p);
    }
    m.finalize().into_bytes().into()
}

/// Constant-time check of `mac` against HMAC(key, parts).
fn hmac_verifies(key: &[u8], parts: &[&[u8]], mac: &[u8]) -> bool {
    let mut m = HmacSha256::new_from_slice(key).expect("HMAC takes keys of any length");
    for p in parts {
        m.update(p);
    }
    m.verify_slice(mac).is_ok()
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum State {
    /// Client: sent client-nonce, waiting for server-challenge.
    AwaitChallenge,
    /// Server: waiting for client-nonce.
    AwaitNonce,
    /// Server: sent server-challenge for `nc`, waiting for client-proof;
    /// `token`: the client's token, whose proof key replaces the secret.
    AwaitProof { nc: Nonce, token: Option<Box<Token>> },
    /// Established; the session was handed out.
    Done,
    /// Failed; every later body gets the same error.
    Failed(AuthError),
}

impl State {
    fn expecting(&self) -> &'static str {
        match self {
            State::AwaitChallenge => "server-challenge",
            State::AwaitNonce => "client-nonce",
            State::AwaitProof { .. } => "client-proof",
            State::Done => "nothing (the handshake is complete)",
            State::Failed(_) => "nothing (the handshake failed)",
        }
    }
}

/// One end of the cluster-secret (or token) handshake on one connection.
pub struct Handshake {
    side: Side,
    /// The cluster secret; for a client dialling with a token, the token's
    /// proof key.
    secret: Secret,
    my_nonce: Nonce,
    state: State,
    /// The token this connection runs under: the client's own claims, or on
    /// the server the claims the client proved (set once established).
    token: Option<Claims>,
}

impl fmt::Debug for Handshake {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Handshake")
            .field("side", &self.side)
            .field("state", &self.state)
            .field("token", &self.token.as_ref().map(|c| &c.name))
            .finish_non_exhaustive()
    }
}

/// What the runtime does after [`Handshake::receive`].
#[derive(Debug)]
#[must_use]
pub enum Step {
    /// Send `frame` (a whole frame, length prefix included), then feed the
    /// next received body.
    Send(Vec<u8>),
    /// The peer proved the secret. Send `frame` if any, before any sealed
    /// frame (the client's proof), then use `session` for every later frame in
    /// both directions, starting with the bytes already buffered.
    Established {
        /// The last handshake frame to send, if any.
        frame: Option<Vec<u8>>,
        /// The sealer and opener of this connection.
        session: Session,
    },
    /// The handshake failed. Send `frame` if any (a refusal naming the reason
    /// to the peer; best effort, never wait for it), log `error`, close the
    /// connection.
    Failed {
        /// Why.
        error: AuthError,
        /// A refusal to send before closing, if any.
        frame: Option<Vec<u8>>,
    },
}

impl Handshake {
    /// The dialling side, and the first frame it sends (client-nonce).
    pub fn client(secret: &Secret, my_nonce: Nonce) -> (Handshake, Vec<u8>) {
        let hs = Handshake {
            side: Side::Client,
            secret: secret.clone(),
            my_nonce,
            state: State::AwaitChallenge,
            token: None,
        };
        (hs, Wire::ClientNonce(my_nonce).frame())
    }

    /// The dialling side of a client that holds a token (its text form,
    /// `rgt1.…`) and no secret, and the first frame it sends (client-token).
    /// Fails when the text is not a well-formed token (its MAC is checked by
    /// the server, through the challenge–response).
    pub fn client_with_token(
        token_text: &str,
        my_nonce: Nonce,
    ) -> Result<(Handshake, Vec<u8>), TokenError> {
        let (claims, claims_bytes, mac) = Token::unverified_claims(token_text)?;
        if claims_bytes.len() > MAX_TOKEN_CLAIMS {
            return Err(TokenError::Malformed(format!(
                "its claims take {} bytes, a handshake carries at most {MAX_TOKEN_CLAIMS}",
                claims_bytes.len()
            )));
        }
        let key = Secret::new(mac.to_vec()).expect("32 bytes is long enough");
        let frame = Wire::ClientToken { claims: claims_bytes, nonce: my_nonce }.frame();
        let hs = Handshake {
            side: Side::Client,
            secret: key,
            my_nonce,
            state: State::AwaitChallenge,
            token: Some(claims),
        };
        Ok((hs, frame))
    }

    /// The accepting side; it sends nothing until the client-nonce (or
    /// client-token) arrives. It accepts both: a peer proving the secret,
    /// and a peer proving a token signed with it ([`token_claims`](Self::token_claims)).
    pub fn server(secret: &Secret, my_nonce: Nonce) -> Handshake {
        Handshake {
            side: Side::Server,
            secret: secret.clone(),
            my_nonce,
            state: State::AwaitNonce,
            token: None,
        }
    }

    /// The token this connection runs under: on the server, once
    /// established, the claims the client proved (`None`: the client proved
    /// the cluster secret, it is the root); on a client, its own token's
    /// claims. Expiry and revocation are not checked here (the master does,
    /// with its wall clock and revocation list).
    pub fn token_claims(&self) -> Option<&Claims> {
        match (self.side, &self.state) {
            (Side::Server, State::Done) | (Side::Client, _) => self.token.as_ref(),
            _ => None,
        }
    }

    /// Which end this is.
    pub fn side(&self) -> Side {
        self.side
    }

    /// `true` once [`Step::Established`] was returned.
    pub fn is_established(&self) -> bool {
        self.state == State::Done
    }

    /// The error the handshake failed with, if it did.
    pub fn error(&self) -> Option<&AuthError> {
        match &self.state {
            State::Failed(e) => Some(e),
            _ => None,
        }
    }

    /// Feeds one received frame body (without its length prefix). Never
    /// panics on any input. Once the handshake has failed every body gets the
    /// same error (and no second refusal); a body fed after
    /// [`Step::Established`] is a misuse and fails the handshake with
    /// [`AuthError::UnexpectedMessage`] (the session handed out is unaffected).
    pub fn receive(&mut self, body: &[u8]) -> Step {
        if let State::Failed(e) = &self.state {
            return Step::Failed { error: e.clone(), frame: None };
        }
        match self.step(body) {
            Ok(step) => step,
            Err((error, reply)) => {
                self.state = State::Failed(error.clone());
                Step::Failed { error, frame: reply.map(refusal_frame) }
            }
        }
    }

    fn step(&mut self, body: &[u8]) -> Result<Step, (AuthError, Option<RefusalReason>)> {
        if !is_handshake_body(body) {
            // A plain frame where a handshake message belongs: a peer without
            // a secret if it is a message (of any protocol version), garbage
            // otherwise.
            match codec::decode_body(body, &DecoderConfig::default()) {
                Ok(_) | Err(DecodeError::UnsupportedVersion { .. }) => {
                    return Err((AuthError::PeerHasNoSecret, Some(RefusalReason::SecretRequired)));
                }
                Err(_) => {}
            }
        }
        let msg = Wire::parse(body).map_err(|e| {
            let reply = match e {
                AuthError::UnsupportedVersion { .. } => RefusalReason::UnsupportedVersion,
                _ => RefusalReason::Protocol,
            };
            (e, Some(reply))
        })?;
        let with_token = self.token.is_some() && self.side == Side::Client;
        if let Wire::Refusal(reason) = msg {
            let error = match reason {
                RefusalReason::WrongSecret => AuthError::WrongSecret { reported_by_peer: true },
                RefusalReason::NoSecret => AuthError::PeerHasNoSecret,
                RefusalReason::BadToken => {
                    AuthError::TokenNotAccepted { reported_by_peer: true, detail: None }
                }
                RefusalReason::Protocol if with_token && self.state == State::AwaitChallenge => {
                    AuthError::TokenUnsupported
                }
                reason => AuthError::Refused { reason },
            };
            return Err((error, None));
        }
        let got = msg.name();
        let unexpected = |state: &State| {
            let e = AuthError::UnexpectedMessage { expected: state.expecting(), got };
            (e, Some(RefusalReason::Protocol))
        };
        let secret = self.secret.expose();
        match (&self.state, msg) {
            (State::AwaitChallenge, Wire::ServerChallenge { nonce: ns, mac }) => {
                let nc = self.my_nonce;
                if ns == nc {
                    return Err((AuthError::ReflectedNonce, Some(RefusalReason::Protocol)));
                }
                if !hmac_verifies(secret, &[LABEL_SERVER, &nc, &ns], &mac) {
                    if with_token {
                        return Err((
                            AuthError::TokenNotAccepted { reported_by_peer: false, detail: None },
                            Some(RefusalReason::BadToken),
                        ));
                    }
                    return Err((
                        AuthError::WrongSecret { reported_by_peer: false },
                        Some(RefusalReason::WrongSecret),
                    ));
                }
                let proof = Wire::ClientProof { mac: hmac(secret, &[LABEL_CLIENT, &ns, &nc]) };
                let session = Session::derive(secret, Side::Client, &nc, &ns);
                self.state = State::Done;
                Ok(Step::Established { frame: Some(proof.frame()), session })
            }
            (State::AwaitNonce, Wire::ClientNonce(nc)) => {
                let ns = self.my_nonce;
                if nc == ns {
                    return Err((AuthError::ReflectedNonce, Some(RefusalReason::Protocol)));
                }
                let mac = hmac(secret, &[LABEL_SERVER, &nc, &ns]);
                self.state = State::AwaitProof { nc, token: None };
                Ok(Step::Send(Wire::ServerChallenge { nonce: ns, mac }.frame()))
            }
            (State::AwaitNonce, Wire::ClientToken { claims, nonce: nc }) => {
                let ns = self.my_nonce;
                if nc == ns {
                    return Err((AuthError::ReflectedNonce, Some(RefusalReason::Protocol)));
                }
                let token = Token::from_claims(&self.secret, &claims).map_err(|e| {
                    let e = AuthError::TokenNotAccepted {
                        reported_by_peer: false,
                        detail: Some(e.to_string()),
                    };
                    (e, Some(RefusalReason::BadToken))
                })?;
                let mac = hmac(token.proof_key().expose(), &[LABEL_SERVER, &nc, &ns]);
                self.state = State::AwaitProof { nc, token: Some(Box::new(token)) };
                Ok(Step::Send(Wire::ServerChallenge { nonce: ns, mac }.frame()))
            }
            (State::AwaitProof { nc, token }, Wire::ClientProof { mac }) => {
                let (nc, ns) = (*nc, self.my_nonce);
                let key = token.as_ref().map(|t| t.proof_key());
                let key = key.as_ref().map_or(secret, |k| k.expose());
                if !hmac_verifies(key, &[LABEL_CLIENT, &ns, &nc], &mac) {
                    if token.is_some() {
                        return Err((
                            AuthError::TokenNotAccepted { reported_by_peer: false, detail: None },
                            Some(RefusalReason::BadToken),
                        ));
                    }
                    return Err((
                        AuthError::WrongSecret { reported_by_peer: false },
                        Some(RefusalReason::WrongSecret),
                    ));
                }
                let session = Session::derive(key, Side::Server, &nc, &ns);
                self.token = token.as_ref().map(|t| t.claims.clone());
                self.state = State::Done;
                Ok(Step::Established { frame: None, session })
            }
            (state, _) => Err(unexpected(state)),
        }
    }
}

/// The sealer and opener of one connection.
#[derive(Debug)]
pub struct Session {
    /// Seals what this node sends.
    pub sealer: FrameSealer,
    /// Opens what this node receives.
    pub opener: FrameOpener,
}

impl Session {
    /// A connection without a cluster secret: frames are plain codec frames.
    pub fn plain() -> Session {
        Session { sealer: FrameSealer { key: None, seq: 0 }, opener: FrameOpener::plain() }
    }

    fn derive(secret: &[u8], side: Side, nc: &Nonce, ns: &Nonce) -> Session {
        let c2s = hmac(secret, &[LABEL_C2S, nc, ns]);
        let s2c = hmac(secret, &[LABEL_S2C, nc, ns]);
        let (send, recv) = match side {
            Side::Client => (c2s, s2c),
            Side::Server => (s2c, c2s),
        };
        Session {
            sealer: FrameSealer { key: Some(Box::new(FrameKey::new(send))), seq: 0 },
            opener: FrameOpener { key: Some(Box::new(FrameKey::new(recv))), seq: 0, failed: None },
        }
    }

    /// `true` when frames carry a MAC.
    pub fn is_sealed(&self) -> bool {
        self.sealer.key.is_some()
    }
}

/// A direction's key, with the HMAC state keyed once.
#[derive(Clone)]
struct FrameKey {
    mac: HmacSha256,
    id: [u8; 8],
}

impl FrameKey {
    fn new(key: [u8; MAC_LEN]) -> FrameKey {
        let full = hmac(&key, &[LABEL_KEY_ID]);
        let mut id = [0; 8];
        id.copy_from_slice(&full[..8]);
        FrameKey { mac: HmacSha256::new_from_slice(&key).expect("any key length"), id }
    }

    fn keyed(&self, seq: u64, body: &[u8]) -> HmacSha256 {
        let mut m = self.mac.clone();
        m.update(&seq.to_be_bytes());
        m.update(body);
        m
    }
}

impl fmt::Debug for FrameKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "FrameKey(id {})", hex(&self.id))
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Seals the frames one node sends on one connection.
#[derive(Debug)]
pub struct FrameSealer {
    key: Option<Box<FrameKey>>,
    seq: u64,
}

impl FrameSealer {
    /// The whole frame of `msg`: a plain codec frame without a secret, else
    /// `len ‖ body ‖ tag`. Frames must go on the wire in the order sealed.
    pub fn seal(&mut self, msg: &Message) -> Vec<u8> {
        let mut out = Vec::with_capacity(codec::frame_len(msg) + TAG_LEN);
        self.seal_into(msg, &mut out);
        out
    }

    /// Appends the frame of `msg` to `out` (see [`seal`](Self::seal)).
    pub fn seal_into(&mut self, msg: &Message, out: &mut Vec<u8>) {
        // Room for the tag too, so appending it does not grow the buffer.
        out.reserve(codec::frame_len(msg) + TAG_LEN);
        let start = out.len();
        codec::encode_into(msg, out);
        self.seal_tail(out, start);
    }

    /// Seals, in place, a plain codec frame made earlier by
    /// [`codec::encode`] (a runtime encodes when it queues a message, to
    /// count its bytes, and seals when the frame goes on the wire): the same
    /// bytes [`seal`](Self::seal) would have made of the message. At most
    /// [`TAG_LEN`] bytes are added.
    pub fn seal_frame(&mut self, frame: &mut Vec<u8>) {
        self.seal_tail(frame, 0);
    }

    /// Seals the plain frame that starts at `start` and runs to the end of
    /// `out`.
    fn seal_tail(&mut self, out: &mut Vec<u8>, start: usize) {
        let Some(key) = &self.key else { return };
        let body_at = start + LEN_PREFIX;
        let tag = key.keyed(self.seq, &out[body_at..]).finalize().into_bytes();
        out.extend_from_slice(&tag[..TAG_LEN]);
        // Bodies are bounded by the codec's u32 prefix; the tag adds 16 bytes.
        let len = (out.len() - body_at) as u32;
        out[start..body_at].copy_from_slice(&len.to_be_bytes());
        // 2^64 frames on one connection cannot happen; wrapping keeps sealing
        // total without a panic path.
        self.seq = self.seq.wrapping_add(1);
    }

    /// Sequence number of the next sealed frame (0 first; always 0 when plain).
    pub fn next_seq(&self) -> u64 {
        self.seq
    }

    /// An 8-byte public fingerprint of the sending key (a MAC of a fixed
    /// label under it, not the key), for logs and tests: it equals the peer
    /// opener's [`FrameOpener::key_id`]. `None` when plain.
    pub fn key_id(&self) -> Option<[u8; 8]> {
        self.key.as_ref().map(|k| k.id)
    }
}

/// Verifies and strips the MAC of every frame one node receives on one
/// connection, then decodes it.
#[derive(Debug)]
pub struct FrameOpener {
    key: Option<Box<FrameKey>>,
    seq: u64,
    failed: Option<FrameError>,
}

impl FrameOpener {
    /// An opener for a connection without a secret.
    pub fn plain() -> FrameOpener {
        FrameOpener { key: None, seq: 0, failed: None }
    }

    /// The body limit for the [`FrameReader`] once the handshake is done:
    /// `max_frame` plus the tag when sealed.
    pub fn max_body(&self, max_frame: usize) -> usize {
        if self.key.is_some() {
            max_frame.saturating_add(TAG_LEN)
        } else {
            max_frame
        }
    }

    /// Verifies one received body (without its length prefix) and returns
    /// the message bytes it authenticates. After an error every later call
    /// fails with the same error.
    pub fn open_body<'a>(&mut self, body: &'a [u8]) -> Result<&'a [u8], FrameError> {
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        let Some(key) = &self.key else {
            if is_handshake_body(body) {
                return Err(self.fail(FrameError::PeerRequiresSecret));
            }
            return Ok(body);
        };
        let Some(split) = body.len().checked_sub(TAG_LEN) else {
            return Err(self.fail(FrameError::Truncated { len: body.len() }));
        };
        let (msg, tag) = body.split_at(split);
        if key.keyed(self.seq, msg).verify_truncated_left(tag).is_err() {
            let seq = self.seq;
            return Err(self.fail(FrameError::BadMac { seq }));
        }
        self.seq = self.seq.wrapping_add(1);
        Ok(msg)
    }

    /// Verifies one received body and decodes the message (the `config`
    /// checks of [`codec::decode_body`] apply).
    pub fn open(&mut self, body: &[u8], config: &DecoderConfig) -> Result<Message, FrameError> {
        let msg = self.open_body(body)?;
        codec::decode_body(msg, config).map_err(|e| self.fail(FrameError::Decode(e)))
    }

    /// Sequence number the next frame is checked against.
    pub fn next_seq(&self) -> u64 {
        self.seq
    }

    /// The fingerprint of the receiving key (see [`FrameSealer::key_id`]).
    pub fn key_id(&self) -> Option<[u8; 8]> {
        self.key.as_ref().map(|k| k.id)
    }

    fn fail(&mut self, e: FrameError) -> FrameError {
        self.failed = Some(e.clone());
        e
    }
}

/// An incremental splitter of length-prefixed frames into bodies, for both
/// the handshake and the sealed phase (the [`codec::Decoder`] decodes
/// messages, which a handshake message and a sealed body are not).
///
/// Like the codec's decoder it checks each length prefix against the limit as
/// soon as the prefix is complete and never reserves space from it; the limit
/// can be raised between bodies ([`set_max_body`](Self::set_max_body)), and
/// each frame is checked against the limit in force when it becomes the next
/// one. After an error it stays failed.
#[derive(Debug)]
pub struct FrameReader {
    max_body: usize,
    buf: Vec<u8>,
    /// Bytes of `buf` before this offset are consumed.
    start: usize,
    failed: Option<DecodeError>,
}

impl FrameReader {
    /// A reader accepting bodies of at most `max_body` bytes.
    pub fn new(max_body: usize) -> FrameReader {
        FrameReader { max_body, buf: Vec::new(), start: 0, failed: None }
    }

    /// Changes the limit for the frames not yet returned.
    pub fn set_max_body(&mut self, max_body: usize) {
        self.max_body = max_body;
    }

    /// Appends received bytes; fails at once when the next frame's prefix
    /// announces an oversized body.
    pub fn feed(&mut self, bytes: &[u8]) -> Result<(), DecodeError> {
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        self.compact();
        self.buf.extend_from_slice(bytes);
        self.check_prefix()
    }

    /// The next whole body, `Ok(None)` when more bytes are needed. The slice
    /// lives until the next call on this reader.
    pub fn next_body(&mut self) -> Result<Option<&[u8]>, DecodeError> {
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        self.compact();
        self.check_prefix()?;
        let pending = &self.buf[self.start..];
        if pending.len() < LEN_PREFIX {
            return Ok(None);
        }
        let len = u32::from_be_bytes(pending[..LEN_PREFIX].try_into().expect("4 bytes")) as usize;
        if pending.len() - LEN_PREFIX < len {
            return Ok(None);
        }
        let at = self.start + LEN_PREFIX;
        self.start = at + len;
        Ok(Some(&self.buf[at..at + len]))
    }

    /// Bytes received but not yet returned as bodies.
    pub fn buffered(&self) -> usize {
        self.buf.len() - self.start
    }

    fn compact(&mut self) {
        if self.start == self.buf.len() {
            if self.buf.capacity() > 16 * 1024 {
                // Give a large frame's buffer back: an idle connection
                // keeps nothing big.
                self.buf = Vec::new();
            } else {
                self.buf.clear();
            }
            self.start = 0;
        } else if self.start > 4096 && self.start * 2 > self.buf.len() {
            self.buf.drain(..self.start);
            self.start = 0;
        }
    }

    fn check_prefix(&mut self) -> Result<(), DecodeError> {
        let pending = &self.buf[self.start..];
        if pending.len() >= LEN_PREFIX {
            let len = u32::from_be_bytes(pending[..LEN_PREFIX].try_into().expect("4 bytes"));
            if len as usize > self.max_body {
                let e = DecodeError::FrameTooLarge { len: u64::from(len), max: self.max_body };
                self.failed = Some(e.clone());
                self.buf = Vec::new();
                self.start = 0;
                return Err(e);
            }
        }
        Ok(())
    }
}
