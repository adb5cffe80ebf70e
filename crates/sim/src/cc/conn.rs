//! What the sender and every model share: the connection state a model reads and changes, the
//! rate sample, and Linux's growth helpers the models build on. Apart from the dispatch in
//! mod.rs so that the models depend on it without depending back on the dispatch over them.

/// Linux's `icsk_ca_state`, reduced to the states the models distinguish.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum CaState {
    Open,
    Recovery,
    Loss,
}

/// What the sender exposes to its congestion control (a slice of Linux's `tcp_sock`).
#[derive(Debug, Clone, Copy)]
pub struct Conn {
    pub now_ns: u64,
    pub cwnd: u32,
    /// Segments acked towards the next additive increase (Linux's `snd_cwnd_cnt`).
    pub cwnd_cnt: u32,
    pub ssthresh: u32,
    pub snd_nxt: u32,
    pub snd_una: u32,
    pub in_flight: u32,
    pub cwnd_limited: bool,
    pub min_rtt_ns: u64,
    pub srtt_ns: u64,
    pub delivered: u64,
    pub lost: u64,
    pub ca_state: CaState,
    pub mss: u32,
    /// Earliest departure time of the next paced segment (Linux's `tcp_wstamp_ns`).
    pub edt_ns: u64,
    /// The sender paces under fq (Linux's `sk_pacing_status != SK_PACING_NONE`).
    pub fq_paced: bool,
    /// Linux's `sk_pacing_rate` in bytes/s as `tcp_update_pacing_rate` keeps it with or without
    /// fq; none before an RTT sample.
    pub sk_pacing_rate: Option<f64>,
    /// Linux's `tp->app_limited`: segments sent while it is non-zero carry app-limited rate
    /// samples, until more than this many segments are delivered.
    pub app_limited: u64,
}

impl Conn {
    /// A connection before anything was sent or measured: `cwnd` segments of `mss` bytes.
    pub fn new(cwnd: u32, mss: u32) -> Conn {
        Conn {
            now_ns: 0,
            cwnd,
            cwnd_cnt: 0,
            ssthresh: u32::MAX,
            snd_nxt: 0,
            snd_una: 0,
            in_flight: 0,
            cwnd_limited: false,
            min_rtt_ns: u64::MAX,
            srtt_ns: 0,
            delivered: 0,
            lost: 0,
            ca_state: CaState::Open,
            mss,
            edt_ns: 0,
            fq_paced: false,
            sk_pacing_rate: None,
            app_limited: 0,
        }
    }

    /// Marks what is sent from now on app-limited until the segments in flight are delivered
    /// (`tp->app_limited = (delivered + in_flight) ?: 1`, tcp_rate_check_app_limited).
    pub fn mark_app_limited(&mut self, in_flight: u32) {
        self.app_limited = (self.delivered + in_flight as u64).max(1);
    }
}

/// The largest GSO packet the testbed's veth takes (`gso_max_size`), in bytes.
pub const GSO_MAX_SIZE: f64 = 65536.0;

/// A delivery-rate sample (net/ipv4/tcp_rate.c), taken on every ACK.
#[derive(Debug, Clone, Copy, Default)]
pub struct RateSample {
    /// Segments delivered over `interval_ns`; negative when the sample is invalid.
    pub delivered: i64,
    pub interval_ns: i64,
    pub prior_delivered: u64,
    pub prior_in_flight: u32,
    pub acked_sacked: u32,
    pub losses: u32,
    pub is_app_limited: bool,
    pub rtt_ns: Option<u64>,
    /// The RTT of the latest-sent segment this ACK delivered (never retransmitted): what a
    /// sender whose receiver acknowledges every packet measures, as the user-space Copa and
    /// PCC Vivace do; `rtt_ns`, Linux's sample, times the oldest and so includes the wait of a
    /// delayed ACK for its second segment.
    pub latest_rtt_ns: Option<u64>,
}

/// `tcp_slow_start`: grow by the segments acked, up to ssthresh; returns the leftover.
pub fn slow_start(c: &mut Conn, acked: u32) -> u32 {
    let cwnd = c.cwnd.saturating_add(acked).min(c.ssthresh);
    let used = cwnd - c.cwnd;
    c.cwnd = cwnd;
    acked - used
}

/// `tcp_cong_avoid_ai`: one segment per `w` segments acked.
pub fn cong_avoid_ai(c: &mut Conn, w: u32, acked: u32) {
    let w = w.max(1);
    if c.cwnd_cnt >= w {
        c.cwnd_cnt = 0;
        c.cwnd += 1;
    }
    c.cwnd_cnt += acked;
    if c.cwnd_cnt >= w {
        let delta = c.cwnd_cnt / w;
        c.cwnd_cnt -= delta * w;
        c.cwnd += delta;
    }
}
