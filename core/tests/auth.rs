//! The cluster-secret handshake and sealed frames: both ends agree, a wrong
//! secret is named on both sides, reflections, tampering, replays, reorders,
//! truncation and injection are refused precisely, hostile bytes never panic,
//! and golden frames pin the handshake format.

use quickcheck::{Arbitrary, Gen, QuickCheck};
use regent_core::auth::{
    self, AuthError, FrameError, FrameOpener, FrameReader, Handshake, RefusalReason, Session, Side,
    Step, AUTH_VERSION, HANDSHAKE_MAX_BODY, MAGIC, TAG_LEN,
};
use regent_core::codec::{self, DecodeError, DecoderConfig, DEFAULT_MAX_FRAME, LEN_PREFIX};
use regent_core::protocol::{Hello, Message, Role, PROTOCOL_VERSION};
use regent_core::secret::Secret;
use regent_core::token::{Capability, Claims, Token, TokenId};
use regent_core::Incarnation;
use std::path::PathBuf;

const NC: [u8; 32] = [0x11; 32];
const NS: [u8; 32] = [0x22; 32];

fn secret() -> Secret {
    Secret::new(*b"regent golden secret 0123456789!").unwrap()
}

fn other_secret() -> Secret {
    Secret::new(*b"some other cluster's secret 9876").unwrap()
}

fn hello() -> Message {
    Message::Hello(Hello {
        version: PROTOCOL_VERSION,
        cluster: "prod".into(),
        role: Role::Worker,
        node: "w1".into(),
    })
}

fn heartbeat(n: u64) -> Message {
    Message::WorkerHeartbeat { incarnation: Incarnation(n) }
}

fn cfg() -> DecoderConfig {
    DecoderConfig::default()
}

/// The body of a whole frame.
fn body(frame: &[u8]) -> &[u8] {
    let len = u32::from_be_bytes(frame[..LEN_PREFIX].try_into().unwrap()) as usize;
    assert_eq!(frame.len(), LEN_PREFIX + len, "one whole frame");
    &frame[LEN_PREFIX..]
}

fn send(step: Step) -> Vec<u8> {
    match step {
        Step::Send(f) => f,
        other => panic!("expected Send, got {other:?}"),
    }
}

fn established(step: Step) -> (Option<Vec<u8>>, Session) {
    match step {
        Step::Established { frame, session } => (frame, session),
        other => panic!("expected Established, got {other:?}"),
    }
}

fn failed(step: Step) -> (AuthError, Option<Vec<u8>>) {
    match step {
        Step::Failed { error, frame } => (error, frame),
        other => panic!("expected Failed, got {other:?}"),
    }
}

/// A whole handshake; returns (client session, server session).
fn handshake(cs: &Secret, ss: &Secret) -> (Session, Session) {
    let (mut c, nonce) = Handshake::client(cs, NC);
    let mut s = Handshake::server(ss, NS);
    let challenge = send(s.receive(body(&nonce)));
    let (proof, client) = established(c.receive(body(&challenge)));
    let (none, server) = established(s.receive(body(&proof.unwrap())));
    assert!(none.is_none(), "the server has nothing left to send");
    assert!(c.is_established() && s.is_established());
    (client, server)
}

/// A `worker` token of the golden cluster.
fn claims() -> Claims {
    Claims {
        id: TokenId([0x33; 16]),
        name: "rack1".into(),
        key_id: 1,
        capabilities: [Capability::Worker].into_iter().collect(),
        tenant: None,
        frameworks: None,
        workers: Some("rack1-".into()),
        issued_ms: 1_000,
        expires_ms: None,
    }
}

fn token_of(secret: &Secret) -> String {
    Token::issue(secret, &claims()).unwrap()
}

/// A whole token handshake; returns (client session, server session) and
/// the claims the server saw.
fn token_handshake(token: &str, ss: &Secret) -> (Session, Session, Claims) {
    let (mut c, first) = Handshake::client_with_token(token, NC).unwrap();
    let mut s = Handshake::server(ss, NS);
    assert_eq!(s.token_claims(), None, "nothing proved yet");
    let challenge = send(s.receive(body(&first)));
    let (proof, client) = established(c.receive(body(&challenge)));
    let (none, server) = established(s.receive(body(&proof.unwrap())));
    assert!(none.is_none());
    (client, server, s.token_claims().expect("a token connection").clone())
}

#[test]
fn a_token_holder_establishes_and_the_server_knows_its_claims() {
    let (mut client, mut server, seen) = token_handshake(&token_of(&secret()), &secret());
    assert_eq!(seen, claims());
    assert_eq!(client.sealer.key_id(), server.opener.key_id());
    assert_eq!(server.sealer.key_id(), client.opener.key_id());
    let f = client.sealer.seal(&hello());
    assert_eq!(server.opener.open(body(&f), &cfg()), Ok(hello()));
    let f = server.sealer.seal(&heartbeat(2));
    assert_eq!(client.opener.open(body(&f), &cfg()), Ok(heartbeat(2)));
    // The token's keys are not the secret's (same nonces).
    let (secret_client, _) = handshake(&secret(), &secret());
    assert_ne!(secret_client.sealer.key_id(), client.sealer.key_id());
    // A secret handshake leaves no claims: the peer is the root.
    let (mut c, nonce) = Handshake::client(&secret(), NC);
    let mut s = Handshake::server(&secret(), NS);
    let challenge = send(s.receive(body(&nonce)));
    let (proof, _) = established(c.receive(body(&challenge)));
    let _ = established(s.receive(body(&proof.unwrap())));
    assert_eq!(s.token_claims(), None);
}

