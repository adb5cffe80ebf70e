//! The built-in traffic generator and receiver. Senders run in the sender namespace, one thread
//! per flow, with the flow's congestion control set per socket (TCP_CONGESTION); the receiver
//! runs in the receiver namespace and counts each flow's payload bytes in fixed windows
//! (000 §6.1: goodput sampled every 250 ms at the receiver). Every connection starts with an
//! 8-byte header (magic, flow id) so the receiver knows whose bytes it counts; UDP datagrams
//! carry the same header.

use super::plan::Flow;
use super::tcp_counters::{bbr_model, socket_info, window_state, BbrSample, FlowTcpInfo};
use ratekit_lab::arrivals::draw;
use ratekit_lab::scenario::{seeding, AppConfig};
use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const MAGIC: u32 = 0x524b_5442; // "RKTB"
pub const TCP_PORT: u16 = 5001;
pub const UDP_PORT: u16 = 5002;
const IP_UDP_HEADERS: usize = 28;

/// The traffic generator's version, recorded in summary.json: 0, the flows' start jitter from a
/// stream of the testbed's own and the flow header sent as a segment of its own (an initial window
/// of a tiny segment and nine full ones); 2, the simulator's stream and the header in the first full
/// segment; 1 (3860b62 only), the simulator's stream with the header still alone; 3, as 2, with a
/// flow's delivered bytes and the sender's TCP counters taken at the run's end (up to 2, they also
/// held what the senders' buffers delivered in the 200 ms + 2 RTT drain after it).
pub const GENERATOR: u32 = 3;

/// Per-flow byte counts per window, filled by the receiver, and each TCP sender's congestion
/// window and smoothed RTT (and a BBR sender's model of the path) as the window closed, filled by
/// the sender (the simulator's flows.csv has the same, so a Linux flow and its model compare
/// window by window).
pub struct Recorder {
    pub t0: Instant,
    pub window: Duration,
    /// bytes[flow][window]
    pub bytes: Vec<Vec<AtomicU64>>,
    /// ns after t0 at which a finite flow's last byte arrived (0: not yet).
    pub done_ns: Vec<AtomicU64>,
    /// ns after t0 at which the flow's sender woke to open its socket.
    pub started_ns: Vec<AtomicU64>,
    /// Payload bytes read before `end`: a flow's goodput is over the run, as the simulator's is,
    /// not over the drain of its sender's buffer after the writes stop.
    pub delivered: Vec<AtomicU64>,
    pub end: Instant,
    /// samples[flow][window]: the sender's state as the window closed (only its own sender
    /// thread writes a flow's), default where it took none.
    pub samples: Vec<Mutex<Vec<WindowSample>>>,
}

/// A TCP sender's state as a window closed: TCP_INFO's cwnd (segments) and smoothed RTT (µs),
/// and a BBR sender's TCP_CC_INFO; each None where the reading failed or there is none.
#[derive(Debug, Clone, Copy, Default)]
pub struct WindowSample {
    pub cwnd_srtt_us: Option<(u32, u32)>,
    pub bbr: Option<BbrSample>,
}

impl Recorder {
    pub fn new(t0: Instant, end: Instant, window: Duration, flows: usize, windows: usize) -> Self {
        let counters = |n| (0..n).map(|_| AtomicU64::new(0)).collect::<Vec<_>>();
        Recorder {
            t0,
            end,
            window,
            bytes: (0..flows).map(|_| counters(windows)).collect(),
            done_ns: counters(flows),
            started_ns: counters(flows),
            delivered: counters(flows),
            samples: (0..flows).map(|_| Mutex::new(vec![WindowSample::default(); windows])).collect(),
        }
    }

    fn window_now(&self) -> usize {
        self.window_at(self.t0.elapsed())
    }

    fn window_at(&self, elapsed: Duration) -> usize {
        (elapsed.as_nanos() / self.window.as_nanos()) as usize
    }

