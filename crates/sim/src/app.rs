//! Applications as the simulator runs them (their `app` table is ratekit_lab's `AppConfig`).
//! TCP: backlogged, finite (one transfer; flow completion time at the receiver), on-off
//! (messages and gaps drawn from exponential or Pareto distributions; each message is sent once
//! the previous one is fully acknowledged and the gap has passed; messages are whole segments),
//! periodic (transfers of whole segments handed to TCP on a fixed schedule from the flow's start),
//! video (a player's segment requests, video.rs).
//! UDP (no congestion control): constant bit rate, and LogNormal inter-arrival times (004 §V-A3).

use crate::ctx::Ctx;
use crate::engine::{ComponentId, Wakeup};
use crate::packet::{Kind, Pkt, MSS};
use crate::video::Player;
use rand::Rng;
use rand_chacha::ChaCha8Rng;
use ratekit_lab::arrivals::draw;
use ratekit_lab::scenario::{AppConfig, Dist};
use std::cell::Cell;

/// A TCP application's state, polled by its sender.
pub enum App {
    Backlogged,
    Finite { segments: u32, last_payload: u32 },
    /// The generator is boxed: it is most of the variant's size, and `App` sits in every sender.
    OnOff { rng: Box<ChaCha8Rng>, mean_size: f64, mean_gap_ns: f64, size_dist: Dist, gap_dist: Dist, shape: f64, available: u32, next_start: Option<u64> },
    /// `left` more transfers of `segments` each, the next at `next_start`, then every `period_ns`.
    Periodic { segments: u32, period_ns: u64, left: u32, available: u32, next_start: Option<u64> },
    /// What the player's requests have asked for so far; the world tells it what arrived.
    Video(Box<Player>),
    /// `inner` until `stop_ns`, then nothing beyond what TCP has already sent (`limit`, frozen
    /// at the first poll at or after the stop). TCP asks a segment's payload exactly when it
    /// emits it, so the highest segment asked for + 1 is its snd_nxt (`sent`). The sender polls
    /// before it transmits in every handler, and `next_event` wakes it at the stop.
    Stopping { inner: Box<App>, stop_ns: u64, limit: Option<u32>, sent: Cell<u32> },
}

impl App {
    /// The application of `cfg`, stopping at `stop_ns` if given; `request_delay_ns` is how long
    /// the receiving end's requests (a video player's) take to reach the sender.
    pub fn new(cfg: &AppConfig, rng: ChaCha8Rng, stop_ns: Option<u64>, request_delay_ns: u64) -> App {
        let app = Self::unstopped(cfg, rng, request_delay_ns);
        match stop_ns {
            Some(stop_ns) => App::Stopping { inner: Box::new(app), stop_ns, limit: None, sent: Cell::new(0) },
            None => app,
        }
    }

    fn unstopped(cfg: &AppConfig, rng: ChaCha8Rng, request_delay_ns: u64) -> App {
        match *cfg {
            AppConfig::Finite { size } => {
                let segments = size.0.div_ceil(MSS as u64).max(1) as u32;
                let last_payload = (size.0 - (segments as u64 - 1) * MSS as u64) as u32;
                App::Finite { segments, last_payload }
            }
            AppConfig::OnOff { mean_size, mean_gap, size_dist, gap_dist, shape } => App::OnOff {
                rng: Box::new(rng),
                mean_size: mean_size.0 as f64,
                mean_gap_ns: mean_gap.0 as f64,
                size_dist,
                gap_dist,
                shape,
                available: 0,
                next_start: None,
            },
            AppConfig::Periodic { size, period, count } => App::Periodic {
                segments: size.0.div_ceil(MSS as u64).max(1) as u32,
                period_ns: period.0,
                left: count,
                available: 0,
                next_start: None,
            },
            AppConfig::Video { .. } => App::Video(Box::new(Player::new(cfg, request_delay_ns))),
            _ => App::Backlogged,
        }
    }

    pub fn start(&mut self, now: u64) {
        match self {
            App::OnOff { next_start, .. } | App::Periodic { next_start, .. } => *next_start = Some(now),
            App::Video(p) => p.start(now),
            App::Stopping { inner, .. } => inner.start(now),
            _ => {}
        }
    }

    /// Segments the application has handed to TCP so far. The sender asks for every segment, so
    /// this stays small enough to inline: a stop wraps a base application once, never itself.
    #[inline]
    pub fn available(&self) -> u32 {
        match self {
            App::Stopping { inner, limit, .. } => {
                let offered = inner.base_available();
                limit.map_or(offered, |l| l.min(offered))
            }
            app => app.base_available(),
        }
    }

