//! A DASH-style video player, sans-IO: the client's buffer, playback and bitrate choice, and the
//! requests it sends to the server (the flow's TCP sender). docs/simulator.md, "Video".
//!
//! Segments are fetched one at a time: the next is requested when the previous one has fully
//! arrived and the buffer has room for it (buffer ≤ max_buffer − segment), else when playback has
//! drained it that far. A request reaches the server after the flow's one-way reverse delay;
//! only then does TCP get the segment's bytes, so every segment after the first costs a round
//! trip before its data flows (the first is asked for with the connection: the handshake is its
//! round trip). Bitrate: the highest rung at most `safety` × the harmonic mean of the last
//! `history` segments' download rates (size / (last byte's arrival − request sent)), the
//! lowest for the first segment. Playback starts once `startup` is buffered (the join time,
//! from the flow's start) and stalls whenever the buffer runs dry before the last segment has
//! arrived (the rebuffer time); it resumes with the next segment.

use crate::packet::MSS;
use ratekit_lab::scenario::AppConfig;
use ratekit_lab::summary::VideoSummary;
use std::collections::VecDeque;

pub struct Player {
    ladder_bps: Vec<u64>,
    segment_ns: u64,
    total: u32,
    startup_ns: u64,
    max_buffer_ns: u64,
    safety: f64,
    history: usize,
    /// Client → server: how long a request takes to reach the sender.
    request_delay_ns: u64,
    start_ns: u64,

    /// Server side: TCP segments handed to TCP, and the request on its way there (when it
    /// arrives, how many TCP segments it asks for).
    pub(crate) available: u32,
    pending: Option<(u64, u32)>,

    /// Client side. The segment in flight: its rung, the payload byte where it ends (all TCP
    /// segments are full, so it is a multiple of MSS), when its request left.
    rung: usize,
    end_byte: u64,
    requested_ns: u64,
    received: u32,
    /// Download rates (bit/s) of the last `history` segments.
    rates: VecDeque<f64>,
    /// Buffered playback time as of `clock_ns`.
    buffer_ns: u64,
    clock_ns: u64,
    join_ns: Option<u64>,
    rebuffer_ns: u64,
    stalls: u32,
    /// Whether the buffer ran dry before the last segment arrived (playback is waiting).
    stalled: bool,
    bitrate_sum: f64,
    rung_sum: u64,
}

impl Player {
    /// The player of a `video` app whose requests take `request_delay_ns` to reach the sender.
    pub fn new(cfg: &AppConfig, request_delay_ns: u64) -> Player {
        let AppConfig::Video { ladder, length, segment, startup, max_buffer, safety, history } = cfg else {
            unreachable!("a player is built for a video app")
        };
        Player {
            ladder_bps: ladder.iter().map(|r| r.bits_per_sec()).collect(),
            segment_ns: segment.0,
            total: (length.0 / segment.0) as u32,
            startup_ns: startup.unwrap_or(*segment).0,
            max_buffer_ns: max_buffer.0,
            safety: *safety,
            history: *history as usize,
            request_delay_ns,
            start_ns: 0,
            available: 0,
            pending: None,
            rung: 0,
            end_byte: 0,
            requested_ns: 0,
            received: 0,
            rates: VecDeque::new(),
            buffer_ns: 0,
            clock_ns: 0,
            join_ns: None,
            rebuffer_ns: 0,
            stalls: 0,
            stalled: false,
            bitrate_sum: 0.0,
            rung_sum: 0,
        }
    }

    /// The flow starts: its connection carries the first request, for the lowest rung.
    pub fn start(&mut self, now: u64) {
        self.start_ns = now;
        self.clock_ns = now;
        self.request(now, now, 0);
    }

    /// TCP segments of one video segment at `rung`.
    fn tcp_segments(&self, rung: usize) -> u32 {
        let bytes = (self.ladder_bps[rung] as u128 * self.segment_ns as u128).div_ceil(8_000_000_000);
        (bytes.div_ceil(MSS as u128) as u32).max(1)
    }

