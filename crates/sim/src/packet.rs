//! Simulated packets live in one pool and travel as indices, so no packet is allocated per send
//! (htsim reuses its packet objects the same way).

/// Payload bytes per full segment (Linux's MSS on a 1500-byte path with TCP timestamps).
pub const MSS: u32 = 1448;
/// IP + TCP + timestamp option bytes on every segment: 20 + 20 + 12.
pub const HEADER: u32 = 52;
/// A sentinel for "no SACK block on this ACK".
pub const NO_SACK: u32 = u32::MAX;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Kind {
    #[default]
    Data,
    Ack,
    Udp,
}

/// A packet in flight. `hop` is the index of the next component on its flow's route.
#[derive(Debug, Clone, Copy, Default)]
pub struct Pkt {
    pub flow: u32,
    pub hop: u16,
    pub kind: Kind,
    /// Segment number (data) or datagram number (UDP).
    pub seq: u32,
    /// IP length in bytes.
    pub len: u32,
    /// Cumulative ACK: the next segment the receiver expects.
    pub ack: u32,
    /// The out-of-order segment that triggered this ACK, or `NO_SACK`. ACKs are never lost in
    /// the model (the reverse path has no enforcer), so one block per ACK keeps the sender's
    /// scoreboard exact, as Linux's three SACK blocks do on a loss-free reverse path.
    pub sack: u32,
    /// When it entered a queueing enforcer (for its sojourn time).
    pub enq_ns: u64,
}

#[derive(Default)]
pub struct Pool {
    slots: Vec<Pkt>,
    free: Vec<u32>,
}

impl Pool {
    #[inline]
    pub fn alloc(&mut self, p: Pkt) -> u32 {
        match self.free.pop() {
            Some(i) => {
                self.slots[i as usize] = p;
                i
            }
            None => {
                self.slots.push(p);
                (self.slots.len() - 1) as u32
            }
        }
    }

    #[inline]
    pub fn release(&mut self, i: u32) {
        self.free.push(i);
    }

    #[inline]
    pub fn get(&self, i: u32) -> &Pkt {
        &self.slots[i as usize]
    }

    #[inline]
    pub fn get_mut(&mut self, i: u32) -> &mut Pkt {
        &mut self.slots[i as usize]
    }

    /// Packets currently allocated (in queues, pipes or being forwarded).
    pub fn live(&self) -> usize {
        self.slots.len() - self.free.len()
    }
}
