//! The floor of the scale bench (docs/design.md#issue-24): what the same connection
//! count and the same request rate cost this machine with no protocol at
//! all.
//!
//! **Server** ([`serve`], run as a child process of the bench so its CPU and
//! RSS are its own): one level-triggered epoll instance, the listener and
//! every connection on it, each ready socket read once into one shared
//! buffer; every whole [`FRAME`]-byte request is answered with a
//! [`FRAME`]-byte reply in one write. No decoding, no state but a partial
//! count per connection.
//!
//! **Client** ([`drive`], in the bench process): N connections, each
//! sending one request per second at its own offset in the second (the
//! heartbeats of N workers), one epoll instance; the round trip of every
//! request is recorded.
//!
//! A heartbeat with a cluster secret is 40 bytes on the wire each way
//! (`WorkerHeartbeat` out, `HeartbeatAck` back, each with its MAC tag), so
//! the floor's frames are 40 bytes.

use rustix::event::epoll;
use std::io::{ErrorKind, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

/// Bytes of one request and of one reply.
pub const FRAME: usize = 40;

const LISTENER: u64 = u64::MAX;

fn wait(ep: &std::os::fd::OwnedFd, timeout: Option<Duration>) -> Vec<(u64, bool)> {
    let mut events = [std::mem::MaybeUninit::<epoll::Event>::uninit(); 1024];
    let ts = timeout.map(|d| rustix::time::Timespec {
        tv_sec: d.as_secs() as i64,
        tv_nsec: i64::from(d.subsec_nanos()),
    });
    match epoll::wait(ep, &mut events, ts.as_ref()) {
        Ok((ready, _)) => ready
            .iter()
            .map(|e| {
                // A copy: the event is packed.
                let (data, flags) = (e.data, e.flags);
                (data.u64(), flags.intersects(epoll::EventFlags::IN))
            })
            .collect(),
        Err(_) => Vec::new(),
    }
}

/// The floor server on `addr`, until killed.
pub fn serve(addr: &str) -> ! {
    let listener = TcpListener::bind(addr).expect("the floor binds");
    listener.set_nonblocking(true).unwrap();
    regent_std::net::widen_backlog(&listener).unwrap();
    let ep = epoll::create(epoll::CreateFlags::CLOEXEC).unwrap();
    epoll::add(&ep, &listener, epoll::EventData::new_u64(LISTENER), epoll::EventFlags::IN).unwrap();
    let mut conns: slab::Slab<(TcpStream, usize)> = slab::Slab::new();
    let mut buf = vec![0u8; 64 * 1024];
    let replies = vec![7u8; 64 * 1024];
    let mut events = [std::mem::MaybeUninit::<epoll::Event>::uninit(); 1024];
    loop {
        let Ok((ready, _)) = epoll::wait(&ep, &mut events, None) else { continue };
        for ev in ready.iter() {
            let key = ev.data.u64();
            if key == LISTENER {
                while let Ok((s, _)) = listener.accept() {
                    s.set_nonblocking(true).unwrap();
                    let _ = s.set_nodelay(true);
                    let k = conns.vacant_key();
                    epoll::add(&ep, &s, epoll::EventData::new_u64(k as u64), epoll::EventFlags::IN)
                        .unwrap();
                    conns.insert((s, 0));
                }
                continue;
            }
            let k = key as usize;
            let Some((s, partial)) = conns.get_mut(k) else { continue };
            match s.read(&mut buf) {
                Ok(0) => {}
                Ok(n) => {
                    let whole = (*partial + n) / FRAME;
                    *partial = (*partial + n) % FRAME;
                    let _ = s.write(&replies[..(whole * FRAME).min(replies.len())]);
                    continue;
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => continue,
                Err(_) => {}
            }
            let (s, _) = conns.remove(k);
            let _ = epoll::delete(&ep, &s);
        }
    }
}

/// What a floor run measured.
pub struct FloorRun {
    /// Requests answered over the measured seconds.
    pub answered: u64,
    /// Round-trip percentiles, ms.
    pub p50: f64,
    /// 99th percentile.
    pub p99: f64,
    /// The server's CPU over the measured seconds, % of one core.
    pub cpu: f64,
    /// The server's RSS per connection above its idle RSS, bytes.
    pub bytes_per_conn: f64,
}

/// Connects `n` clients to the floor server at `addr` (pid `pid`), each
/// sending once every `period` (N / `period` requests a second in all, as
/// N workers heartbeating at that interval), and runs them for `secs`
/// measured seconds after a warm-up round of one `period`.
pub fn drive(addr: &str, pid: u32, n: usize, secs: u64, period: Duration) -> FloorRun {
    let idle_rss = regent_std::host::rss_kb(pid).unwrap_or(0);
    let ep = epoll::create(epoll::CreateFlags::CLOEXEC).unwrap();
    let mut conns = Vec::with_capacity(n);
    for i in 0..n {
        // Many loopback source addresses, as `regent load` does: the
        // kernel's search for a free port from one address grows with the
        // connections already open.
        let src = std::net::Ipv4Addr::new(127, 1 + (i / 10_000) as u8, (i % 250) as u8, 1);
        let s = connect(src, addr);
        epoll::add(&ep, &s, epoll::EventData::new_u64(i as u64), epoll::EventFlags::IN).unwrap();
        conns.push((s, None::<Instant>, 0usize));
    }
    let request = [1u8; FRAME];
    let mut buf = vec![0u8; 64 * 1024];
    let start = Instant::now();
    let warm = start + period;
    let end = warm + Duration::from_secs(secs);
    let mut rtts: Vec<u32> = Vec::new();
    let mut cpu_at_warm = None;
    let mut next = 0usize; // the next connection to send, in order
    let mut round_start = start;
    loop {
        let now = Instant::now();
        if now >= end {
            break;
        }
        if cpu_at_warm.is_none() && now >= warm {
            cpu_at_warm = Some((regent_std::host::cpu_ticks(pid).unwrap_or(0), now));
        }
        // Connection i sends at i/n of every period.
        loop {
            if next == n {
                next = 0;
                round_start += period;
            }
            let due = round_start + period.mul_f64(next as f64 / n as f64);
            if due > now {
                break;
            }
            let c = &mut conns[next];
            if c.1.is_none() && c.0.write(&request).is_ok() {
                c.1 = Some(Instant::now());
            }
            next += 1;
        }
        for (key, _) in wait(&ep, Some(Duration::from_millis(1))) {
            let c = &mut conns[key as usize];
            if let Ok(got) = c.0.read(&mut buf) {
                c.2 += got;
                if c.2 >= FRAME {
                    c.2 -= FRAME;
                    if let Some(sent) = c.1.take() {
                        if Instant::now() >= warm {
                            rtts.push(sent.elapsed().as_micros() as u32);
                        }
                    }
                }
            }
        }
    }
    let (t0, at) = cpu_at_warm.unwrap_or((0, warm));
    let ticks = regent_std::host::cpu_ticks(pid).unwrap_or(0).saturating_sub(t0);
    let measured = at.elapsed().as_secs_f64();
    let rss = regent_std::host::rss_kb(pid).unwrap_or(0);
    rtts.sort_unstable();
    let pct = |p: f64| regent_smol::load::percentile(&rtts, p);
    FloorRun {
        answered: rtts.len() as u64,
        p50: pct(0.50),
        p99: pct(0.99),
        // Clock ticks are 1/100 s.
        cpu: ticks as f64 / measured,
        bytes_per_conn: (rss.saturating_sub(idle_rss) as f64 * 1024.0) / n as f64,
    }
}

fn connect(src: std::net::Ipv4Addr, addr: &str) -> TcpStream {
    let dst: std::net::SocketAddr = addr.parse().unwrap();
    let s = regent_std::net::connect_from(src.into(), dst).expect("connect to the floor");
    // Nonblocking connect: wait until it is established.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match s.peer_addr() {
            Ok(_) => break,
            Err(_) if Instant::now() < deadline => std::thread::sleep(Duration::from_micros(50)),
            Err(e) => panic!("the floor's connection never completed: {e}"),
        }
    }
    let _ = s.set_nodelay(true);
    s
}