    /// The client sends the request for the next segment at `sent`; it reaches the server at `arrives`.
    fn request(&mut self, sent: u64, arrives: u64, rung: usize) {
        let n = self.tcp_segments(rung);
        self.rung = rung;
        self.end_byte += n as u64 * MSS as u64;
        self.requested_ns = sent;
        self.pending = Some((arrives, n));
    }

    /// When the pending request reaches the server.
    pub fn next_event(&self) -> Option<u64> {
        self.pending.map(|(t, _)| t)
    }

    /// The server side at `now`: a request that has arrived hands its segment to TCP.
    pub fn poll(&mut self, now: u64) {
        if let Some((_, n)) = self.pending.filter(|&(t, _)| t <= now) {
            self.available = self.available.saturating_add(n);
            self.pending = None;
        }
    }

    /// Playback from `clock_ns` to `now`: the buffer drains while playing; running dry before the
    /// last segment has arrived is a stall until the next segment arrives.
    fn play_until(&mut self, now: u64) {
        let elapsed = now.saturating_sub(self.clock_ns);
        self.clock_ns = self.clock_ns.max(now);
        if self.join_ns.is_none() {
            return;
        }
        if elapsed <= self.buffer_ns {
            self.buffer_ns -= elapsed;
            return;
        }
        let dry = elapsed - self.buffer_ns;
        self.buffer_ns = 0;
        if self.received < self.total {
            if !self.stalled {
                self.stalls += 1;
            }
            self.stalled = true;
            self.rebuffer_ns += dry;
        }
    }

    /// The client has `delivered` payload bytes in order at `now`. When that completes the
    /// segment in flight, the buffer grows, playback may start or resume, and the next request
    /// is sent (now or once the buffer has room); returns when it reaches the server, where the
    /// sender must then be woken.
    pub fn on_delivered(&mut self, now: u64, delivered: u64) -> Option<u64> {
        if self.received >= self.total || delivered < self.end_byte {
            return None;
        }
        self.play_until(now);
        self.received += 1;
        self.buffer_ns += self.segment_ns;
        self.stalled = false;
        let bits = self.tcp_segments(self.rung) as f64 * MSS as f64 * 8.0;
        self.rates.push_back(bits / ((now - self.requested_ns).max(1) as f64 * 1e-9));
        if self.rates.len() > self.history {
            self.rates.pop_front();
        }
        self.bitrate_sum += self.ladder_bps[self.rung] as f64;
        self.rung_sum += self.rung as u64;
        if self.join_ns.is_none() && (self.buffer_ns >= self.startup_ns || self.received == self.total) {
            self.join_ns = Some(now);
        }
        if self.received == self.total {
            return None;
        }
        // Before joining the buffer is below startup ≤ max_buffer − segment: no wait.
        let room_at = self.buffer_ns.saturating_sub(self.max_buffer_ns - self.segment_ns);
        let sent = now + room_at;
        self.request(sent, sent + self.request_delay_ns, self.choose());
        self.next_event()
    }

    /// The throughput rule: the highest rung at most safety × the harmonic mean of the recent
    /// download rates.
    fn choose(&self) -> usize {
        let harmonic = self.rates.len() as f64 / self.rates.iter().map(|r| 1.0 / r).sum::<f64>();
        let budget = self.safety * harmonic;
        self.ladder_bps.iter().rposition(|&b| b as f64 <= budget).unwrap_or(0)
    }

    /// The session as of `end_ns` (the run's end): a stall still going on counts up to it.
    pub fn summary(&self, end_ns: u64) -> VideoSummary {
        let mut at_end = self.clone_state();
        at_end.play_until(end_ns);
        let n = self.received.max(1) as f64;
        VideoSummary {
            join_s: self.join_ns.map(|t| (t - self.start_ns) as f64 * 1e-9),
            rebuffer_s: at_end.rebuffer_ns as f64 * 1e-9,
            stalls: at_end.stalls,
            mean_bitrate_bps: self.bitrate_sum / n,
            mean_rung: self.rung_sum as f64 / n,
            segments: self.received,
            of_segments: self.total,
        }
    }

