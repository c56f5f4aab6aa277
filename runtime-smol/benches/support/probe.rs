//! The heartbeat probe of the scale bench (docs/design.md#issue-24: "p99 round trip
//! measured by a generator that is not itself saturated").
//!
//! `regent load` simulates thousands of workers in one process, and the
//! round trips it reports include its own queueing. The probe is one more
//! worker on its own thread and its own blocking socket, speaking the wire
//! protocol directly (`Hello`, `RegisterWorker`, then `WorkerHeartbeat` and
//! its `HeartbeatAck`, one at a time): it sends a heartbeat every
//! `every`, waits for the acknowledgement and records the time between.
//! It does nothing else, so what it measures is the master's round trip
//! under the load the generator puts on it, plus one loopback write and
//! read each way. With a cluster secret it runs the secret's handshake
//! (`regent_core::auth::Handshake`) and seals its frames; with TLS it runs
//! under a rustls client stream, as a worker of the cluster does.

use regent_core::auth::{FrameReader, Handshake, Session, Step};
use regent_core::codec::{self, DecoderConfig};
use regent_core::protocol::{Hello, Message, RegisterWorker, Role, PROTOCOL_VERSION};
use regent_core::secret::Secret;
use regent_core::{Epoch, Incarnation, WorkerId};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// A running probe.
pub struct Probe {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<Result<Vec<(Instant, Duration)>, String>>,
}

/// What the probe's connection carries besides the frames.
#[derive(Clone, Default)]
pub struct Wire {
    /// The cluster secret: the handshake, then a MAC on every frame.
    pub secret: Option<Secret>,
    /// A rustls client configuration: every byte under TLS.
    pub tls: Option<Arc<rustls::ClientConfig>>,
}

/// A socket, or a TLS stream over one.
trait Stream: Read + Write + Send {}
impl<T: Read + Write + Send> Stream for T {}

/// One blocking worker connection: its stream, frame reader and session.
struct Conn {
    s: Box<dyn Stream>,
    reader: FrameReader,
    buf: Vec<u8>,
    session: Session,
}

impl Conn {
    fn send(&mut self, msg: &Message) -> Result<(), String> {
        let frame = self.session.sealer.seal(msg);
        self.write(&frame)
    }

    fn write(&mut self, bytes: &[u8]) -> Result<(), String> {
        self.s
            .write_all(bytes)
            .and_then(|()| self.s.flush())
            .map_err(|e| format!("probe write: {e}"))
    }

    /// The next frame body from the master, as received.
    fn next_body(&mut self) -> Result<Vec<u8>, String> {
        loop {
            if let Some(body) = self.reader.next_body().map_err(|e| format!("probe frame: {e}"))? {
                return Ok(body.to_vec());
            }
            let n = self.s.read(&mut self.buf).map_err(|e| format!("probe read: {e}"))?;
            if n == 0 {
                return Err("the master closed the probe's connection".into());
            }
            self.reader.feed(&self.buf[..n]).map_err(|e| format!("probe frame: {e}"))?;
        }
    }

    /// The next message from the master.
    fn next(&mut self) -> Result<Message, String> {
        let cfg = DecoderConfig { max_frame: codec::DEFAULT_MAX_FRAME, cluster: None };
        let body = self.next_body()?;
        self.session.opener.open(&body, &cfg).map_err(|e| format!("probe open: {e}"))
    }

    /// The cluster secret's handshake, as the dialling side.
    fn handshake(&mut self, secret: &Secret) -> Result<(), String> {
        let mut nonce = [0u8; regent_core::auth::NONCE_LEN];
        for chunk in nonce.chunks_mut(8) {
            chunk.copy_from_slice(&regent_std::net::random_u64().to_le_bytes());
        }
        let (mut hs, first) = Handshake::client(secret, nonce);
        self.write(&first)?;
        loop {
            let body = self.next_body()?;
            match hs.receive(&body) {
                Step::Send(frame) => self.write(&frame)?,
                Step::Established { frame, session } => {
                    if let Some(frame) = frame {
                        self.write(&frame)?;
                    }
                    self.session = session;
                    return Ok(());
                }
                Step::Failed { error, .. } => return Err(format!("probe handshake: {error}")),
            }
        }
    }
}

/// Registers a worker named `probe` at `addr` and heartbeats every `every`
/// until [`Probe::finish`].
pub fn start(addr: &str, cluster: &str, wire: Wire, every: Duration) -> Probe {
    let stop = Arc::new(AtomicBool::new(false));
    let (addr, cluster, flag) = (addr.to_owned(), cluster.to_owned(), stop.clone());
    let thread = std::thread::spawn(move || run(&addr, &cluster, &wire, every, &flag));
    Probe { stop, thread }
}

fn run(
    addr: &str,
    cluster: &str,
    wire: &Wire,
    every: Duration,
    stop: &AtomicBool,
) -> Result<Vec<(Instant, Duration)>, String> {
    let s = TcpStream::connect(addr).map_err(|e| format!("probe connect: {e}"))?;
    s.set_nodelay(true).map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(Duration::from_secs(10))).map_err(|e| e.to_string())?;
    let s: Box<dyn Stream> = match &wire.tls {
        None => Box::new(s),
        Some(config) => {
            let host = addr.rsplit_once(':').map_or(addr, |(h, _)| h);
            let name = regent_std::tls::server_name(host).map_err(|e| e.to_string())?;
            let tls = rustls::ClientConnection::new(config.clone(), name)
                .map_err(|e| format!("probe TLS: {e}"))?;
            Box::new(rustls::StreamOwned::new(tls, s))
        }
    };
    let mut c = Conn {
        s,
        reader: FrameReader::new(codec::DEFAULT_MAX_FRAME),
        buf: vec![0; 4096],
        session: Session::plain(),
    };
    if let Some(secret) = &wire.secret {
        c.handshake(secret)?;
    }
    let incarnation = Incarnation(1);
    c.send(&Message::Hello(Hello {
        version: PROTOCOL_VERSION,
        cluster: cluster.to_owned(),
        role: Role::Worker,
        node: "probe".into(),
    }))?;
    c.send(&Message::RegisterWorker(RegisterWorker {
        users: Default::default(),
        resources: Default::default(),
        host: Default::default(),
        ports: Default::default(),
        worker: WorkerId::new("probe"),
        incarnation,
        cores: 1,
        memory_mb: 1,
        executors: vec![],
        epoch_seen: Epoch(0),
        launch_seen: 0,
        attributes: vec![],
    }))?;
    loop {
        match c.next()? {
            Message::Registered { .. } => break,
            Message::Hello(_) | Message::HelloReply(_) => {}
            other => return Err(format!("the probe's registration answered with {other:?}")),
        }
    }
    let mut samples = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(every);
        let sent = Instant::now();
        c.send(&Message::WorkerHeartbeat { incarnation })?;
        // A `Registered` repeat (heartbeat load control) may come first.
        loop {
            match c.next()? {
                Message::HeartbeatAck { .. } => break,
                Message::Registered { .. } => {}
                other => return Err(format!("the probe's heartbeat answered with {other:?}")),
            }
        }
        samples.push((sent, sent.elapsed()));
    }
    Ok(samples)
}

impl Probe {
    /// Stops the probe; every (sent at, round trip) it recorded.
    pub fn finish(self) -> Result<Vec<(Instant, Duration)>, String> {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().map_err(|_| "the probe thread panicked".to_string())?
    }
}