    #[inline]
    fn base_available(&self) -> u32 {
        match self {
            App::Backlogged => u32::MAX,
            App::Finite { segments, .. } => *segments,
            App::OnOff { available, .. } | App::Periodic { available, .. } => *available,
            App::Video(p) => p.available,
            App::Stopping { .. } => unreachable!("a stop wraps a base application, never another stop"),
        }
    }

    /// The video player, if this is one (behind a stop too).
    pub fn player_mut(&mut self) -> Option<&mut Player> {
        match self {
            App::Video(p) => Some(p),
            App::Stopping { inner, .. } => inner.player_mut(),
            _ => None,
        }
    }

    pub fn player(&self) -> Option<&Player> {
        match self {
            App::Video(p) => Some(p),
            App::Stopping { inner, .. } => inner.player(),
            _ => None,
        }
    }

    /// (segments, last segment's payload) of a finite transfer.
    pub fn finite_shape(&self) -> Option<(u32, u32)> {
        match self {
            App::Finite { segments, last_payload } => Some((*segments, *last_payload)),
            App::Stopping { inner, .. } => inner.finite_shape(),
            _ => None,
        }
    }

    pub fn segment_payload(&self, seq: u32) -> u32 {
        match self {
            App::Finite { segments, last_payload } if seq + 1 == *segments => *last_payload,
            App::Stopping { inner, sent, .. } => {
                sent.set(sent.get().max(seq + 1));
                inner.segment_payload(seq)
            }
            _ => MSS,
        }
    }

    pub fn next_event(&self) -> Option<u64> {
        match self {
            App::OnOff { next_start, .. } | App::Periodic { next_start, .. } => *next_start,
            App::Video(p) => p.next_event(),
            App::Stopping { inner, stop_ns, limit: None, .. } => {
                Some(inner.next_event().map_or(*stop_ns, |t| t.min(*stop_ns)))
            }
            _ => None,
        }
    }

    /// Advances the on-off cycle (a finished message starts a gap; an elapsed gap a message) and
    /// the periodic schedule (every transfer due by `now` is handed over, finished or not).
    pub fn poll(&mut self, now: u64, snd_una: u32) {
        if let App::Stopping { inner, stop_ns, limit, sent } = self {
            if limit.is_none() {
                if now >= *stop_ns {
                    *limit = Some(sent.get());
                } else {
                    inner.poll(now, snd_una);
                }
            }
            return;
        }
        if let App::Periodic { segments, period_ns, left, available, next_start } = self {
            while let Some(t) = next_start.filter(|&t| t <= now) {
                *available = available.saturating_add(*segments);
                *left -= 1;
                *next_start = (*left > 0).then_some(t + *period_ns);
            }
            return;
        }
        if let App::Video(p) = self {
            p.poll(now);
            return;
        }
        if let App::OnOff { rng, mean_size, mean_gap_ns, size_dist, gap_dist, shape, available, next_start } = self {
            match *next_start {
                Some(t) if t <= now => {
                    let size = draw(rng, *size_dist, *mean_size, *shape).max(1.0);
                    *available += (size / MSS as f64).ceil().max(1.0) as u32;
                    *next_start = None;
                }
                None if snd_una >= *available => {
                    let gap = draw(rng, *gap_dist, *mean_gap_ns, *shape);
                    *next_start = Some(now + gap.min(1e15) as u64);
                }
                _ => {}
            }
        }
    }
}

/// A UDP source: one pending wake-up, the next datagram's departure.
pub struct UdpSource {
    pub id: ComponentId,
    pub flow: u32,
    rng: ChaCha8Rng,
    len: u32,
    mean_gap_ns: f64,
    sigma: Option<f64>,
    seq: u32,
    wake: Wakeup,
    pub sent: u64,
    /// No datagram is sent at or after this.
    stop_ns: u64,
    /// (flow id, probability): datagrams sent under this flow id, which the world gives the
    /// other class and the same key, customer and route as `flow`.
    relabel: Option<(u32, f64)>,
}

