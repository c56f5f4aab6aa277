//! Connections: TCP, the optional cluster-secret handshake, and framing.
//!
//! Every connection runs as two small tasks (reader and writer) that turn
//! bytes into [`NetEvent`]s and [`Outbound`] messages into bytes. Nothing
//! here decides protocol: the handshake and the frame MACs are
//! `regent_core::auth`, the frames are `regent_core::codec`, and what a
//! message means is up to the machine the daemon drives.
//!
//! Every connection is bounded: a maximum frame size (checked before the
//! body is buffered), a handshake deadline and an idle deadline. Garbage, an
//! oversized frame, a wrong cluster or a wrong secret close that one
//! connection, with a log line naming the peer and the reason.

use async_channel::{Receiver, Sender};
// The runtime-independent parts are shared with the blocking runtime.
use regent_core::auth::{self, FrameReader, Handshake, Secret, Session, Side, Step};
use regent_core::codec::DecoderConfig;
use regent_core::protocol::Message;
use regent_core::ConnId;
pub use regent_std::net::{
    check_exposure, is_handshake_refusal, is_refusal, nonce, random_u64, NetConfig, NetEvent,
    Outbound, HANDSHAKE_REFUSED,
};
use smol::io::{AsyncReadExt, AsyncWriteExt};
use smol::net::TcpStream;
use std::sync::Arc;
use std::time::Duration;

/// The daemon's end of one connection.
#[derive(Clone, Debug)]
pub struct ConnHandle {
    /// The connection's number.
    pub conn: ConnId,
    /// The peer's address, for logs.
    pub peer: String,
    tx: Sender<Outbound>,
}

impl ConnHandle {
    /// Queues `msg` (dropped if the connection is gone).
    pub fn send(&self, msg: Message) {
        let _ = self.tx.try_send(Outbound::Message(msg));
    }

    /// Flushes and closes.
    pub fn close(&self) {
        let _ = self.tx.try_send(Outbound::Close);
    }
}

/// Starts the tasks of a connection over `stream`; `side` says who dialled.
pub fn spawn_connection(
    stream: TcpStream,
    side: Side,
    conn: ConnId,
    cfg: Arc<NetConfig>,
    events: Sender<NetEvent>,
) -> ConnHandle {
    let peer = stream.peer_addr().map(|a| a.to_string()).unwrap_or_else(|_| "?".into());
    let (tx, rx) = async_channel::unbounded();
    let handle = ConnHandle { conn, peer: peer.clone(), tx };
    smol::spawn(async move {
        let reason = match run(stream, side, conn, &cfg, &events, rx).await {
            Ok(()) => "closed".to_string(),
            Err(reason) => reason,
        };
        tracing::debug!(%peer, %conn, %reason, "connection ended");
        let _ = events.send(NetEvent::Closed { conn, reason }).await;
    })
    .detach();
    handle
}

async fn with_deadline<T>(
    d: Duration,
    what: &str,
    f: impl std::future::Future<Output = Result<T, String>>,
) -> Result<T, String> {
    smol::future::or(f, async {
        async_io::Timer::after(d).await;
        Err(format!("{what} timed out after {d:?}"))
    })
    .await
}

async fn read_some(stream: &mut TcpStream, buf: &mut [u8]) -> Result<usize, String> {
    match stream.read(buf).await {
        Ok(0) => Err("peer closed the connection".into()),
        Ok(n) => Ok(n),
        Err(e) => Err(format!("read failed: {e}")),
    }
}

async fn handshake(
    stream: &mut TcpStream,
    reader: &mut FrameReader,
    side: Side,
    secret: &Secret,
) -> Result<Session, String> {
    let mut hs = match side {
        Side::Client => {
            let (hs, frame) = Handshake::client(secret, nonce());
            stream.write_all(&frame).await.map_err(|e| format!("write failed: {e}"))?;
            hs
        }
        Side::Server => Handshake::server(secret, nonce()),
    };
    let mut buf = vec![0u8; 4096];
    loop {
        while let Some(body) = reader.next_body().map_err(|e| e.to_string())? {
            match hs.receive(body) {
                Step::Send(frame) => {
                    stream.write_all(&frame).await.map_err(|e| format!("write failed: {e}"))?
                }
                Step::Established { frame, session } => {
                    if let Some(frame) = frame {
                        stream.write_all(&frame).await.map_err(|e| format!("write failed: {e}"))?;
                    }
                    return Ok(session);
                }
                Step::Failed { error, frame } => {
                    if let Some(frame) = frame {
                        let _ = stream.write_all(&frame).await;
                    }
                    return Err(format!("{HANDSHAKE_REFUSED}: {error}"));
                }
            }
        }
        let n = read_some(stream, &mut buf).await?;
        reader.feed(&buf[..n]).map_err(|e| e.to_string())?;
    }
}