#[test]
fn a_token_of_another_cluster_is_refused_naming_the_token() {
    let (mut c, first) = Handshake::client_with_token(&token_of(&other_secret()), NC).unwrap();
    let mut s = Handshake::server(&secret(), NS);
    let challenge = send(s.receive(body(&first)));
    // The client finds the server's MAC wrong under its token, before it
    // sends any proof, and refuses naming the token.
    let (error, refusal) = failed(c.receive(body(&challenge)));
    assert_eq!(error, AuthError::TokenNotAccepted { reported_by_peer: false, detail: None });
    assert!(error.to_string().contains("another cluster secret"), "{error}");
    let refusal = refusal.expect("the client says why");
    assert_eq!(refusal, auth::refusal_frame(RefusalReason::BadToken));
    let (error, none) = failed(s.receive(body(&refusal)));
    assert_eq!(error, AuthError::TokenNotAccepted { reported_by_peer: true, detail: None });
    assert!(none.is_none());
    assert_eq!(s.token_claims(), None);
}

#[test]
fn tampered_claims_are_refused() {
    // Widen the claims of a real token and keep its MAC: the server's proof
    // key for the altered claims is not the one the client holds.
    let text = token_of(&secret());
    let mut wider = claims();
    wider.capabilities.insert(Capability::Operator);
    let wider_text = Token::issue(&other_secret(), &wider).unwrap();
    let forged =
        format!("{}.{}", wider_text.rsplit_once('.').unwrap().0, text.rsplit_once('.').unwrap().1);
    let (mut c, first) = Handshake::client_with_token(&forged, NC).unwrap();
    let mut s = Handshake::server(&secret(), NS);
    let challenge = send(s.receive(body(&first)));
    let (error, _) = failed(c.receive(body(&challenge)));
    assert!(matches!(error, AuthError::TokenNotAccepted { reported_by_peer: false, .. }));
    // A client that lies and sends a proof anyway (under the key it holds)
    // is refused by the server.
    let (mut c, first) = Handshake::client_with_token(&text, NC).unwrap();
    let mut first = first;
    // Flip a bit of the claims on the wire (the 7th body byte is claims).
    first[LEN_PREFIX + 6 + 20] ^= 1;
    let mut s = Handshake::server(&secret(), NS);
    match s.receive(body(&first)) {
        Step::Send(challenge) => {
            let (_, refusal) = failed(c.receive(body(&challenge)));
            assert_eq!(refusal, Some(auth::refusal_frame(RefusalReason::BadToken)));
        }
        Step::Failed { error, frame } => {
            // The flipped bit made the claims undecodable: named.
            assert!(matches!(error, AuthError::TokenNotAccepted { detail: Some(_), .. }));
            assert_eq!(frame, Some(auth::refusal_frame(RefusalReason::BadToken)));
        }
        other => panic!("{other:?}"),
    }
    // Garbage claims: the server names them.
    let mut garbage = MAGIC.to_vec();
    garbage.extend([AUTH_VERSION, 5, 0xff, 0xff, 0xff]);
    garbage.extend(NC);
    let (error, frame) = failed(Handshake::server(&secret(), NS).receive(&garbage));
    assert!(error.to_string().contains("do not decode"), "{error}");
    assert_eq!(frame, Some(auth::refusal_frame(RefusalReason::BadToken)));
}

#[test]
fn a_token_proof_replayed_from_another_connection_fails() {
    let text = token_of(&secret());
    // Connection 1, observed on the wire.
    let (mut c1, first1) = Handshake::client_with_token(&text, NC).unwrap();
    let mut s1 = Handshake::server(&secret(), NS);
    let challenge1 = send(s1.receive(body(&first1)));
    let (proof1, _) = established(c1.receive(body(&challenge1)));
    // Connection 2: an attacker replays client-token and the proof of 1; the
    // server drew another nonce.
    let mut s2 = Handshake::server(&secret(), [0x44; 32]);
    let _ = send(s2.receive(body(&first1)));
    let (error, frame) = failed(s2.receive(body(&proof1.unwrap())));
    assert_eq!(error, AuthError::TokenNotAccepted { reported_by_peer: false, detail: None });
    assert_eq!(frame, Some(auth::refusal_frame(RefusalReason::BadToken)));
    assert_eq!(s2.token_claims(), None);
}