    /// Keeps the socket's state as window `w - 1` closed, on the sender's first call in window
    /// `w` (the sender calls between writes, so it is at most one write timeout late); `last` is
    /// the window the sender last sampled in.
    fn sample(&self, flow: usize, sock: &TcpStream, last: &mut usize) {
        let w = self.window_now();
        if w == *last {
            return;
        }
        *last = w;
        let Some(closed) = w.checked_sub(1) else { return };
        let Some(mut samples) = self.samples.get(flow).and_then(|f| f.lock().ok()) else { return };
        if let Some(cell) = samples.get_mut(closed) {
            *cell = WindowSample { cwnd_srtt_us: window_state(sock).ok(), bbr: bbr_model(sock).ok().flatten() };
        }
    }

    /// One clock reading decides both, so the run's windows hold exactly its delivered bytes.
    fn add(&self, flow: usize, n: u64) {
        let elapsed = self.t0.elapsed();
        if let Some(cell) = self.bytes.get(flow).and_then(|f| f.get(self.window_at(elapsed))) {
            cell.fetch_add(n, Ordering::Relaxed);
        }
        if self.t0 + elapsed < self.end {
            if let Some(d) = self.delivered.get(flow) {
                d.fetch_add(n, Ordering::Relaxed);
            }
        }
    }
}

fn read_header(buf: &[u8]) -> Option<usize> {
    let magic = u32::from_be_bytes(buf.get(..4)?.try_into().ok()?);
    (magic == MAGIC).then(|| u32::from_be_bytes(buf[4..8].try_into().unwrap()) as usize)
}

fn header(flow: u32) -> [u8; 8] {
    let mut h = [0u8; 8];
    h[..4].copy_from_slice(&MAGIC.to_be_bytes());
    h[4..].copy_from_slice(&flow.to_be_bytes());
    h
}

/// The receiver side for one address: a TCP listener (one thread per connection) and a UDP
/// socket. Runs until `stop`. Must be called on a thread inside the receiver namespace.
pub fn receive(addr: Ipv4Addr, rec: Arc<Recorder>, stop: Arc<AtomicBool>, ready: std::sync::mpsc::Sender<std::io::Result<()>>) {
    let listener = match TcpListener::bind((addr, TCP_PORT)).and_then(|l| l.set_nonblocking(true).map(|_| l)) {
        Ok(l) => l,
        Err(e) => return drop(ready.send(Err(e))),
    };
    let udp = match UdpSocket::bind((addr, UDP_PORT)).and_then(|u| u.set_read_timeout(Some(Duration::from_millis(50))).map(|_| u)) {
        Ok(u) => u,
        Err(e) => return drop(ready.send(Err(e))),
    };
    let _ = ready.send(Ok(()));
    std::thread::scope(|s| {
        s.spawn(|| {
            let mut buf = vec![0u8; 65536];
            while !stop.load(Ordering::Relaxed) {
                if let Ok(n) = udp.recv(&mut buf) {
                    if let Some(flow) = read_header(&buf[..n]) {
                        rec.add(flow, (n - 8) as u64);
                    }
                }
            }
        });
        while !stop.load(Ordering::Relaxed) {
            match listener.accept() {
                Ok((conn, _)) => {
                    let (rec, stop) = (&rec, &stop);
                    s.spawn(move || serve(conn, rec, stop));
                }
                Err(_) => std::thread::sleep(Duration::from_millis(5)),
            }
        }
    });
}