async fn run(
    stream: TcpStream,
    side: Side,
    conn: ConnId,
    cfg: &NetConfig,
    events: &Sender<NetEvent>,
    rx: Receiver<Outbound>,
) -> Result<(), String> {
    let mut rstream = stream.clone();
    let mut reader = FrameReader::new(match cfg.secret {
        Some(_) => auth::HANDSHAKE_MAX_BODY,
        None => cfg.max_frame,
    });
    let session = match &cfg.secret {
        None => Session::plain(),
        Some(secret) => {
            with_deadline(
                cfg.handshake_timeout,
                "handshake",
                handshake(&mut rstream, &mut reader, side, secret),
            )
            .await?
        }
    };
    reader.set_max_body(session.opener.max_body(cfg.max_frame));
    let Session { mut sealer, mut opener } = session;
    // The writer: seals in the order frames go on the wire.
    let mut wstream = stream;
    let writer = smol::spawn(async move {
        while let Ok(out) = rx.recv().await {
            match out {
                Outbound::Message(msg) => {
                    if wstream.write_all(&sealer.seal(&msg)).await.is_err() {
                        break;
                    }
                }
                Outbound::Close => break,
            }
        }
        let _ = wstream.flush().await;
        let _ = wstream.close().await;
    });
    let decoder = DecoderConfig { max_frame: cfg.max_frame, cluster: Some(cfg.cluster.clone()) };
    let mut buf = vec![0u8; 64 * 1024];
    let result = async {
        loop {
            while let Some(body) = reader.next_body().map_err(|e| e.to_string())? {
                let msg = opener.open(body, &decoder).map_err(|e| e.to_string())?;
                if events.send(NetEvent::Message { conn, msg }).await.is_err() {
                    return Ok(());
                }
            }
            let n = with_deadline(
                cfg.idle_timeout,
                "idle connection",
                read_some(&mut rstream, &mut buf),
            )
            .await?;
            reader.feed(&buf[..n]).map_err(|e| e.to_string())?;
        }
    };
    let result: Result<(), String> = smol::future::or(result, async {
        writer.await;
        Ok(())
    })
    .await;
    let _ = rstream.shutdown(std::net::Shutdown::Both);
    result
}

/// Why dialling a master failed.
#[derive(Debug)]
pub struct DialError {
    /// What went wrong, naming the address.
    pub reason: String,
    /// Every address it resolves to was refused by [`check_exposure`] (a
    /// configuration problem, not a transient one).
    pub refused: bool,
}

/// The runtime's one dialer (the async twin of regent-std's): resolves
/// `master` and connects to its addresses in turn within `timeout`. With
/// `strict`, one resolved address refused by [`check_exposure`] refuses the
/// master before a byte goes out (a subscriber's or an operator's rule);
/// otherwise refused addresses are skipped (a worker's rule).
pub async fn dial(
    master: &regent_core::Addr,
    has_secret: bool,
    insecure: bool,
    strict: bool,
    timeout: Duration,
) -> Result<TcpStream, DialError> {
    let attempt = async {
        let addrs = smol::net::resolve(master.as_str()).await.map_err(|e| DialError {
            reason: format!("cannot resolve {master}: {e}"),
            refused: false,
        })?;
        if strict {
            for a in &addrs {
                check_exposure(a, has_secret, insecure).map_err(|e| DialError {
                    reason: format!("master {master}: {e}"),
                    refused: true,
                })?;
            }
        }
        let mut err =
            DialError { reason: format!("{master} resolves to no address"), refused: false };
        let mut all_refused = !addrs.is_empty();
        for addr in addrs {
            if let Err(reason) = check_exposure(&addr, has_secret, insecure) {
                err.reason = reason;
                continue;
            }
            all_refused = false;
            match TcpStream::connect(addr).await {
                Ok(stream) => {
                    let _ = stream.set_nodelay(true);
                    return Ok(stream);
                }
                Err(e) => err.reason = format!("cannot connect to {addr}: {e}"),
            }
        }
        err.refused = all_refused;
        Err(err)
    };
    smol::future::or(attempt, async {
        async_io::Timer::after(timeout).await;
        Err(DialError {
            reason: format!("connecting to {master} timed out after {timeout:?}"),
            refused: false,
        })
    })
    .await
}