#[test]
fn a_token_client_meeting_a_server_that_predates_tokens_says_so() {
    let (mut c, first) = Handshake::client_with_token(&token_of(&secret()), NC).unwrap();
    // What a server of a build before tokens does with kind 5: a protocol
    // error; the refusal it sends is named on the token client.
    let old_server_refusal = auth::refusal_frame(RefusalReason::Protocol);
    assert!(body(&first).len() > 38);
    let (error, _) = failed(c.receive(body(&old_server_refusal)));
    assert_eq!(error, AuthError::TokenUnsupported);
    assert!(error.to_string().contains("predates tokens"), "{error}");
    // An oversized or malformed token text never makes a handshake.
    assert!(Handshake::client_with_token("rgt1.nope", NC).is_err());
    // A client-token without claims, or with too many, is malformed.
    for claims_len in [0, auth::MAX_TOKEN_CLAIMS + 1] {
        let mut b = MAGIC.to_vec();
        b.extend([AUTH_VERSION, 5]);
        b.extend(vec![0u8; claims_len]);
        b.extend(NC);
        let (error, _) = failed(Handshake::server(&secret(), NS).receive(&b));
        assert!(matches!(error, AuthError::Malformed { .. }), "{error:?}");
    }
}

#[test]
fn handshake_yields_matching_keys_and_frames_round_trip_both_ways() {
    let (mut client, mut server) = handshake(&secret(), &secret());
    assert!(client.is_sealed() && server.is_sealed());
    assert_eq!(client.sealer.key_id(), server.opener.key_id(), "client→server key agrees");
    assert_eq!(server.sealer.key_id(), client.opener.key_id(), "server→client key agrees");
    assert_ne!(client.sealer.key_id(), client.opener.key_id(), "each direction has its own key");

    for i in 0..5 {
        let f = client.sealer.seal(&heartbeat(i));
        assert_eq!(f.len(), codec::encode(&heartbeat(i)).len() + TAG_LEN);
        assert_eq!(server.opener.open(body(&f), &cfg()), Ok(heartbeat(i)));
        let g = server.sealer.seal(&heartbeat(100 + i));
        assert_eq!(client.opener.open(body(&g), &cfg()), Ok(heartbeat(100 + i)));
    }
    assert_eq!(client.sealer.next_seq(), 5);
    assert_eq!(server.opener.next_seq(), 5);
}

#[test]
fn keys_differ_per_connection() {
    let (a, _) = handshake(&secret(), &secret());
    let (mut c, nonce) = Handshake::client(&secret(), [0x33; 32]);
    let mut s = Handshake::server(&secret(), NS);
    let challenge = send(s.receive(body(&nonce)));
    let (_, b) = established(c.receive(body(&challenge)));
    assert_ne!(a.sealer.key_id(), b.sealer.key_id());
}

#[test]
fn runtime_flow_over_frame_readers_with_a_pipelined_first_frame() {
    // The client sends its proof and its sealed Hello in one write; the
    // server's reader holds the Hello while the handshake finishes.
    let (mut c, nonce) = Handshake::client(&secret(), NC);
    let mut s = Handshake::server(&secret(), NS);
    let mut at_server = FrameReader::new(HANDSHAKE_MAX_BODY);
    let mut at_client = FrameReader::new(HANDSHAKE_MAX_BODY);

    for b in &nonce {
        at_server.feed(&[*b]).unwrap();
    }
    let challenge = send(s.receive(at_server.next_body().unwrap().unwrap()));
    assert_eq!(at_server.next_body().unwrap(), None);

    at_client.feed(&challenge).unwrap();
    let (proof, mut client) = established(c.receive(at_client.next_body().unwrap().unwrap()));
    at_client.set_max_body(client.opener.max_body(DEFAULT_MAX_FRAME));

    let mut wire = proof.unwrap();
    wire.extend(client.sealer.seal(&hello()));
    at_server.feed(&wire).unwrap();
    let (_, mut server) = established(s.receive(at_server.next_body().unwrap().unwrap()));
    at_server.set_max_body(server.opener.max_body(DEFAULT_MAX_FRAME));
    let got = server.opener.open(at_server.next_body().unwrap().unwrap(), &cfg());
    assert_eq!(got, Ok(hello()));
    assert_eq!(at_server.buffered(), 0);

    at_client.feed(&server.sealer.seal(&heartbeat(7))).unwrap();
    let got = client.opener.open(at_client.next_body().unwrap().unwrap(), &cfg());
    assert_eq!(got, Ok(heartbeat(7)));
}

#[test]
fn wrong_secret_fails_on_both_sides_with_wrong_secret() {
    let (mut c, nonce) = Handshake::client(&other_secret(), NC);
    let mut s = Handshake::server(&secret(), NS);
    let challenge = send(s.receive(body(&nonce)));
    // The client checks the server first and never sends a proof.
    let (error, refusal) = failed(c.receive(body(&challenge)));
    assert_eq!(error, AuthError::WrongSecret { reported_by_peer: false });
    assert!(error.to_string().contains("wrong cluster secret"), "{error}");
    assert_eq!(c.error(), Some(&error));
    // Its refusal makes the server name the same problem.
    let (error, reply) = failed(s.receive(body(&refusal.unwrap())));
    assert_eq!(error, AuthError::WrongSecret { reported_by_peer: true });
    assert!(error.to_string().contains("wrong cluster secret"), "{error}");
    assert!(reply.is_none(), "no refusal answers a refusal");
}