fn serve(mut conn: TcpStream, rec: &Recorder, stop: &AtomicBool) {
    let _ = conn.set_nonblocking(false);
    let _ = conn.set_read_timeout(Some(Duration::from_millis(50)));
    let mut buf = vec![0u8; 1 << 16];
    let mut head = Vec::with_capacity(8);
    let mut flow: Option<usize> = None;
    while !stop.load(Ordering::Relaxed) {
        match conn.read(&mut buf) {
            Ok(0) => {
                if let Some(f) = flow {
                    let ns = rec.t0.elapsed().as_nanos() as u64;
                    rec.done_ns[f].store(ns.max(1), Ordering::Relaxed);
                }
                return;
            }
            Ok(n) => match flow {
                Some(f) => rec.add(f, n as u64),
                None => {
                    head.extend_from_slice(&buf[..n]);
                    if head.len() >= 8 {
                        match read_header(&head) {
                            Some(f) if f < rec.bytes.len() => {
                                flow = Some(f);
                                rec.add(f, (head.len() - 8) as u64);
                            }
                            _ => return,
                        }
                    }
                }
            },
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
            Err(_) => return,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SendError {
    #[error("flow {flow}: congestion control '{cc}' is not available in this kernel (available: {available})")]
    NoSuchCc { flow: u32, cc: String, available: String },
    #[error("flow {flow}: {what}: {source}")]
    Io { flow: u32, what: &'static str, source: std::io::Error },
}

fn set_cc(sock: &impl AsRawFd, flow: u32, cc: &str) -> Result<(), SendError> {
    let rc = unsafe {
        libc::setsockopt(sock.as_raw_fd(), libc::IPPROTO_TCP, libc::TCP_CONGESTION, cc.as_ptr().cast(), cc.len() as u32)
    };
    if rc != 0 {
        let available = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_available_congestion_control").unwrap_or_default();
        return Err(SendError::NoSuchCc { flow, cc: cc.into(), available: available.trim().into() });
    }
    Ok(())
}

/// Marks the flow's packets with its class as the DSCP (what `classify = "class"` reads).
fn set_dscp(sock: &impl AsRawFd, class: u8) -> std::io::Result<()> {
    let tos: libc::c_int = (class as libc::c_int) << 2;
    let rc = unsafe {
        libc::setsockopt(sock.as_raw_fd(), libc::IPPROTO_IP, libc::IP_TOS, (&tos as *const libc::c_int).cast(), 4)
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Bytes not yet acknowledged by the peer (SIOCOUTQ).
fn unacked(sock: &TcpStream) -> i32 {
    let mut n: libc::c_int = 0;
    unsafe { libc::ioctl(sock.as_raw_fd(), libc::TIOCOUTQ, &mut n) };
    n
}

fn sleep_until(t: Instant, stop: &AtomicBool) -> bool {
    while Instant::now() < t {
        if stop.load(Ordering::Relaxed) {
            return false;
        }
        std::thread::sleep((t - Instant::now()).min(Duration::from_millis(20)));
    }
    !stop.load(Ordering::Relaxed)
}

/// Runs one flow from `src` (its RTT class's address) in the sender namespace until its work is
/// done, `end`, or `stop`, starting at its offset from `rec.t0`; a TCP flow that connected returns
/// its socket's TCP_INFO.
pub fn send(
    flow: &Flow,
    src: Ipv4Addr,
    dst: Ipv4Addr,
    end: Instant,
    seed: u64,
    rec: &Recorder,
    stop: &AtomicBool,
) -> Result<Option<FlowTcpInfo>, SendError> {
    let io = |what: &'static str| move |source| SendError::Io { flow: flow.id, what, source };
    // The simulator's stream for this flow: the same seed starts it at the same offset in both.
    let mut rng = seeding::flow_rng(seed, flow.id);
    if !sleep_until(rec.t0 + Duration::from_nanos(seeding::start_ns(flow.start, flow.start_jitter, &mut rng)), stop) {
        return Ok(None);
    }
    rec.started_ns[flow.id as usize].store(rec.t0.elapsed().as_nanos() as u64, Ordering::Relaxed);
    if let AppConfig::Cbr { rate, packet } = &flow.app {
        let sock = UdpSocket::bind((src, 0)).map_err(io("udp bind"))?;
        set_dscp(&sock, flow.class).map_err(io("IP_TOS"))?;
        // `packet` is the IP datagram, as in the simulator: the rate counts IP bytes.
        let mut buf = vec![0u8; packet.0 as usize - IP_UDP_HEADERS];
        buf[..8].copy_from_slice(&header(flow.id));
        let gap = Duration::from_nanos(rate.time_to_send(packet.0).0);
        let mut next = Instant::now();
        while Instant::now() < end && !stop.load(Ordering::Relaxed) {
            let _ = sock.send_to(&buf, SocketAddr::from((dst, UDP_PORT)));
            next += gap;
            if next > Instant::now() {
                std::thread::sleep(next - Instant::now());
            }
        }
        return Ok(None);
    }
    let remaining = end.saturating_duration_since(Instant::now());
    // The congestion control is chosen before the SYN, as on a server whose default it is: set
    // after connecting, the socket first runs the namespace's default (BBR on this kind of
    // machine), whose init turns on the kernel's internal pacing, and switching to CUBIC or Reno
    // leaves it on (sk_pacing_status is never reset), so they would run paced.
    let sock = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, Some(socket2::Protocol::TCP))
        .map_err(io("socket"))?;
    set_cc(&sock, flow.id, flow.cc.as_str())?;
    set_dscp(&sock, flow.class).map_err(io("IP_TOS"))?;
    sock.bind(&SocketAddr::from((src, 0)).into()).map_err(io("bind"))?;
    sock.connect_timeout(&SocketAddr::from((dst, TCP_PORT)).into(), remaining.max(Duration::from_millis(1)))
        .map_err(io("connect"))?;
    // The receiver's 8-byte flow header rides in the first data segment (MSG_MORE holds it for the
    // first write): sent alone, it left as a segment of its own, so the initial window was a tiny
    // segment and nine full ones, which fill a queue by a segment less than a backlogged sender's ten.
    let sent = sock.send_with_flags(&header(flow.id), libc::MSG_MORE).map_err(io("write"))?;
    if sent != 8 {
        return Err(io("write")(std::io::Error::new(std::io::ErrorKind::WriteZero, "the flow header did not fit a fresh socket")));
    }
    let mut conn: TcpStream = sock.into();
    conn.set_write_timeout(Some(Duration::from_millis(50))).map_err(io("SO_SNDTIMEO"))?;
    let chunk = vec![0u8; 1 << 16];
    let mut sampled = usize::MAX;
    // Writes `n` bytes, stopping early at `end`; false if the run is over.
    let mut write = |conn: &mut TcpStream, mut n: u64| -> Result<bool, SendError> {
        while n > 0 {
            if Instant::now() >= end || stop.load(Ordering::Relaxed) {
                return Ok(false);
            }
            rec.sample(flow.id as usize, conn, &mut sampled);
            match conn.write(&chunk[..n.min(chunk.len() as u64) as usize]) {
                Ok(k) => n -= k as u64,
                Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
                Err(e) => return Err(io("write")(e)),
            }
        }
        Ok(true)
    };
    match &flow.app {
        AppConfig::Backlogged => while write(&mut conn, u64::MAX)? {},
        AppConfig::Finite { size } => {
            if write(&mut conn, size.0)? {
                let _ = conn.shutdown(std::net::Shutdown::Write);
                // Keep the socket open until the receiver has everything (or the run ends).
                let mut b = [0u8; 1];
                let _ = conn.set_read_timeout(Some(Duration::from_millis(50)));
                while Instant::now() < end && !stop.load(Ordering::Relaxed) && !matches!(conn.read(&mut b), Ok(0)) {}
            }
        }
        // Sizes and gaps drawn as the simulator draws them.
        AppConfig::OnOff { mean_size, mean_gap, size_dist, gap_dist, shape, .. } => loop {
            let size = draw(&mut rng, *size_dist, mean_size.0 as f64, *shape).ceil().max(1.0) as u64;
            if !write(&mut conn, size)? {
                break;
            }
            let mut acked = true;
            while acked && unacked(&conn) > 0 {
                acked = sleep_until(Instant::now() + Duration::from_millis(1), stop) && Instant::now() < end;
            }
            let gap = Duration::from_secs_f64(draw(&mut rng, *gap_dist, mean_gap.as_secs_f64(), *shape).min(1e6));
            if !acked || !sleep_until(Instant::now() + gap, stop) || Instant::now() >= end {
                break;
            }
        },
        // Each transfer written at its time, finished or not, as the simulator hands it to TCP.
        AppConfig::Periodic { size, period, count } => {
            let first = Instant::now();
            let period = Duration::from_secs_f64(period.as_secs_f64());
            for i in 0..*count {
                if !sleep_until(first + period * i, stop) || Instant::now() >= end || !write(&mut conn, size.0)? {
                    break;
                }
            }
            while unacked(&conn) > 0 && sleep_until(Instant::now() + Duration::from_millis(1), stop) && Instant::now() < end {}
        }
        AppConfig::Cbr { .. } | AppConfig::Lognormal { .. } | AppConfig::Video { .. } => {
            unreachable!("UDP sent above; lognormal and video refused by the plan")
        }
    }
    Ok(Some(socket_info(&conn, flow.id).map_err(io("TCP_INFO"))?))
}