    /// The playback state alone, to run it on to the end without touching the live player.
    fn clone_state(&self) -> Player {
        Player { ladder_bps: Vec::new(), rates: VecDeque::new(), ..*self }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ratekit_core::{Duration, Rate};

    const S: u64 = 1_000_000_000;
    const MS: u64 = 1_000_000;

    fn player(ladder_kbit: &[u64], segment_s: u64, length_s: u64, max_buffer_s: u64, delay_ns: u64) -> Player {
        let cfg = AppConfig::Video {
            ladder: ladder_kbit.iter().map(|k| Rate::from_bits_per_sec(k * 1000)).collect(),
            length: Duration(length_s * S),
            segment: Duration(segment_s * S),
            startup: None,
            max_buffer: Duration(max_buffer_s * S),
            safety: 0.9,
            history: 5,
        };
        cfg.validate().unwrap();
        Player::new(&cfg, delay_ns)
    }

    /// Streams through a fluid path: a request that reaches the server at t has its segment's
    /// bytes arrive at t + one-way delay + bytes / rate(t). Returns each segment's
    /// (arrival at the client, rung).
    fn stream(p: &mut Player, rate_bps: impl Fn(u64) -> f64, delay_ns: u64) -> Vec<(u64, usize)> {
        p.start(0);
        let (mut handed, mut delivered, mut out) = (0u32, 0u64, Vec::new());
        while let Some(t) = p.next_event() {
            p.poll(t);
            let bytes = (p.available - handed) as u64 * MSS as u64;
            handed = p.available;
            delivered += bytes;
            let arrival = t + delay_ns + (bytes as f64 * 8.0 / rate_bps(t) * 1e9) as u64;
            out.push((arrival, p.rung));
            p.on_delivered(arrival, delivered);
        }
        out
    }

    fn bytes_at(kbit: u64, segment_s: u64) -> f64 {
        ((kbit * 1000 * segment_s / 8) as f64 / MSS as f64).ceil() * MSS as f64
    }

    /// 10 Mbit/s, above the top rung: playback starts when the first (lowest) segment has
    /// arrived, the rule then climbs to the top rung (0.9 × ~9.6 Mbit/s ≥ 4 Mbit/s) and stays
    /// there, and a 2 s segment of 4 Mbit/s takes 0.8 s + a round trip: no stall.
    #[test]
    fn a_fast_path_joins_after_the_first_segment_and_never_stalls() {
        let d = 20 * MS;
        let mut p = player(&[1000, 2000, 4000], 2, 20, 60, d);
        let segs = stream(&mut p, |_| 10e6, d);
        let v = p.summary(60 * S);
        let join = d as f64 * 1e-9 + bytes_at(1000, 2) * 8.0 / 10e6;
        assert!((v.join_s.unwrap() - join).abs() < 1e-6, "join {:?}, expected {join}", v.join_s);
        assert_eq!((v.rebuffer_s, v.stalls, v.segments, v.of_segments), (0.0, 0, 10, 10));
        assert_eq!(segs.iter().map(|s| s.1).collect::<Vec<_>>(), [0, 2, 2, 2, 2, 2, 2, 2, 2, 2]);
        assert!((v.mean_rung - 1.8).abs() < 1e-12 && (v.mean_bitrate_bps - 3.7e6).abs() < 1e-6);
    }

    /// 500 kbit/s, below the lowest rung (1 Mbit/s): each 2 s segment takes 4 s + a round trip,
    /// so after the join every segment leaves the player waiting 2 s + 2·delay.
    #[test]
    fn a_path_slower_than_the_lowest_rung_stalls_on_every_segment() {
        let d = 20 * MS;
        let mut p = player(&[1000, 2000], 2, 20, 60, d);
        let segs = stream(&mut p, |_| 0.5e6, d);
        let v = p.summary(100 * S);
        assert!(segs.iter().all(|s| s.1 == 0));
        let per_segment = bytes_at(1000, 2) * 8.0 / 0.5e6 + 2.0 * d as f64 * 1e-9;
        assert_eq!(v.stalls, 9);
        assert!((v.rebuffer_s - 9.0 * (per_segment - 2.0)).abs() < 1e-6, "rebuffer {}", v.rebuffer_s);
    }

    /// The path falls from 10 to 1.5 Mbit/s at 5 s: the rule leaves the top rung and ends on the
    /// highest below 0.9 × 1.5 Mbit/s, once the fast segments have left its history.
    #[test]
    fn the_rule_steps_down_when_throughput_drops() {
        let d = 20 * MS;
        let mut p = player(&[500, 1000, 2000, 4000], 2, 60, 60, d);
        let segs = stream(&mut p, |t| if t < 5 * S { 10e6 } else { 1.5e6 }, d);
        let rungs: Vec<usize> = segs.iter().map(|s| s.1).collect();
        assert_eq!(rungs[1], 3, "{rungs:?}");
        assert!(rungs[rungs.len() - 10..].iter().all(|&r| r == 1), "{rungs:?}");
        assert!(rungs.windows(2).skip(1).all(|w| w[1] <= w[0]), "only down after the drop: {rungs:?}");
    }

    /// With the buffer full the next request waits until it has drained to max_buffer − segment,
    /// then takes the one-way delay to reach the server: requests settle one segment apart.
    #[test]
    fn a_full_buffer_paces_the_requests_and_each_costs_the_request_delay() {
        let d = 30 * MS;
        let mut p = player(&[1000], 2, 60, 10, d);
        p.start(0);
        assert_eq!(p.next_event(), Some(0), "the first request goes with the connection");
        p.poll(0);
        let first = p.available as u64 * MSS as u64;
        assert_eq!(p.on_delivered(S, first), Some(S + d), "a request with room reaches the server one delay later");
        let mut full = player(&[1000], 2, 60, 10, d);
        let segs = stream(&mut full, |_| 100e6, d);
        let gaps: Vec<u64> = segs.windows(2).map(|w| w[1].0 - w[0].0).collect();
        assert!(gaps[..3].iter().all(|&g| g < S / 10), "fills at line rate first: {gaps:?}");
        assert!(gaps[10..].iter().all(|&g| g.abs_diff(2 * S) < MS), "then one per segment: {gaps:?}");
        assert_eq!(full.summary(100 * S).stalls, 0);
    }

    /// A stall still going on at the run's end counts up to it; a session that never filled its
    /// startup buffer has no join time and no rebuffering.
    #[test]
    fn the_summary_counts_an_open_stall_and_a_missing_join() {
        let d = 10 * MS;
        let mut p = player(&[1000], 2, 20, 60, d);
        p.start(0);
        p.poll(0);
        let mut delivered = p.available as u64 * MSS as u64;
        p.on_delivered(S, delivered);
        let v = p.summary(10 * S);
        assert_eq!((v.join_s, v.stalls), (Some(1.0), 1));
        assert!((v.rebuffer_s - 7.0).abs() < 1e-9, "dry from 3 s to 10 s: {}", v.rebuffer_s);
        let next = p.next_event().unwrap();
        p.poll(next);
        delivered = p.available as u64 * MSS as u64;
        p.on_delivered(4 * S, delivered);
        assert!((p.summary(4 * S).rebuffer_s - 1.0).abs() < 1e-9, "the stall ended at 4 s");
        let mut idle = player(&[1000], 2, 20, 60, d);
        idle.start(0);
        let v = idle.summary(10 * S);
        assert_eq!((v.join_s, v.rebuffer_s, v.segments), (None, 0.0, 0));
    }
}
