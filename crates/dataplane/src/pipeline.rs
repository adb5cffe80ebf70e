//! The middlebox's packet path without the sockets (so it is tested with virtual time): random
//! loss, then the enforcer (any ratekit-core enforcer, one instance per aggregate), then a
//! delay line, in the forward direction; delay only in the reverse direction (ACKs).
//! Hosts on the input side may have delays of their own (`host_delays`), as clients at
//! different distances do: a host's frames wait its delay in both directions (forward by
//! source address, reverse by destination), so its RTT is twice that whatever the others'.
//!
//! Queueing enforcers hold packets; each aggregate drains its enforcer onto its own link of
//! `link_rate` (as in `ratekit sim`), or whenever the enforcer releases a packet if no link rate
//! is set (shapers pace themselves). Memory is bounded: held and delayed bytes have caps, and
//! beyond `max_aggregates` new aggregates pass unpoliced (counted).

use crate::maps::{AggKey, Settings};
use crate::packet::parse;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use ratekit_core::{Duration, EnforcerConfig, Instant, Rate};
use ratekit_lab::driver::{AggregateDriver, Decision, DriverFactory, Outcome};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::net::IpAddr;

/// Forward (in → out, enforced) and reverse (out → in, delay only).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dir {
    Forward = 0,
    Reverse = 1,
}

#[derive(Debug, Clone)]
pub struct PipelineConfig {
    pub enforcer: Option<EnforcerConfig>,
    pub settings: Settings,
    /// One-way delay added in each direction.
    pub delay: Duration,
    /// One-way delays in place of `delay` for hosts on the input side.
    pub host_delays: Vec<(IpAddr, Duration)>,
    /// Bernoulli loss probability in the forward direction (before the enforcer).
    pub loss: f64,
    pub seed: u64,
    /// Rate of each aggregate's link behind a queueing enforcer (`None`: no link limit).
    pub link_rate: Option<Rate>,
    pub max_aggregates: usize,
    /// Caps on bytes held by queueing enforcers and in the delay lines (each).
    pub max_held_bytes: u64,
    pub max_delayed_bytes: u64,
}

impl Default for PipelineConfig {
    fn default() -> Self {
        PipelineConfig {
            enforcer: None,
            settings: Settings { match_dst: 1, prefix4: 32, prefix6: 128, test_clock: 0 },
            delay: Duration::ZERO,
            host_delays: Vec::new(),
            loss: 0.0,
            seed: 1,
            link_rate: None,
            max_aggregates: 65536,
            max_held_bytes: 64 << 20,
            max_delayed_bytes: 256 << 20,
        }
    }
}

#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct AggStats {
    pub arrivals: u64,
    pub arrival_bytes: u64,
    pub passed_packets: u64,
    pub passed_bytes: u64,
    pub dropped_packets: u64,
    pub dropped_bytes: u64,
    pub drops_by_reason: BTreeMap<&'static str, u64>,
}

#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct PipelineStats {
    pub received: [u64; 2],
    pub sent: [u64; 2],
    pub random_losses: u64,
    /// Packets dropped because a memory cap was reached.
    pub overflow_drops: u64,
    /// Packets of aggregates beyond `max_aggregates`, passed unpoliced.
    pub untracked: u64,
    /// Non-IP frames (ARP, ...), forwarded untouched.
    pub non_ip: u64,
    /// Frames the delay lines released more than 250 µs and more than 1 ms after they were due,
    /// and the worst lateness (µs): a late wake-up releases what fell due meanwhile as one
    /// burst, which a small queue behind the middlebox would drop and the emulated path never had.
    pub late_frames: [u64; 2],
    pub max_late_us: u64,
    /// Frames read from the receive rings more than 250 µs and 1 ms after the kernel received
    /// them, and the worst wait (µs): the delay lines count from reception, so these measure the
    /// middlebox's stalls, not bursts it made.
    pub late_reads: [u64; 2],
    pub max_read_lag_us: u64,
}

struct Agg {
    driver: AggregateDriver,
    arrival_bytes: u64,
}

