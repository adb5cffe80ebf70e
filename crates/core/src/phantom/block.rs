//! The layout of one aggregate's heap block: sized by the compiled policy, read and written in
//! place by the queue state.

/// Per inner node: the bytes queued below it and its non-empty children. Three words of the
/// aggregate's block (`Pod`: it is read in place from the block's words).
#[derive(Debug, Clone, Copy, Default, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C)]
pub(super) struct InnerState {
    /// Σ of the occupancy of every queue below, in nano-bytes.
    pub(super) backlog: u64,
    /// Σ weight of the non-empty children (water-filling denominator).
    pub(super) active_weight: u64,
    /// How many of the node's slots hold non-empty children.
    pub(super) active_len: u16,
    /// Root of a flat `fair`/`weighted` policy only: the queue in its first slot as of the last
    /// [`PhantomQueues::set_defer_limit`] (the deferred remainder's taker), so that
    /// [`PhantomQueues::occupancy`] need not look it up. Fits in the padding.
    ///
    /// [`PhantomQueues::set_defer_limit`]: super::PhantomQueues::set_defer_limit
    /// [`PhantomQueues::occupancy`]: super::PhantomQueues::occupancy
    pub(super) head_queue: u16,
    _padding: u32,
}

/// Words of an [`InnerState`].
pub(super) const INNER_WORDS: usize = std::mem::size_of::<InnerState>() / 8;
// `node_backlog` reads the backlog as the state's first word.
const _: () = assert!(std::mem::offset_of!(InnerState, backlog) == 0);

/// A cache line's worth of an aggregate's block (the unit it is sized in). Aligned to 16 only,
/// what the allocator gives anyway: 64 sends it down its aligned path (padding around every
/// block), and in alternated `ratekit bench` runs at 10k aggregates the 64-aligned block was
/// slower than this one (docs/bcpqp.md, Cost).
#[derive(Debug, Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C, align(16))]
pub(super) struct Line(pub(super) [u64; 8]);