impl UdpSource {
    /// `relabel_flow`: the flow id for datagrams of `cfg`'s other class (given iff it has one).
    pub fn new(id: ComponentId, flow: u32, cfg: &AppConfig, rng: ChaCha8Rng, stop_ns: Option<u64>, relabel_flow: Option<u32>) -> Self {
        let (rate, packet, sigma) = match *cfg {
            AppConfig::Cbr { rate, packet } => (rate, packet, None),
            AppConfig::Lognormal { rate, sigma, packet, .. } => (rate, packet, Some(sigma)),
            _ => unreachable!("UdpSource built for a TCP app"),
        };
        let relabel = relabel_flow.zip(cfg.class_fraction()).map(|(f, (p, _))| (f, p));
        let mean_gap_ns = packet.0 as f64 * 1e9 / rate.0 as f64;
        UdpSource { id, flow, rng, len: packet.0 as u32, mean_gap_ns, sigma, seq: 0, wake: Wakeup::default(), sent: 0, stop_ns: stop_ns.unwrap_or(u64::MAX), relabel }
    }

    pub fn schedule_start(&mut self, ctx: &mut Ctx, at: u64) {
        if self.wake.want(at) {
            ctx.ev.schedule(at, self.id);
        }
    }

    fn next_gap(&mut self) -> u64 {
        match self.sigma {
            None => self.mean_gap_ns as u64,
            Some(s) => {
                // LogNormal with the given mean: μ = ln(mean) − σ²/2; Box-Muller for the normal.
                let u1: f64 = 1.0 - self.rng.gen::<f64>();
                let u2: f64 = self.rng.gen();
                let z = (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos();
                let mu = self.mean_gap_ns.ln() - s * s / 2.0;
                (mu + s * z).exp().min(1e15) as u64
            }
        }
    }

    pub fn on_timer(&mut self, ctx: &mut Ctx) {
        let now = ctx.ev.now();
        if !self.wake.fire(now) || now >= self.stop_ns {
            return;
        }
        let flow = match self.relabel {
            Some((other, p)) if self.rng.gen::<f64>() < p => other,
            _ => self.flow,
        };
        ctx.send(Pkt { flow, kind: Kind::Udp, seq: self.seq, len: self.len, ..Pkt::default() });
        self.seq = self.seq.wrapping_add(1);
        self.sent += 1;
        let t = now + self.next_gap().max(1);
        if self.wake.want(t) {
            ctx.ev.schedule(t, self.id);
        }
    }

    /// UDP payload bytes per datagram (IP and UDP headers are 28 bytes).
    pub fn payload(&self) -> u32 {
        self.len.saturating_sub(28)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use ratekit_core::{Bytes, Duration};

    const S: u64 = 1_000_000_000;

    fn periodic(size: u64, period_s: u64, count: u32) -> App {
        let cfg = AppConfig::Periodic { size: Bytes(size), period: Duration(period_s * S), count };
        App::new(&cfg, ChaCha8Rng::seed_from_u64(1), None, 0)
    }

    #[test]
    fn periodic_transfers_follow_the_schedule_not_the_completions() {
        // 100 KB every 6 s, 5 times, from a start at 2 s: 70 segments each at 2, 8, 14, 20, 26 s.
        let mut app = periodic(100_000, 6, 5);
        app.start(2 * S);
        assert_eq!(app.next_event(), Some(2 * S));
        app.poll(2 * S, 0);
        assert_eq!(app.available(), 70);
        assert_eq!(app.next_event(), Some(8 * S));
        // Nothing acknowledged yet: the next transfer is still handed over on time, behind the first.
        app.poll(8 * S - 1, 0);
        assert_eq!(app.available(), 70);
        app.poll(8 * S, 0);
        assert_eq!(app.available(), 140);
        // A sender woken late gets every transfer due by then, and none beyond the count.
        app.poll(40 * S, 140);
        assert_eq!(app.available(), 350);
        assert_eq!(app.next_event(), None);
        app.poll(100 * S, 350);
        assert_eq!(app.available(), 350);
        assert_eq!(app.segment_payload(69), MSS);
    }

    /// Before its stop a stopping app offers what its inner app offers (it offered unlimited data,
    /// so an on-off or finite flow with a `stop` ran backlogged until the stop).
    #[test]
    fn a_stop_ends_a_periodic_schedule_too() {
        let cfg = AppConfig::Periodic { size: Bytes(10 * MSS as u64), period: Duration(S), count: 10 };
        let mut app = App::new(&cfg, ChaCha8Rng::seed_from_u64(1), Some(3 * S - 1), 0);
        app.start(0);
        for (t, sent) in [(0, 0), (S, 10), (2 * S, 20)] {
            app.poll(t, sent);
            let _ = (0..app.available().min(30)).map(|seq| app.segment_payload(seq)).count();
        }
        assert_eq!(app.available(), 30);
        app.poll(3 * S, 30);
        assert_eq!(app.available(), 30, "frozen at the stop");
        assert_eq!(app.next_event(), None);
    }
}