impl Agg {
    /// The driver's accounting in the middlebox report's form.
    fn stats(&self) -> AggStats {
        let s = self.driver.stats();
        AggStats {
            arrivals: s.enqueued.packets,
            arrival_bytes: self.arrival_bytes,
            passed_packets: s.dequeued.packets,
            passed_bytes: s.dequeued.bytes,
            dropped_packets: s.dropped.packets,
            dropped_bytes: s.dropped.bytes,
            drops_by_reason: s.drops_named(),
        }
    }
}

/// Counts a wait of `late_ns` into `over` (over 250 µs, over 1 ms) and `max_us`.
fn tally_lateness(over: &mut [u64; 2], max_us: &mut u64, late_ns: u64) {
    let us = late_ns / 1_000;
    over[0] += (us > 250) as u64;
    over[1] += (us > 1_000) as u64;
    *max_us = (*max_us).max(us);
}

/// Frames waiting one fixed delay, in each direction: every frame waits as long, so each
/// direction is a FIFO ordered by due time.
struct DelayLine {
    delay: Duration,
    frames: [VecDeque<(Instant, Vec<u8>)>; 2],
}

impl DelayLine {
    fn new(delay: Duration) -> Self {
        DelayLine { delay, frames: [VecDeque::new(), VecDeque::new()] }
    }
}

pub struct Pipeline {
    cfg: PipelineConfig,
    rng: ChaCha8Rng,
    factory: Option<DriverFactory>,
    aggs: HashMap<AggKey, Agg>,
    held: HashMap<u64, Vec<u8>>,
    held_bytes: u64,
    next_id: u64,
    lines: Vec<DelayLine>,
    /// Index into `lines` of each host with a delay of its own (line 0 has `delay`).
    line_of: HashMap<IpAddr, usize>,
    delayed_bytes: u64,
    decided: Vec<Decision>,
    /// The latest time the pipeline was given: a frame stamped before it (received before the
    /// last poll, read after it) is taken at it, so the enforcers never see time go back.
    latest: Instant,
    pub stats: PipelineStats,
}

impl Pipeline {
    pub fn new(cfg: PipelineConfig) -> Result<Self, ratekit_core::ConfigError> {
        let factory = cfg.enforcer.clone().map(|e| DriverFactory::new(e, cfg.link_rate)).transpose()?;
        if !(0.0..=1.0).contains(&cfg.loss) {
            return Err(ratekit_core::ConfigError::new("loss", "must be a probability in [0, 1]"));
        }
        let mut lines = vec![DelayLine::new(cfg.delay)];
        let mut line_of = HashMap::new();
        for &(host, delay) in &cfg.host_delays {
            let i = match lines.iter().position(|l| l.delay == delay) {
                Some(i) => i,
                None => {
                    lines.push(DelayLine::new(delay));
                    lines.len() - 1
                }
            };
            line_of.insert(host, i);
        }
        Ok(Pipeline {
            rng: ChaCha8Rng::seed_from_u64(cfg.seed),
            factory,
            cfg,
            aggs: HashMap::new(),
            held: HashMap::new(),
            held_bytes: 0,
            next_id: 0,
            lines,
            line_of,
            delayed_bytes: 0,
            latest: Instant(0),
            decided: Vec::new(),
            stats: PipelineStats::default(),
        })
    }