#[test]
fn server_detects_a_proof_under_another_secret() {
    // A client with another secret that got a challenge its secret verifies
    // (from a relay that knows that other secret) proves to the real server.
    let (mut c, nonce) = Handshake::client(&other_secret(), NC);
    let mut real = Handshake::server(&secret(), NS);
    let mut fake = Handshake::server(&other_secret(), NS);
    let _ = send(real.receive(body(&nonce)));
    let fake_challenge = send(fake.receive(body(&nonce)));
    let (proof, _) = established(c.receive(body(&fake_challenge)));
    let (error, refusal) = failed(real.receive(body(&proof.unwrap())));
    assert_eq!(error, AuthError::WrongSecret { reported_by_peer: false });
    assert!(error.to_string().contains("wrong cluster secret"));
    assert_eq!(body(&refusal.unwrap()), body(&auth::refusal_frame(RefusalReason::WrongSecret)));
}

#[test]
fn reflected_challenge_fails() {
    // The server's own challenge sent back to it.
    let (_, nonce) = Handshake::client(&secret(), NC);
    let mut s = Handshake::server(&secret(), NS);
    let challenge = send(s.receive(body(&nonce)));
    let (error, _) = failed(s.receive(body(&challenge)));
    assert_eq!(
        error,
        AuthError::UnexpectedMessage { expected: "client-proof", got: "server-challenge" }
    );

    // The server's challenge MAC offered as the client's proof.
    let mut s = Handshake::server(&secret(), NS);
    let challenge = send(s.receive(body(&nonce)));
    let mut proof = body(&challenge)[..6].to_vec();
    proof[5] = 3; // client-proof
    proof.extend_from_slice(&body(&challenge)[6 + 32..]);
    let (error, _) = failed(s.receive(&proof));
    assert_eq!(error, AuthError::WrongSecret { reported_by_peer: false });

    // The client's own nonce message sent back to it.
    let (mut c, nonce) = Handshake::client(&secret(), NC);
    let (error, _) = failed(c.receive(body(&nonce)));
    assert_eq!(
        error,
        AuthError::UnexpectedMessage { expected: "server-challenge", got: "client-nonce" }
    );
}

#[test]
fn reflected_nonce_fails_on_both_sides() {
    // A server that receives its own nonce as the client's.
    let (_, nonce) = Handshake::client(&secret(), NS);
    let mut s = Handshake::server(&secret(), NS);
    let (error, _) = failed(s.receive(body(&nonce)));
    assert_eq!(error, AuthError::ReflectedNonce);
    assert!(error.to_string().contains("reflected"));

    // A client whose nonce comes back as the server's (with a valid MAC from a
    // server that was fed the same nonce as its own).
    let (mut c, nonce) = Handshake::client(&secret(), NC);
    let mut other = Handshake::server(&secret(), NC);
    assert_eq!(failed(other.receive(body(&nonce))).0, AuthError::ReflectedNonce);
    let mut challenge = body(&Handshake::client(&secret(), NC).1).to_vec();
    challenge[5] = 2;
    challenge.extend_from_slice(&[0; 32]);
    assert_eq!(failed(c.receive(&challenge)).0, AuthError::ReflectedNonce);
}

fn sealed_pair() -> (Session, Session) {
    handshake(&secret(), &secret())
}

#[test]
fn tampered_frame_fails_with_bad_mac() {
    let (mut client, mut server) = sealed_pair();
    let f = client.sealer.seal(&heartbeat(1));
    for i in LEN_PREFIX..f.len() {
        let (_, mut s2) = sealed_pair();
        let mut g = f.clone();
        g[i] ^= 0x01;
        assert_eq!(
            s2.opener.open(body(&g), &cfg()),
            Err(FrameError::BadMac { seq: 0 }),
            "byte {i}"
        );
    }
    let mut g = f.clone();
    g[LEN_PREFIX] ^= 0x80;
    let err = server.opener.open(body(&g), &cfg()).unwrap_err();
    assert_eq!(err, FrameError::BadMac { seq: 0 });
    assert!(err.to_string().contains("MAC") && err.to_string().contains("sequence number 0"));
    // The opener stays failed, even for the genuine frame.
    assert_eq!(server.opener.open(body(&f), &cfg()), Err(FrameError::BadMac { seq: 0 }));
}

#[test]
fn replayed_frame_fails() {
    let (mut client, mut server) = sealed_pair();
    let f = client.sealer.seal(&heartbeat(1));
    assert_eq!(server.opener.open(body(&f), &cfg()), Ok(heartbeat(1)));
    assert_eq!(server.opener.open(body(&f), &cfg()), Err(FrameError::BadMac { seq: 1 }));
}

