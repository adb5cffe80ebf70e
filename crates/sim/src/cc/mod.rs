//! Congestion control behind one small interface, shaped like Linux's `tcp_congestion_ops`
//! (net/ipv4/tcp_cong.c): `ssthresh` on loss, `cong_avoid` per ACK outside recovery,
//! `pkts_acked` with an RTT sample, `set_state`, and `cong_control` for algorithms that own
//! cwnd and pacing (BBR, and the user-space Copa and PCC Vivace, which ignore loss). The sender
//! (tcp/sender.rs) does loss recovery and PRR itself, as Linux does.

pub mod bbr;
pub mod conn;
pub mod copa;
pub mod cubic;
pub mod reno;
pub mod vegas;
pub mod vivace;
pub mod win_max;

pub use conn::{CaState, Conn, RateSample, GSO_MAX_SIZE};
use ratekit_lab::scenario::CcKind;

/// Enum dispatch over the models (a closed set; style.md practice 3).
pub enum Cc {
    Reno(reno::Reno),
    Cubic(cubic::Cubic),
    Bbr(Box<bbr::Bbr>),
    Vegas(vegas::Vegas),
    Copa(Box<copa::Copa>),
    Vivace(Box<vivace::Vivace>),
}

impl Cc {
    pub fn new(kind: CcKind, seed: u64) -> Cc {
        match kind {
            CcKind::Reno => Cc::Reno(reno::Reno),
            CcKind::Cubic => Cc::Cubic(cubic::Cubic::default()),
            CcKind::Bbr => Cc::Bbr(Box::new(bbr::Bbr::new(seed))),
            CcKind::Vegas => Cc::Vegas(vegas::Vegas::default()),
            CcKind::Copa => Cc::Copa(Box::new(copa::Copa::new())),
            CcKind::Vivace => Cc::Vivace(Box::new(vivace::Vivace::new(seed))),
        }
    }

    /// `tcp_init_congestion_control` once the handshake is done (BBR, Copa and Vivace start
    /// from its RTT).
    pub fn init(&mut self, c: &Conn) {
        match self {
            Cc::Bbr(x) => x.init(c),
            Cc::Copa(x) => x.init(c),
            Cc::Vivace(x) => x.init(c),
            _ => {}
        }
    }

    /// New ssthresh on entering recovery or loss (`ssthresh` op).
    pub fn ssthresh(&mut self, c: &Conn) -> u32 {
        match self {
            Cc::Reno(_) | Cc::Vegas(_) => reno::reno_ssthresh(c),
            Cc::Cubic(x) => x.ssthresh(c),
            Cc::Bbr(x) => x.ssthresh(c),
            Cc::Copa(_) | Cc::Vivace(_) => c.ssthresh,
        }
    }

    /// Per-ACK hook that owns cwnd and pacing (BBR, Copa, Vivace); returns false when the
    /// sender should run the classic path (PRR in recovery, else `cong_avoid`).
    pub fn cong_control(&mut self, c: &mut Conn, rs: &RateSample) -> bool {
        match self {
            Cc::Bbr(x) => x.cong_control(c, rs),
            Cc::Copa(x) => x.cong_control(c, rs),
            Cc::Vivace(x) => x.cong_control(c, rs),
            _ => return false,
        }
        true
    }

    pub fn cong_avoid(&mut self, c: &mut Conn, acked: u32) {
        match self {
            Cc::Reno(_) => reno::reno_cong_avoid(c, acked),
            Cc::Cubic(x) => x.cong_avoid(c, acked),
            Cc::Vegas(x) => x.cong_avoid(c, acked),
            Cc::Bbr(_) | Cc::Copa(_) | Cc::Vivace(_) => {}
        }
    }

    pub fn pkts_acked(&mut self, c: &mut Conn, rtt_ns: Option<u64>) {
        match self {
            Cc::Cubic(x) => x.pkts_acked(c, rtt_ns),
            Cc::Vegas(x) => x.pkts_acked(rtt_ns),
            _ => {}
        }
    }

    pub fn set_state(&mut self, c: &Conn, state: CaState) {
        match self {
            Cc::Cubic(x) => x.set_state(c, state),
            Cc::Bbr(x) => x.set_state(c, state),
            Cc::Vegas(x) => x.set_state(state),
            Cc::Reno(_) | Cc::Copa(_) | Cc::Vivace(_) => {}
        }
    }

    /// Pacing rate in bytes/s for models that pace (BBR, Copa, Vivace); the others send at
    /// line rate, as Linux does without the fq qdisc.
    pub fn pacing_rate(&self) -> Option<f64> {
        match self {
            Cc::Bbr(x) => Some(x.pacing_rate_bytes_per_sec()),
            Cc::Copa(x) => Some(x.pacing_rate_bytes_per_sec()),
            Cc::Vivace(x) => Some(x.pacing_rate_bytes_per_sec()),
            _ => None,
        }
    }

    /// How CUBIC's HyStart ended slow start (Linux's TCPHystart* counters); None for the others.
    pub fn hystart_exits(&self) -> Option<ratekit_lab::summary::HystartCounts> {
        match self {
            Cc::Cubic(x) => Some(x.hystart_exits()),
            _ => None,
        }
    }

    /// BBR's model of the path (TCP_CC_INFO); None for the other models.
    pub fn bbr_model(&self) -> Option<bbr::BbrModel> {
        match self {
            Cc::Bbr(x) => Some(x.model()),
            _ => None,
        }
    }

    /// `bbr_min_tso_segs`: the fewest segments a model that paces itself puts in one
    /// transmission at its pacing rate (BBR: single segments below 1.2 Mbit/s).
    pub fn min_tso_segs(&self) -> Option<u32> {
        match self {
            Cc::Bbr(x) => Some(if x.pacing_rate_bytes_per_sec() < 1.2e6 / 8.0 { 1 } else { 2 }),
            _ => None,
        }
    }

    /// The user-space transports (genericCC for Copa, PCC-Uspace for Vivace) run their own
    /// receiver, which acknowledges every packet at once: their RTT samples carry no delayed or
    /// compressed ACK's wait, which Vivace's RTT gradient would read as queueing.
    pub fn acks_each_packet(&self) -> bool {
        matches!(self, Cc::Copa(_) | Cc::Vivace(_))
    }

    /// Restart after idle (`CA_EVENT_TX_START`): `c.now_ns` is the restart, `idle_since_ns` the
    /// last transmission before it.
    pub fn on_tx_start(&mut self, c: &mut Conn, idle_since_ns: u64) {
        match self {
            Cc::Cubic(x) => x.on_tx_start(c.now_ns, idle_since_ns),
            Cc::Bbr(x) => x.on_tx_start(c),
            _ => {}
        }
    }
}