    pub fn aggregates(&self) -> impl Iterator<Item = (&AggKey, AggStats)> + '_ {
        self.aggs.iter().map(|(k, a)| (k, a.stats()))
    }

    fn delay(&mut self, now: Instant, dir: Dir, frame: Vec<u8>) {
        let len = frame.len() as u64;
        if self.delayed_bytes + len > self.cfg.max_delayed_bytes {
            self.stats.overflow_drops += 1;
            return;
        }
        self.delayed_bytes += len;
        let line = match crate::packet::endpoints(&frame) {
            Some((src, dst)) if !self.line_of.is_empty() => {
                let host = if dir == Dir::Forward { src } else { dst };
                self.line_of.get(&host).copied().unwrap_or(0)
            }
            _ => 0,
        };
        let line = &mut self.lines[line];
        line.frames[dir as usize].push_back((now + line.delay, frame));
    }

    pub fn note_read_lag(&mut self, waited_ns: u64) {
        tally_lateness(&mut self.stats.late_reads, &mut self.stats.max_read_lag_us, waited_ns);
    }

    /// A frame arrived at `now` travelling in `dir`.
    pub fn on_frame(&mut self, now: Instant, dir: Dir, frame: Vec<u8>) {
        let now = now.max(self.latest);
        self.latest = now;
        self.stats.received[dir as usize] += 1;
        if dir == Dir::Reverse {
            return self.delay(now, dir, frame);
        }
        if self.cfg.loss > 0.0 && self.rng.gen_bool(self.cfg.loss) {
            self.stats.random_losses += 1;
            return;
        }
        let Some(factory) = self.factory.as_ref() else { return self.delay(now, dir, frame) };
        let Some(parsed) = parse(&frame, &self.cfg.settings) else {
            self.stats.non_ip += 1;
            return self.delay(now, dir, frame);
        };
        if !self.aggs.contains_key(&parsed.agg) {
            if self.aggs.len() >= self.cfg.max_aggregates {
                self.stats.untracked += 1;
                return self.delay(now, dir, frame);
            }
            self.aggs.insert(parsed.agg, Agg { driver: factory.build(), arrival_bytes: 0 });
        }
        let agg = self.aggs.get_mut(&parsed.agg).unwrap();
        agg.arrival_bytes += parsed.pkt.len as u64;
        let mut pkt = parsed.pkt;
        if agg.driver.is_queueing() {
            if self.held_bytes + frame.len() as u64 > self.cfg.max_held_bytes {
                self.stats.overflow_drops += 1;
                return;
            }
            self.next_id += 1;
            pkt.id = self.next_id;
            self.held_bytes += frame.len() as u64;
            self.held.insert(pkt.id, frame);
            agg.driver.arrive(now, pkt, &mut self.decided);
            self.release(now);
        } else {
            agg.driver.arrive(now, pkt, &mut self.decided);
            if let Some(Decision { outcome: Outcome::Pass { .. }, .. }) = self.decided.pop() {
                self.delay(now, dir, frame);
            }
        }
    }

    /// Frees the frames a queueing driver decided on: dropped ones are forgotten, passed ones
    /// enter the delay line now, as their link starts sending them.
    fn release(&mut self, now: Instant) {
        let decided = std::mem::take(&mut self.decided);
        for d in &decided {
            let Some(frame) = self.held.remove(&d.id) else { continue };
            self.held_bytes -= frame.len() as u64;
            if let Outcome::Pass { .. } = d.outcome {
                self.delay(now, Dir::Forward, frame);
            }
        }
        self.decided = decided;
        self.decided.clear();
    }

    /// Moves whatever is due at `now` out: calls `send(dir, frame)` for each frame to transmit.
    pub fn poll(&mut self, now: Instant, mut send: impl FnMut(Dir, &[u8])) {
        self.latest = self.latest.max(now);
        let due: Vec<AggKey> =
            self.aggs.iter().filter(|(_, a)| a.driver.next_wakeup().is_some_and(|t| t <= now)).map(|(k, _)| *k).collect();
        for key in due {
            self.aggs.get_mut(&key).unwrap().driver.wake(now, &mut self.decided);
            self.release(now);
        }
        // Oldest due first across the lines: a wake-up that finds frames of several delays due
        // must not always queue the shortest delay's first, or when the queue behind has room for
        // one of them the longer-RTT flows lose every time.
        while let Some((l, dir)) = self.earliest_due(now) {
            let (due, frame) = self.lines[l].frames[dir as usize].pop_front().unwrap();
            tally_lateness(&mut self.stats.late_frames, &mut self.stats.max_late_us, (now - due).0);
            self.delayed_bytes -= frame.len() as u64;
            self.stats.sent[dir as usize] += 1;
            send(dir, &frame);
        }
    }

    /// The line and direction whose first frame fell due earliest, if one has by `now`.
    fn earliest_due(&self, now: Instant) -> Option<(usize, Dir)> {
        let fronts = self.lines.iter().enumerate().flat_map(|(l, line)| {
            [Dir::Forward, Dir::Reverse].into_iter().filter_map(move |dir| line.frames[dir as usize].front().map(|(due, _)| (*due, l, dir)))
        });
        fronts.filter(|(due, _, _)| *due <= now).min_by_key(|(due, _, _)| *due).map(|(_, l, dir)| (l, dir))
    }

    /// The next time `poll` has something to do, if anything is pending.
    pub fn next_deadline(&self) -> Option<Instant> {
        let lines = self.lines.iter().flat_map(|l| &l.frames).filter_map(|f| f.front().map(|(t, _)| *t));
        let drivers = self.aggs.values().filter_map(|a| a.driver.next_wakeup());
        lines.chain(drivers).min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::{build_frame, IPPROTO_UDP};

    fn frame(dst: &str, sport: u16, len: u16) -> Vec<u8> {
        build_frame("10.0.0.1".parse().unwrap(), dst.parse().unwrap(), sport, 9, IPPROTO_UDP, 0, len)
    }

    /// A flood at 10× the policed rate leaves at the policed rate, delayed by `delay`.
    #[test]
    fn policer_flood_holds_rate_and_delay() {
        let cfg = PipelineConfig {
            enforcer: Some(EnforcerConfig::from_toml("kind = \"token_bucket\"\nrate = \"8mbit\"\nburst = 15000").unwrap()),
            delay: Duration::from_millis(10),
            ..Default::default()
        };
        let mut p = Pipeline::new(cfg).unwrap();
        let mut out = Vec::new();
        // 10 Mbyte/s offered (1000-byte packets every 100 µs) for 1 s into a 1 Mbyte/s policer.
        for i in 0..10_000u64 {
            let now = Instant(i * 100_000);
            p.on_frame(now, Dir::Forward, frame("10.0.0.2", 1, 1000));
            p.poll(now, |d, f| out.push((now, d, f.len())));
        }
        p.poll(Instant(2_000_000_000), |d, f| out.push((Instant(2_000_000_000), d, f.len())));
        let bytes: u64 = out.iter().map(|(_, _, l)| *l as u64 - 14).sum();
        assert!(bytes >= 1_000_000 && bytes <= 1_000_000 + 15_000 + 1000, "{bytes}");
        assert!(out[0].0 >= Instant(10_000_000), "first packet left at {:?}", out[0].0);
    }

    /// ACKs are delayed but never policed.
    #[test]
    fn reverse_direction_is_delay_only() {
        let cfg = PipelineConfig {
            enforcer: Some(EnforcerConfig::from_toml("kind = \"token_bucket\"\nrate = 8000\nburst = 1").unwrap()),
            delay: Duration::from_millis(5),
            ..Default::default()
        };
        let mut p = Pipeline::new(cfg).unwrap();
        for i in 0..100 {
            p.on_frame(Instant(i), Dir::Reverse, frame("10.0.0.2", 1, 1000));
        }
        let mut n = 0;
        p.poll(Instant(4_999_999), |_, _| n += 1);
        assert_eq!(n, 0);
        assert_eq!(p.next_deadline(), Some(Instant(5_000_000)));
        p.poll(Instant(5_000_099), |d, _| {
            assert_eq!(d, Dir::Reverse);
            n += 1
        });
        assert_eq!(n, 100);
    }

    /// A queueing enforcer (the tbf-style FIFO shaper) holds the flood and releases it at its
    /// rate; what does not fit its limit is dropped, and held memory stays bounded.
    #[test]
    fn shaper_paces_a_flood() {
        let toml = "kind = \"fifo\"\nrate = \"8mbit\"\nburst = 1500\nlimit = 30000";
        let cfg = PipelineConfig { enforcer: Some(EnforcerConfig::from_toml(toml).unwrap()), ..Default::default() };
        let mut p = Pipeline::new(cfg).unwrap();
        let mut sent = Vec::new();
        let mut now = Instant(0);
        // 10 Mbyte/s offered for 0.5 s into a 1 Mbyte/s shaper, polled at every deadline.
        for i in 0..5_000u64 {
            let t = Instant(i * 100_000);
            while let Some(d) = p.next_deadline().filter(|d| *d <= t) {
                now = d.max(now);
                p.poll(now, |_, f| sent.push((now, f.len())));
            }
            now = t;
            p.on_frame(now, Dir::Forward, frame("10.0.0.2", 1, 1000));
            p.poll(now, |_, f| sent.push((now, f.len())));
            assert!(p.held_bytes <= 30_000 + 1014, "held {}", p.held_bytes);
        }
        let bytes: u64 = sent.iter().map(|(_, l)| *l as u64 - 14).sum();
        assert!((490_000..=520_000).contains(&bytes), "{bytes} bytes left in 0.5 s at 1 Mbyte/s");
        let (_, st) = p.aggregates().next().unwrap();
        assert!(st.dropped_packets > 4000, "{st:?}");
    }

    /// A host with a delay of its own waits it both ways (data from it, ACKs to it), interleaved
    /// with the other hosts' frames, so a mixed-RTT path has each client's RTT.
    #[test]
    fn host_delays_apply_both_ways() {
        let far: IpAddr = "10.0.0.3".parse().unwrap();
        let near: IpAddr = "10.0.0.1".parse().unwrap();
        let cfg = PipelineConfig {
            delay: Duration::from_millis(5),
            host_delays: vec![(far, Duration::from_millis(40)), ("10.0.0.4".parse().unwrap(), Duration::from_millis(5))],
            ..Default::default()
        };
        let mut p = Pipeline::new(cfg).unwrap();
        let rcv: IpAddr = "10.0.0.2".parse().unwrap();
        let mk = |src, dst| build_frame(src, dst, 1, 9, IPPROTO_UDP, 0, 100);
        p.on_frame(Instant(0), Dir::Forward, mk(far, rcv));
        p.on_frame(Instant(0), Dir::Forward, mk(near, rcv));
        p.on_frame(Instant(1), Dir::Reverse, mk(rcv, far));
        p.on_frame(Instant(1), Dir::Reverse, mk(rcv, near));
        let mut out = Vec::new();
        while let Some(t) = p.next_deadline() {
            p.poll(t, |d, f| out.push((t.0 / 1_000_000, d, crate::packet::endpoints(f).unwrap())));
        }
        let expect = [
            (5, Dir::Forward, (near, rcv)),
            (5, Dir::Reverse, (rcv, near)),
            (40, Dir::Forward, (far, rcv)),
            (40, Dir::Reverse, (rcv, far)),
        ];
        assert_eq!(out, expect);
        assert_eq!(p.lines.len(), 2, "hosts with the default delay share its line");
        assert_eq!(p.delayed_bytes, 0);
    }

    /// A late wake-up that finds frames of several delay lines due sends them in the order they
    /// fell due, whichever line holds them (line order would always queue the near host's first).
    #[test]
    fn a_late_poll_sends_frames_in_due_order_across_lines() {
        let (far, near, rcv): (IpAddr, IpAddr, IpAddr) = ("10.0.0.3".parse().unwrap(), "10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap());
        let cfg = PipelineConfig { delay: Duration::from_millis(5), host_delays: vec![(far, Duration::from_millis(40))], ..Default::default() };
        let mut p = Pipeline::new(cfg).unwrap();
        let mk = |src, dst| build_frame(src, dst, 1, 9, IPPROTO_UDP, 0, 100);
        let ms = |m: u64| Instant(m * 1_000_000);
        p.on_frame(ms(0), Dir::Forward, mk(far, rcv)); // due at 40
        p.on_frame(ms(34), Dir::Reverse, mk(rcv, near)); // due at 39
        p.on_frame(ms(36), Dir::Forward, mk(near, rcv)); // due at 41
        let mut out = Vec::new();
        p.poll(ms(45), |d, f| out.push((d, crate::packet::endpoints(f).unwrap())));
        assert_eq!(out, [(Dir::Reverse, (rcv, near)), (Dir::Forward, (far, rcv)), (Dir::Forward, (near, rcv))]);
        assert_eq!(p.stats.late_frames, [3, 3]);
        assert_eq!(p.stats.max_late_us, 6_000);
    }

    #[test]
    fn loss_is_seeded_and_near_p() {
        let mk = || {
            Pipeline::new(PipelineConfig { loss: 0.1, seed: 7, ..Default::default() }).unwrap()
        };
        let (mut a, mut b) = (mk(), mk());
        for i in 0..20_000 {
            a.on_frame(Instant(i), Dir::Forward, frame("10.0.0.2", 1, 100));
            b.on_frame(Instant(i), Dir::Forward, frame("10.0.0.2", 1, 100));
        }
        assert_eq!(a.stats.random_losses, b.stats.random_losses);
        assert!((1800..2200).contains(&a.stats.random_losses), "{}", a.stats.random_losses);
    }
}