#[test]
fn reordered_frames_fail() {
    let (mut client, mut server) = sealed_pair();
    let first = client.sealer.seal(&heartbeat(1));
    let second = client.sealer.seal(&heartbeat(2));
    assert_eq!(server.opener.open(body(&second), &cfg()), Err(FrameError::BadMac { seq: 0 }));
    let (_, mut server2) = sealed_pair();
    assert_eq!(server2.opener.open(body(&first), &cfg()), Ok(heartbeat(1)));
    assert_eq!(server2.opener.open(body(&second), &cfg()), Ok(heartbeat(2)));
    // A dropped frame is detected too: the next one is checked at seq 1.
    let (mut c3, mut s3) = sealed_pair();
    let _dropped = c3.sealer.seal(&heartbeat(1));
    let after = c3.sealer.seal(&heartbeat(2));
    assert_eq!(s3.opener.open(body(&after), &cfg()), Err(FrameError::BadMac { seq: 0 }));
}

#[test]
fn reflected_frame_fails() {
    // A client's own frame sent back to it: the other direction's key.
    let (mut client, _) = sealed_pair();
    let f = client.sealer.seal(&heartbeat(1));
    assert_eq!(client.opener.open(body(&f), &cfg()), Err(FrameError::BadMac { seq: 0 }));
}

#[test]
fn truncated_tag_fails() {
    let (mut client, mut server) = sealed_pair();
    let f = client.sealer.seal(&heartbeat(1));
    // A body shorter than a tag.
    let short = &body(&f)[..TAG_LEN - 1];
    let err = server.opener.open(short, &cfg()).unwrap_err();
    assert_eq!(err, FrameError::Truncated { len: TAG_LEN - 1 });
    assert!(err.to_string().contains("truncated"), "{err}");
    // A tag cut short inside a longer body (length prefix adjusted).
    let (mut client, mut server) = sealed_pair();
    let f = client.sealer.seal(&hello());
    let cut = &body(&f)[..body(&f).len() - 4];
    assert_eq!(server.opener.open(cut, &cfg()), Err(FrameError::BadMac { seq: 0 }));
    // An empty body.
    let (_, mut server) = sealed_pair();
    assert_eq!(server.opener.open(&[], &cfg()), Err(FrameError::Truncated { len: 0 }));
}

#[test]
fn frame_injected_without_the_key_fails() {
    let (mut client, mut server) = sealed_pair();
    assert_eq!(
        server.opener.open(body(&client.sealer.seal(&heartbeat(1))), &cfg()),
        Ok(heartbeat(1))
    );
    // A plain frame.
    let plain = codec::encode(&Message::Hello(Hello {
        version: PROTOCOL_VERSION,
        cluster: "prod".into(),
        role: Role::Master,
        node: "an intruder with a long enough name".into(),
    }));
    assert_eq!(server.opener.open(body(&plain), &cfg()), Err(FrameError::BadMac { seq: 1 }));
    // A plain frame shorter than a tag.
    let (_, mut server) = sealed_pair();
    let plain = codec::encode(&heartbeat(9));
    assert_eq!(server.opener.open(body(&plain), &cfg()), Err(FrameError::Truncated { len: 2 }));
    // A frame sealed under another connection's key, at the right seq.
    let (_, mut server) = sealed_pair();
    let (mut stranger, _) = handshake(&other_secret(), &other_secret());
    let forged = stranger.sealer.seal(&heartbeat(9));
    assert_eq!(server.opener.open(body(&forged), &cfg()), Err(FrameError::BadMac { seq: 0 }));
}

#[test]
fn authenticated_garbage_is_a_decode_error_after_the_mac() {
    // Only reachable by a peer holding the key: named as a decode error.
    let (_, mut server) = sealed_pair();
    let (mut client, _) = sealed_pair();
    let mut f = client.sealer.seal(&hello());
    // A tampered body is refused by the MAC before postcard sees it.
    f[LEN_PREFIX] = 0xee;
    assert_eq!(server.opener.open(body(&f), &cfg()), Err(FrameError::BadMac { seq: 0 }));
    // And cluster checks still apply to authenticated frames.
    let (mut client, mut server) = sealed_pair();
    let f = client.sealer.seal(&hello());
    let strict = DecoderConfig { max_frame: DEFAULT_MAX_FRAME, cluster: Some("dev".into()) };
    let err = server.opener.open(body(&f), &strict).unwrap_err();
    assert!(matches!(err, FrameError::Decode(DecodeError::WrongCluster { .. })), "{err:?}");
}

#[test]
fn plain_session_is_the_codec() {
    let mut plain = Session::plain();
    assert!(!plain.is_sealed());
    assert_eq!(plain.sealer.key_id(), None);
    let f = plain.sealer.seal(&hello());
    assert_eq!(f, codec::encode(&hello()));
    assert_eq!(plain.opener.open(body(&f), &cfg()), Ok(hello()));
    assert_eq!(plain.opener.max_body(1000), 1000);
}

