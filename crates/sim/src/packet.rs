//! Simulated packets live in one pool and travel as indices, so no packet is allocated per send
//! (htsim reuses its packet objects the same way).

/// Payload bytes per full segment (Linux's MSS on a 1500-byte path with TCP timestamps).
pub const MSS: u32 = 1448;
/// IP + TCP + timestamp option bytes on every segment: 20 + 20 + 12.
pub const HEADER: u32 = 52;
/// SACK blocks per ACK: what fits beside the timestamp option (`tcp_established_options`).
pub const SACK_BLOCKS: usize = 3;

/// An ACK's SACK runs, most recent first: segments `start[i]..start[i] + len[i]` that reached the
/// receiver out of order since its previous ACK (none where `len[i]` is 0). A run holds no more
/// than one ACK may leave unsent (`tcp_comp_sack_nr` + 1), so its length fits a byte and a packet
/// stays at 48 bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Sacks {
    start: [u32; SACK_BLOCKS],
    len: [u8; SACK_BLOCKS],
}

impl Sacks {
    /// Adds `seq` to a run it is adjacent to, which becomes the most recent; false if none.
    pub fn extend(&mut self, seq: u32) -> bool {
        let end = |k: usize| self.start[k] + self.len[k] as u32;
        let Some(k) = (0..SACK_BLOCKS).find(|&k| self.len[k] > 0 && (end(k) == seq || self.start[k] == seq + 1)) else {
            return false;
        };
        self.start[k] = self.start[k].min(seq);
        self.len[k] = self.len[k].checked_add(1).expect("a run outgrew what one ACK may hold back");
        self.start[..=k].rotate_right(1);
        self.len[..=k].rotate_right(1);
        true
    }

    /// Whether another run would push one out.
    pub fn is_full(&self) -> bool {
        self.len[SACK_BLOCKS - 1] > 0
    }

    /// Starts a run of `seq` as the most recent.
    pub fn push(&mut self, seq: u32) {
        self.start.rotate_right(1);
        self.len.rotate_right(1);
        (self.start[0], self.len[0]) = (seq, 1);
    }

    pub fn runs(&self) -> impl Iterator<Item = std::ops::Range<u32>> + '_ {
        (0..SACK_BLOCKS).filter(|&k| self.len[k] > 0).map(|k| self.start[k]..self.start[k] + self.len[k] as u32)
    }
}

/// IP length of a SYN or SYN-ACK: the header's 52 bytes with MSS, SACK-permitted, timestamps
/// and window scale in place of the timestamp option alone (20 option bytes, not 12).
pub const SYN_LEN: u32 = 60;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Kind {
    #[default]
    Data,
    Ack,
    Udp,
    /// The handshake: the sender's SYN, the receiver's SYN-ACK and the sender's pure ACK of it,
    /// which crosses the forward path (and its enforcer) ahead of the first data.
    Syn,
    SynAck,
    HandshakeAck,
}

impl Kind {
    /// Whether the packet travels from receiver to sender, over the reverse path.
    pub fn is_reverse(self) -> bool {
        matches!(self, Kind::Ack | Kind::SynAck)
    }
}

/// A packet in flight. `hop` is the index of the next component on its flow's route.
#[derive(Debug, Clone, Copy, Default)]
pub struct Pkt {
    pub flow: u32,
    pub hop: u8,
    pub kind: Kind,
    /// Segment number (data) or datagram number (UDP); in an ACK or the SYN-ACK, the right edge
    /// of the receive window it advertises: the first segment the sender may not send yet.
    pub seq: u32,
    /// IP length in bytes.
    pub len: u32,
    /// Cumulative ACK: the next segment the receiver expects.
    pub ack: u32,
    /// An ACK's news from the receiver's SACK blocks, most recent first. ACKs are never lost in
    /// the model (the reverse path has no enforcer), so the sender learns every out-of-order
    /// arrival once, as from Linux's blocks on a loss-free reverse path, without re-reading the
    /// parts of the blocks that earlier ACKs reported.
    pub sack: Sacks,
    /// When it entered a queueing enforcer (for its sojourn time).
    pub enq_ns: u64,
    /// TCP timestamps (RFC 7323, Linux's millisecond clock): a segment's TSval, an ACK's TSecr.
    pub ts_ms: u32,
    /// The other half of the timestamps, the receiving end's clock in its low 16 bits (its RTTs
    /// are far shorter than 65 s): an ACK's TSval, and a segment's TSecr, which echoes the
    /// latest the sender had. The receiver times its RTT by it (`tcp_rcv_rtt_measure_ts`).
    pub receiver_ts_ms: u16,
}

// Every hop copies a packet and the pool's cache footprint sets the 1000-flow scenario's speed.
const _: () = assert!(std::mem::size_of::<Pkt>() <= 48);

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
