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
use regent_core::auth::{self, FrameReader, Handshake, Secret, Session, Side, Step};
use regent_core::codec::DecoderConfig;
use regent_core::protocol::Message;
use regent_core::ConnId;
use smol::io::{AsyncReadExt, AsyncWriteExt};
use smol::net::TcpStream;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

/// How connections behave.
#[derive(Debug)]
pub struct NetConfig {
    /// This node's cluster; a `Hello` naming another is refused.
    pub cluster: String,
    /// The cluster secret: when set, every connection authenticates and
    /// every frame carries a MAC.
    pub secret: Option<Secret>,
    /// The largest frame body accepted.
    pub max_frame: usize,
    /// How long the handshake (with a secret) may take.
    pub handshake_timeout: Duration,
    /// A connection silent this long is closed.
    pub idle_timeout: Duration,
}

impl NetConfig {
    /// Defaults: 1 MiB frames, 5 s handshake, 60 s idle.
    pub fn new(cluster: impl Into<String>, secret: Option<Secret>) -> Self {
        NetConfig {
            cluster: cluster.into(),
            secret,
            max_frame: regent_core::codec::DEFAULT_MAX_FRAME,
            handshake_timeout: Duration::from_secs(5),
            idle_timeout: Duration::from_secs(60),
        }
    }
}

/// What connections report to the daemon.
#[derive(Debug)]
pub enum NetEvent {
    /// A whole message arrived.
    Message {
        /// The connection.
        conn: ConnId,
        /// The message.
        msg: Message,
    },
    /// The connection is gone (closed by either side, or refused).
    Closed {
        /// The connection.
        conn: ConnId,
        /// Why, for the log.
        reason: String,
    },
}

/// What the daemon asks a connection to do.
#[derive(Debug)]
pub enum Outbound {
    /// Send a message.
    Message(Message),
    /// Flush what was sent before, then close.
    Close,
}

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

/// 32 bytes from OS entropy.
pub fn nonce() -> [u8; 32] {
    let mut n = [0u8; 32];
    getrandom::fill(&mut n).expect("the OS entropy source is available");
    n
}

/// A u64 from OS entropy (incarnations, instance ids, GUIDs).
pub fn random_u64() -> u64 {
    u64::from_le_bytes(nonce()[..8].try_into().expect("8 bytes"))
}

/// Refuses a non-loopback address without a secret unless `insecure`.
pub fn check_exposure(addr: &SocketAddr, has_secret: bool, insecure: bool) -> Result<(), String> {
    if addr.ip().is_loopback() || has_secret || insecure {
        Ok(())
    } else {
        Err(format!(
            "refusing {addr}: it is not a loopback address and no --secret-file is given \
             (anyone who can reach it could join the cluster); pass --secret-file, or \
             --insecure to accept the risk"
        ))
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
                    return Err(format!("handshake refused: {error}"));
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
