//! The userspace middlebox: forwards Ethernet frames between two interfaces through a
//! `Pipeline` (loss, any core enforcer, delay), the netem this kernel lacks plus ratekit's
//! enforcers. One thread, poll(2) on both AF_PACKET sockets with the pipeline's next deadline
//! as the timeout; time is CLOCK_MONOTONIC.

use crate::afpacket::PacketSocket;
use crate::pipeline::{Dir, Pipeline, PipelineConfig, PipelineStats};
use ratekit_core::Instant;
use std::sync::atomic::{AtomicBool, Ordering};

pub fn monotonic_now() -> Instant {
    let mut ts: libc::timespec = unsafe { std::mem::zeroed() };
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    Instant(ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64)
}

#[derive(Debug, thiserror::Error)]
pub enum MiddleboxError {
    #[error("no network interface named '{0}'")]
    NoSuchInterface(String),
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("config: {0}")]
    Config(#[from] ratekit_core::ConfigError),
}

/// What a finished run saw.
#[derive(Debug, Clone, serde::Serialize)]
pub struct MiddleboxReport {
    pub seconds: f64,
    pub stats: PipelineStats,
    pub aggregates: Vec<(String, crate::pipeline::AggStats)>,
    /// Transmissions refused (a full or dropping qdisc behind the socket returns an error).
    pub send_errors: u64,
    /// Frames lost because a receive ring was full (in, out): the middlebox fell behind.
    pub ring_drops: [u64; 2],
}

/// Monotonic now, and how long ago the kernel received a frame it stamped `received_real_ns`
/// (CLOCK_REALTIME): at most a second (a clock step or a stamp from elsewhere counts as none).
fn read_now(received_real_ns: u64) -> (Instant, u64) {
    let mut ts: libc::timespec = unsafe { std::mem::zeroed() };
    unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts) };
    let real = ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64;
    let now = monotonic_now();
    let waited = real.checked_sub(received_real_ns).filter(|&w| w < 1_000_000_000).unwrap_or(0);
    (now, waited.min(now.0))
}

/// Makes the calling thread wake at its deadlines rather than when the scheduler gets to it. A
/// delay line released late sends what fell due meanwhile as one burst, which a small queue
/// behind it drops: measured on 4 CUBIC flows at 50 Mbit/s, 100 ms, behind a 15 kB htb queue
/// (2 cores), 71 and 188 frames per run released over 1 ms late at normal priority and 3-33 with
/// SCHED_FIFO (docs/testbed.md).
fn wake_on_time() -> std::io::Result<()> {
    let param = libc::sched_param { sched_priority: 10 };
    // Timer slack is what a thread that stays at normal priority can still save (50 µs by default).
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1u64, 0u64, 0u64, 0u64) };
    match unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) } {
        0 => Ok(()),
        _ => Err(std::io::Error::last_os_error()),
    }
}

/// Forwards between `in_if` and `out_if` until `stop` is set. Must run in the namespace that
/// holds both interfaces.
pub fn run(in_if: &str, out_if: &str, cfg: PipelineConfig, stop: &AtomicBool) -> Result<MiddleboxReport, MiddleboxError> {
    let idx = |name: &str| crate::tc::ifindex(name).map_err(|_| MiddleboxError::NoSuchInterface(name.into()));
    let (in_idx, out_idx) = (idx(in_if)?, idx(out_if)?);
    let mut pipeline = Pipeline::new(cfg)?;
    if let Err(e) = wake_on_time() {
        eprintln!("middlebox: no real-time priority ({e}): delay-line releases may be late under load");
    }
    let mut socks = [PacketSocket::open(in_idx)?, PacketSocket::open(out_idx)?];
    let start = monotonic_now();
    let mut send_errors = 0u64;
    while !stop.load(Ordering::Relaxed) {
        // Each frame's delay counts from when the kernel received it, not from when this thread
        // read it: a read after a stall stamped the frames that waited with one time and sent
        // them on as one burst (measured: 15 frames per run read over 1 ms late, the worst
        // 6.3 ms, in 4 CUBIC flows at 50 Mbit/s). A stamp from before the batch started would
        // release late frames early instead (TCP min_rtt 9.4 ms on a 10 ms path, 100 flows).
        for (i, dir) in [(0, Dir::Forward), (1, Dir::Reverse)] {
            socks[i].recv_batch(256, |f, received| {
                let (now, waited_ns) = read_now(received);
                pipeline.note_read_lag(waited_ns);
                pipeline.on_frame(Instant(now.0 - waited_ns), dir, f.to_vec())
            });
        }
        let now = monotonic_now();
        let [a, b] = &socks;
        pipeline.poll(now, |dir, frame| {
            let out = if dir == Dir::Forward { b } else { a };
            if out.send(frame).is_err() {
                send_errors += 1;
            }
        });
        // Sleep until a socket is readable, the next deadline (ns precision), or 50 ms (to notice `stop`).
        let wait_ns = match pipeline.next_deadline() {
            Some(t) => t.0.saturating_sub(monotonic_now().0).min(50_000_000),
            None => 50_000_000,
        };
        let mut fds = [
            libc::pollfd { fd: socks[0].raw_fd(), events: libc::POLLIN, revents: 0 },
            libc::pollfd { fd: socks[1].raw_fd(), events: libc::POLLIN, revents: 0 },
        ];
        if wait_ns > 0 {
            let ts = libc::timespec { tv_sec: (wait_ns / 1_000_000_000) as i64, tv_nsec: (wait_ns % 1_000_000_000) as i64 };
            unsafe { libc::ppoll(fds.as_mut_ptr(), 2, &ts, std::ptr::null()) };
        }
    }
    let mut ring_drops = [0u64; 2];
    for (d, s) in ring_drops.iter_mut().zip(&socks) {
        *d = s.ring_drops()?;
    }
    let aggregates = pipeline.aggregates().map(|(k, s)| (k.ip().to_string(), s.clone())).collect();
    Ok(MiddleboxReport {
        seconds: (monotonic_now() - start).as_secs_f64(),
        stats: pipeline.stats.clone(),
        aggregates,
        send_errors,
        ring_drops,
    })
}

#[cfg(test)]
mod tests {
    use super::read_now;

    fn real_now_ns() -> u64 {
        let d = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap();
        d.as_nanos() as u64
    }

    #[test]
    fn a_frame_counts_from_its_kernel_stamp_unless_the_stamp_is_implausible() {
        let (_, waited) = read_now(real_now_ns() - 3_000_000);
        assert!((3_000_000..53_000_000).contains(&waited), "{waited}");
        assert_eq!(read_now(real_now_ns() + 5_000_000_000).1, 0, "a stamp from the future counts as none");
        assert_eq!(read_now(real_now_ns() - 2_000_000_000).1, 0, "nor one from seconds ago (a clock step)");
    }
}
