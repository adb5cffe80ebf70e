//! Simulated packets live in one pool and travel as indices, so no packet is allocated per send
//! (htsim reuses its packet objects the same way).

/// Payload bytes per full segment (Linux's MSS on a 1500-byte path with TCP timestamps).
pub const MSS: u32 = 1448;
/// IP + TCP + timestamp option bytes on every segment: 20 + 20 + 12.
pub const HEADER: u32 = 52;
/// SACK blocks per ACK: what fits beside the timestamp option (`tcp_established_options`).
pub const SACK_BLOCKS: usize = 3;

/// Segments `start..end` that reached the receiver out of order since its previous ACK; empty
/// when `start == end`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Sack {
    pub start: u32,
    pub end: u32,
}

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
    /// An ACK's news from the receiver's SACK blocks, most recent first. ACKs are never lost in
    /// the model (the reverse path has no enforcer), so the sender learns every out-of-order
    /// arrival once, as from Linux's blocks on a loss-free reverse path, without re-reading the
    /// parts of the blocks that earlier ACKs reported.
    pub sack: [Sack; SACK_BLOCKS],
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