#[test]
fn a_node_without_a_secret_meets_one_with_a_secret() {
    // Server with a secret, client without: the plain Hello is named.
    let mut s = Handshake::server(&secret(), NS);
    let (error, refusal) = failed(s.receive(body(&codec::encode(&hello()))));
    assert_eq!(error, AuthError::PeerHasNoSecret);
    assert!(error.to_string().contains("no cluster secret"), "{error}");
    let mut plain = FrameOpener::plain();
    let err = plain.open(body(&refusal.unwrap()), &cfg()).unwrap_err();
    assert_eq!(err, FrameError::PeerRequiresSecret);
    assert!(err.to_string().contains("requires a cluster secret"), "{err}");

    // Also when the plain Hello is of another protocol version.
    let mut s = Handshake::server(&secret(), NS);
    let old = Message::Hello(Hello {
        version: PROTOCOL_VERSION + 1,
        cluster: "prod".into(),
        role: Role::Worker,
        node: "w1".into(),
    });
    assert_eq!(failed(s.receive(body(&codec::encode(&old)))).0, AuthError::PeerHasNoSecret);

    // Client with a secret, server without: the server names it and refuses.
    let (mut c, nonce) = Handshake::client(&secret(), NC);
    let mut plain = FrameOpener::plain();
    assert_eq!(plain.open(body(&nonce), &cfg()), Err(FrameError::PeerRequiresSecret));
    assert!(auth::is_handshake_body(body(&nonce)));
    let refusal = auth::refusal_frame(RefusalReason::NoSecret);
    let (error, reply) = failed(c.receive(body(&refusal)));
    assert_eq!(error, AuthError::PeerHasNoSecret);
    assert!(reply.is_none());
}

#[test]
fn plain_frames_never_look_like_handshake_messages() {
    // The magic's first byte cannot start a postcard message.
    let frame = auth::refusal_frame(RefusalReason::Protocol);
    assert!(codec::decode_body(body(&frame), &cfg()).is_err());
    assert!(!auth::is_handshake_body(body(&codec::encode(&hello()))));
    assert!(!auth::is_handshake_body(body(&codec::encode(&heartbeat(u64::MAX)))));
}

#[test]
fn another_version_is_named() {
    let (_, nonce) = Handshake::client(&secret(), NC);
    let mut v2 = body(&nonce).to_vec();
    v2[MAGIC.len()] = 2;
    let mut s = Handshake::server(&secret(), NS);
    let (error, refusal) = failed(s.receive(&v2));
    assert_eq!(error, AuthError::UnsupportedVersion { got: 2, supported: AUTH_VERSION });
    assert!(error.to_string().contains("version 2"), "{error}");
    assert_eq!(refusal.unwrap(), auth::refusal_frame(RefusalReason::UnsupportedVersion));
    // Another kind of refusal is passed on by name.
    let (mut c, _) = Handshake::client(&secret(), NC);
    let refusal = auth::refusal_frame(RefusalReason::UnsupportedVersion);
    let (error, _) = failed(c.receive(body(&refusal)));
    assert_eq!(error, AuthError::Refused { reason: RefusalReason::UnsupportedVersion });
    assert!(error.to_string().contains("unsupported handshake version"), "{error}");
}

#[test]
fn malformed_messages_are_named() {
    let (_, nonce) = Handshake::client(&secret(), NC);
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (body(&nonce)[..20].to_vec(), "carries 32 bytes after the header, got 14"),
        ([body(&nonce), &[0]].concat(), "got 33"),
        (
            {
                let mut b = body(&nonce).to_vec();
                b[5] = 9;
                b
            },
            "unknown message kind 9",
        ),
        (vec![1, 2, 3], "no magic"),
        (vec![], "no magic"),
        (MAGIC.to_vec(), "no magic"),
    ];
    for (bytes, want) in cases {
        let mut s = Handshake::server(&secret(), NS);
        let (error, refusal) = failed(s.receive(&bytes));
        assert!(matches!(error, AuthError::Malformed { .. }), "{error:?}");
        assert!(error.to_string().contains(want), "{error} should contain {want:?}");
        assert_eq!(refusal.unwrap(), auth::refusal_frame(RefusalReason::Protocol));
    }
}

#[test]
fn a_failed_handshake_stays_failed() {
    let mut s = Handshake::server(&secret(), NS);
    let (error, _) = failed(s.receive(&[1, 2, 3]));
    let (_, nonce) = Handshake::client(&secret(), NC);
    let (again, frame) = failed(s.receive(body(&nonce)));
    assert_eq!(again, error);
    assert!(frame.is_none(), "a refusal is sent once");
    assert!(!s.is_established());
}

#[test]
fn frame_reader_refuses_an_oversized_prefix_before_buffering() {
    let mut r = FrameReader::new(HANDSHAKE_MAX_BODY);
    assert_eq!(r.feed(&[0, 0]), Ok(()));
    let err = r.feed(&[0x10, 0x01]).unwrap_err();
    assert_eq!(err, DecodeError::FrameTooLarge { len: 4097, max: HANDSHAKE_MAX_BODY });
    assert_eq!(r.buffered(), 0);
    assert_eq!(r.next_body(), Err(err));
    // A larger limit applies to the frames after the handshake.
    let (mut client, mut server) = sealed_pair();
    let big = Message::Hello(Hello {
        version: PROTOCOL_VERSION,
        cluster: "x".repeat(HANDSHAKE_MAX_BODY),
        role: Role::Client,
        node: "n".into(),
    });
    let sealed = client.sealer.seal(&big);
    let mut r = FrameReader::new(HANDSHAKE_MAX_BODY);
    r.feed(&auth::refusal_frame(RefusalReason::Protocol)).unwrap();
    r.feed(&sealed).unwrap();
    assert!(r.next_body().unwrap().is_some());
    let mut raised = FrameReader::new(HANDSHAKE_MAX_BODY);
    raised.feed(&sealed).unwrap_err();
    r.set_max_body(server.opener.max_body(DEFAULT_MAX_FRAME));
    let got = server.opener.open(r.next_body().unwrap().unwrap(), &cfg());
    assert_eq!(got, Ok(big));
}

