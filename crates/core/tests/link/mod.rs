//! A constant-rate link for queueing-discipline tests (DSCD's FIFO property, its trace against
//! the authors' qdisc): the link takes the next packet whenever it is free, as the simulator's
//! driver does, so every implementation sees its enqueue and dequeue calls at the same kind of
//! instants.

use ratekit_core::{Dropped, Instant, Packet, QueueDiscipline, Rate};
use std::collections::HashMap;

/// Runs `arrivals` (time in ns, packet; sorted by time) through `q` on a link of `rate`.
/// `after_dequeue` sees the queue right after each dequeue, with the dequeued packet and the
/// drops that dequeue made. Returns the departure (start of transmission) by packet id.
pub fn run_link<Q: QueueDiscipline>(
    q: &mut Q,
    rate: Rate,
    arrivals: &[(u64, Packet)],
    mut after_dequeue: impl FnMut(&Q, u64, Option<Packet>, &[Dropped]),
) -> HashMap<u64, u64> {
    let mut out = HashMap::new();
    let (mut i, mut now, mut link_free) = (0, 0u64, 0u64);
    let mut drops = Vec::new();
    loop {
        let next_arrival = arrivals.get(i).map(|a| a.0);
        let can_send = q.backlog_bytes() > 0;
        match next_arrival {
            Some(a) if !can_send || a <= link_free.max(now) => {
                now = now.max(a);
                q.enqueue(Instant(now), arrivals[i].1, &mut drops);
                i += 1;
            }
            _ if can_send => {
                now = now.max(link_free);
                drops.clear();
                let p = q.dequeue(Instant(now), &mut drops);
                after_dequeue(q, now, p, &drops);
                if let Some(p) = p {
                    out.insert(p.id, now);
                    link_free = now + rate.time_to_send(p.len as u64).0;
                }
            }
            _ => return out,
        }
    }
}