#[test]
fn frame_reader_splits_bodies_fed_in_any_chunks() {
    let frames: Vec<Vec<u8>> = (0..50).map(|i| codec::encode(&heartbeat(i))).collect();
    let wire = frames.concat();
    for chunk in [1, 2, 3, 5, 7, 64, wire.len()] {
        let mut r = FrameReader::new(DEFAULT_MAX_FRAME);
        let mut got = Vec::new();
        for part in wire.chunks(chunk) {
            r.feed(part).unwrap();
            while let Some(b) = r.next_body().unwrap() {
                got.push(b.to_vec());
            }
        }
        let want: Vec<Vec<u8>> = frames.iter().map(|f| body(f).to_vec()).collect();
        assert_eq!(got, want, "chunks of {chunk}");
        assert_eq!(r.buffered(), 0);
    }
}

#[test]
fn secrets_are_checked_and_never_printed() {
    let err = Secret::new(*b"short").unwrap_err();
    assert!(err.to_string().contains("too short"), "{err}");
    let s = secret();
    let shown = format!("{s:?}");
    assert!(!shown.contains("golden"), "{shown}");
    let (hs, _) = Handshake::client(&s, NC);
    assert!(!format!("{hs:?}").contains("golden"));
    assert_eq!(hs.side(), Side::Client);
    let (c, _) = sealed_pair();
    assert!(!format!("{c:?}").is_empty());
}

/// Every state a handshake can be in when a body arrives.
fn states() -> Vec<Handshake> {
    let (client, nonce) = Handshake::client(&secret(), NC);
    let server = Handshake::server(&secret(), NS);
    let mut awaiting_proof = Handshake::server(&secret(), NS);
    let challenge = send(awaiting_proof.receive(body(&nonce)));
    let (mut done_client, _) = Handshake::client(&secret(), NC);
    let _ = established(done_client.receive(body(&challenge)));
    let mut failed_server = Handshake::server(&secret(), NS);
    let _ = failed(failed_server.receive(&[]));
    let (token_client, first) = Handshake::client_with_token(&token_of(&secret()), NC).unwrap();
    let mut awaiting_token_proof = Handshake::server(&secret(), NS);
    let _ = send(awaiting_token_proof.receive(body(&first)));
    vec![
        client,
        server,
        awaiting_proof,
        done_client,
        failed_server,
        token_client,
        awaiting_token_proof,
    ]
}

#[test]
fn arbitrary_bytes_never_panic_any_handshake_state() {
    fn prop(bytes: Vec<u8>) -> bool {
        for mut hs in states() {
            let _ = hs.receive(&bytes);
        }
        true
    }
    QuickCheck::new().tests(2_000).quickcheck(prop as fn(Vec<u8>) -> bool);

    // Also behind a valid header, so every kind's parser is reached.
    fn headed(version: bool, kind: u8, rest: Vec<u8>) -> bool {
        let mut b = MAGIC.to_vec();
        b.push(if version { AUTH_VERSION } else { 2 });
        b.push(kind % 7);
        b.extend(rest);
        for mut hs in states() {
            if let Step::Established { .. } = hs.receive(&b) {
                // Only a MAC under the secret establishes: random bytes don't.
                return false;
            }
        }
        true
    }
    QuickCheck::new().tests(2_000).quickcheck(headed as fn(bool, u8, Vec<u8>) -> bool);

    // Exact-length messages of each kind with random fields.
    #[derive(Clone, Debug)]
    struct Fields(Vec<u8>);
    impl Arbitrary for Fields {
        fn arbitrary(g: &mut Gen) -> Self {
            let kind = *g.choose(&[1u8, 2, 3, 4, 5]).unwrap();
            let n = match kind {
                1 | 3 => 32,
                2 => 64,
                5 => 32 + 1 + usize::arbitrary(g) % 200,
                _ => 1,
            };
            let mut b = MAGIC.to_vec();
            b.extend([AUTH_VERSION, kind]);
            b.extend((0..n).map(|_| u8::arbitrary(g)));
            Fields(b)
        }
    }
    fn exact(f: Fields) -> bool {
        states().into_iter().all(|mut hs| !matches!(hs.receive(&f.0), Step::Established { .. }))
    }
    QuickCheck::new().tests(2_000).quickcheck(exact as fn(Fields) -> bool);
}

#[test]
fn arbitrary_bytes_never_panic_the_opener_or_the_reader() {
    fn prop(bytes: Vec<u8>, cuts: Vec<usize>) -> bool {
        let (_, mut server) = sealed_pair();
        let mut plain = FrameOpener::plain();
        let _ = server.opener.open(&bytes, &cfg());
        let _ = plain.open(&bytes, &cfg());
        let mut r = FrameReader::new(HANDSHAKE_MAX_BODY);
        let mut at = 0;
        for c in cuts.iter().chain([&bytes.len()]) {
            let end = (at + c % 17).min(bytes.len());
            if r.feed(&bytes[at..end]).is_err() {
                return true;
            }
            at = end;
            while let Ok(Some(b)) = r.next_body() {
                // A random body never opens under a key it wasn't sealed with.
                if server.opener.open(b, &cfg()).is_ok() {
                    return false;
                }
            }
        }
        true
    }
    QuickCheck::new().tests(2_000).quickcheck(prop as fn(Vec<u8>, Vec<usize>) -> bool);
}

#[test]
fn golden_frames_pin_the_handshake_format() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fixtures/wire");
    let bless = std::env::var_os("REGENT_BLESS").is_some();
    let (mut c, nonce) = Handshake::client(&secret(), NC);
    let mut s = Handshake::server(&secret(), NS);
    let challenge = send(s.receive(body(&nonce)));
    let (proof, mut client) = established(c.receive(body(&challenge)));
    let proof = proof.unwrap();
    let (_, mut server) = established(s.receive(body(&proof)));
    let sealed_hello = client.sealer.seal(&hello());
    let sealed_heartbeat = client.sealer.seal(&heartbeat(3));
    let (_, client_token) = Handshake::client_with_token(&token_of(&secret()), NC).unwrap();
    let mut s = Handshake::server(&secret(), NS);
    let token_challenge = send(s.receive(body(&client_token)));
    let samples: Vec<(&str, Vec<u8>)> = vec![
        ("auth_client_nonce", nonce),
        ("auth_server_challenge", challenge),
        ("auth_client_proof", proof),
        ("auth_refusal", auth::refusal_frame(RefusalReason::WrongSecret)),
        // These pin the key derivation and the frame MAC (seq 0 and 1).
        ("auth_sealed_hello", sealed_hello),
        ("auth_sealed_heartbeat", sealed_heartbeat),
        // The token handshake: claims ‖ nc, and the challenge keyed by the
        // token's proof key.
        ("auth_client_token", client_token),
        ("auth_token_challenge", token_challenge),
        ("auth_refusal_bad_token", auth::refusal_frame(RefusalReason::BadToken)),
    ];
    for (name, frame) in &samples {
        let path = dir.join(format!("{name}.bin"));
        if bless {
            std::fs::write(&path, frame).unwrap();
        }
        let golden = std::fs::read(&path).unwrap_or_else(|e| {
            panic!("{}: {e} (run with REGENT_BLESS=1 to create)", path.display())
        });
        assert_eq!(frame, &golden, "{name}: the encoding changed; that needs an AUTH_VERSION bump");
    }
    // The header layout, spelled out.
    assert_eq!(&samples[0].1[..LEN_PREFIX], &[0, 0, 0, 38]);
    assert_eq!(&samples[0].1[LEN_PREFIX..LEN_PREFIX + 6], &[0xff, b'R', b'G', b'A', 1, 1]);
    assert_eq!(&samples[1].1[..LEN_PREFIX + 6], &[0, 0, 0, 70, 0xff, b'R', b'G', b'A', 1, 2]);
    assert_eq!(&samples[2].1[..LEN_PREFIX + 6], &[0, 0, 0, 38, 0xff, b'R', b'G', b'A', 1, 3]);
    assert_eq!(samples[3].1, vec![0, 0, 0, 7, 0xff, b'R', b'G', b'A', 1, 4, 1]);
    assert_eq!(&samples[6].1[LEN_PREFIX..LEN_PREFIX + 6], &[0xff, b'R', b'G', b'A', 1, 5]);
    assert_eq!(&samples[6].1[samples[6].1.len() - 32..], &NC);
    assert_eq!(samples[8].1, vec![0, 0, 0, 7, 0xff, b'R', b'G', b'A', 1, 4, 6]);
    // The sealed goldens open.
    let mut r = FrameReader::new(HANDSHAKE_MAX_BODY);
    r.feed(&samples[4].1).unwrap();
    r.feed(&samples[5].1).unwrap();
    assert_eq!(server.opener.open(r.next_body().unwrap().unwrap(), &cfg()), Ok(hello()));
    assert_eq!(server.opener.open(r.next_body().unwrap().unwrap(), &cfg()), Ok(heartbeat(3)));
}

#[test]
fn sealing_an_encoded_frame_matches_sealing_the_message() {
    // Same handshake nonces: the two client sessions share their keys.
    let (mut a, _) = sealed_pair();
    let (mut b, mut server) = sealed_pair();
    for i in 0..4 {
        let msg = heartbeat(i);
        let mut frame = codec::encode(&msg);
        b.sealer.seal_frame(&mut frame);
        assert_eq!(frame, a.sealer.seal(&msg), "frame {i}");
        assert_eq!(server.opener.open(body(&frame), &cfg()), Ok(msg));
    }
    // Plain sessions leave the frame as it is.
    let mut plain = Session::plain();
    let mut frame = codec::encode(&hello());
    plain.sealer.seal_frame(&mut frame);
    assert_eq!(frame, codec::encode(&hello()));
}
