/* SPDX-License-Identifier: (Apache-2.0 OR GPL-2.0) */
/* PQP and BC-PQP over exact per-flow phantom queues (`flows = "exact"`, issue 17), mirroring
 * ratekit_core::{phantom::FlowQueues, pqp_flows::FlowPqp, bcpqp_flows::FlowBcPqp} operation for
 * operation, so that the same arrivals give the same verdicts, the same heap and the same slots
 * (docs/dataplane.md, "Exact per-flow queues"):
 * - one queue per flow, taken at its first packet, given back once drained (BC-PQP: and its
 *   window ended); beyond max_flows new flows share one overflow queue, counted;
 * - fair service as a virtual-time level with a min-heap of the non-empty queues keyed by a lower
 *   bound of their finish, so a packet costs amortised O(log n) whatever the number of flows;
 * - BC-PQP's windows: the core keeps a FIFO of (end, slot) and skips stale entries. Every window
 *   lasts T from a non-decreasing `now`, so ends arrive in order, and only a slot's first entry
 *   with its current end ever acts. Here each slot sits at most once on an intrusive list in that
 *   order: a restart with a new end moves it to the tail (the core's push), a restart with the
 *   same end leaves it (the core's later duplicate is inert). Same order, bounded memory.
 *
 * The flow → slot lookup is an open-addressing table inside the aggregate's value (linear
 * probing, backward-shift deletion, load ≤ 1/2), not a BPF hash map: it lives under the
 * aggregate's rk_lock with the slots it points to, so lookup, insertion and reclaim are one
 * critical section; a probe is a load or two in the value's cache lines instead of a helper
 * call with jhash; it needs no map sized for every aggregate's flows at once, and a reset
 * clears it with the rest of the state.
 *
 * Bounds (checked by the loader, crates/dataplane/src/bpf.rs): max_flows ≤ FQ_MAX_FLOWS; every
 * loop is bounded by what the structure can hold (heap depth, FQ_SLOTS, probe length ≤ entries).
 * Every struct is mirrored in crates/dataplane/src/maps.rs with a compile-time size check. */
#include "common.h"

#define FQ_MAX_FLOWS 1024
#define FQ_SLOTS (FQ_MAX_FLOWS + 1) /* the flows' queues and the overflow queue */
#define FQ_SLOTS_PADDED 1032        /* u16 arrays of FQ_SLOTS, rounded to 8 bytes */
#define FQ_TABLE 2048               /* ≥ 2·FQ_MAX_FLOWS: short probes */
#define FQ_NONE 0xffffffffU
#define FQ_HEAP_DEPTH 11 /* levels of a binary heap of FQ_SLOTS entries */
/* The level is rebased to 0 past this, so that level + a queue (≤ 16 GiB in nano-bytes) fits. */
#define FQ_REBASE_AT (1ULL << 60)

/* One entry (key 0) in `fq_params`. */
struct fq_params {
	__u64 rate;          /* bytes per second */
	__u64 queue_size_nb; /* B per flow, nano-bytes */
	/* BC-PQP only */
	__u64 theta_plus;       /* θ+ · 2^16 */
	__u64 theta_minus;      /* θ− · 2^16 */
	__u64 window_ns;        /* T */
	__u64 window_budget_nb; /* r·T */
	__u64 shape; /* state kept under another shape is reset (its counters kept) */
	__u32 max_flows;
	__u32 burst; /* 1: BC-PQP's burst control; 0: PQP */
};

/* FlowQueues' Slot with FlowBurst as its data. */
struct fq_slot {
	__u64 flow;
	__u64 finish;     /* level at which the queue is empty, nano-bytes */
	__u64 key;        /* heap key, ≤ finish while in the heap */
	__u64 magic_nb;   /* clamped to the occupancy when the queue is touched */
	__u64 accepted;   /* A_i, bytes */
	__u64 window_end; /* 0: no window ran */
	__u32 pos;        /* heap position, FQ_NONE while empty */
	__u32 prev;       /* the window list, in order of end */
	__u32 next;
	__u32 listed;
};

struct fq_state {
	__u32 lock; /* rk_lock */
	__u32 _pad;
	__u64 last_ns;
	__u64 shape; /* 0: fresh */
	__u64 level; /* virtual time: service every non-empty queue has had, nano-bytes */
	__u64 carry; /* service that did not divide among the queues, owed to the next batch */
	__u64 burst_fills;
	__u64 magic_removals;
	__u64 flows_created;
	__u64 flows_reclaimed;
	__u64 overflow_packets;
	__u32 heap_len;
	__u32 slots_used; /* slots ever handed out: the next fresh one */
	__u32 free_len;
	__u32 mapped; /* flows in the table */
	__u32 overflow; /* the overflow queue's slot, FQ_NONE while none */
	__u32 win_head;
	__u32 win_tail;
	__u32 cursor; /* the heap walks' position, kept here for the verifier (fq_walk_to) */
	struct rk_stats stats;
	__u16 heap[FQ_SLOTS_PADDED];
	__u16 free[FQ_SLOTS_PADDED]; /* a stack, as the core's Vec */
	__u16 table[FQ_TABLE];       /* slot + 1; 0: empty */
	struct fq_slot slots[FQ_SLOTS];
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct fq_params);
} fq_params SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	/* 74 KB a value: allocate an aggregate's state at its first packet, not the table up front */
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct rk_agg_key);
	__type(value, struct fq_state);
} fq_state SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct fq_state);
} fq_zero SEC(".maps");

/* Proves an index in bounds to the verifier (the structure keeps it so). In assembly, so that the
 * in-bounds path falls through and reaches the join first: the out-of-bounds path (a constant
 * within the range) is then pruned there, instead of doubling the paths at every access. */
static __always_inline __u32 fq_ix(__u32 i)
{
	__u64 x = i;
	asm volatile("if %[x] >= %[n] goto l_out_%=\n\t"
		     "goto l_in_%=\n"
		     "l_out_%=:\n\t"
		     "%[x] = 0\n"
		     "l_in_%=:"
		     : [x] "+r"(x)
		     : [n] "i"(FQ_SLOTS));
	return x;
}

static __always_inline struct fq_slot *fq_slot(struct fq_state *st, __u32 s)
{
	return &st->slots[fq_ix(s)];
}

static __always_inline __u64 fq_key_at(struct fq_state *st, __u32 i)
{
	return fq_slot(st, st->heap[fq_ix(i)])->key;
}

static __always_inline void fq_place(struct fq_state *st, __u32 i, __u32 s)
{
	st->heap[fq_ix(i)] = s;
	fq_slot(st, s)->pos = i;
}

/* Moves a heap walk's cursor to heap position i. Through the state, read back as any value and
 * clamped: every path then reaches the loop head with one range, and the verifier's pruning
 * keeps the walk linear in its depth (in registers, each path's range differs and the paths
 * multiply level by level). */
static __always_inline __u32 fq_walk_to(struct fq_state *st, __u32 i)
{
	st->cursor = i;
	return fq_ix(*(volatile __u32 *)&st->cursor);
}

/* Global: verified once, whatever the number of call sites. */
__noinline int fq_sift_up(struct fq_state *st, __u32 i)
{
	if (!st)
		return 0;
	__u32 s = st->heap[fq_ix(i)];
	__u64 key = fq_slot(st, s)->key;
	for (int k = 0; k < FQ_HEAP_DEPTH && i > 0; k++) {
		__u32 parent = (i - 1) / 2;
		if (fq_key_at(st, parent) <= key)
			break;
		fq_place(st, i, st->heap[fq_ix(parent)]);
		i = fq_walk_to(st, parent);
	}
	fq_place(st, i, s);
	return 0;
}

__noinline int fq_sift_down(struct fq_state *st, __u32 i)
{
	if (!st)
		return 0;
	__u32 s = st->heap[fq_ix(i)];
	__u64 key = fq_slot(st, s)->key;
	for (int k = 0; k < FQ_HEAP_DEPTH; k++) {
		__u32 n = *(volatile __u32 *)&st->heap_len; /* fresh: see fq_walk_to */
		__u32 left = 2 * i + 1, child = left;
		if (left >= n)
			break;
		if (left + 1 < n && fq_key_at(st, left + 1) < fq_key_at(st, left))
			child = left + 1;
		if (fq_key_at(st, child) >= key)
			break;
		fq_place(st, i, st->heap[fq_ix(child)]);
		i = fq_walk_to(st, child);
	}
	fq_place(st, i, s);
	return 0;
}

/* Takes the heap's i-th entry out (its slot's pos becomes FQ_NONE). */
static __always_inline void fq_heap_remove(struct fq_state *st, __u32 i)
{
	fq_slot(st, st->heap[fq_ix(i)])->pos = FQ_NONE;
	__u32 n = --st->heap_len;
	__u32 last = st->heap[fq_ix(n)];
	if (i < n) {
		fq_place(st, i, last);
		/* the moved entry may belong above or below i */
		fq_sift_up(st, i);
		fq_sift_down(st, fq_slot(st, last)->pos);
	}
}

static __always_inline __u64 fq_occupancy(struct fq_state *st, __u32 s)
{
	struct fq_slot *q = fq_slot(st, s);
	return q->pos == FQ_NONE ? 0 : q->finish - st->level;
}

/* FlowQueues::add: nb nano-bytes into slot s (a packet, or magic). */
static __always_inline void fq_add(struct fq_state *st, __u32 s, __u64 nb)
{
	struct fq_slot *q = fq_slot(st, s);
	if (q->pos != FQ_NONE) {
		q->finish = rk_sat_add(q->finish, nb);
		return;
	}
	q->finish = rk_sat_add(st->level, nb);
	q->key = q->finish;
	__u32 n = st->heap_len++;
	fq_place(st, n, s);
	fq_sift_up(st, n);
}

/* FlowQueues::remove: nb ≤ occupancy out of slot s unserved (magic removal). */
static __always_inline void fq_remove(struct fq_state *st, __u32 s, __u64 nb)
{
	struct fq_slot *q = fq_slot(st, s);
	q->finish = q->finish > nb ? q->finish - nb : 0;
	if (q->finish <= st->level) {
		fq_heap_remove(st, q->pos);
	} else if (q->key > q->finish) {
		q->key = q->finish;
		fq_sift_up(st, q->pos);
	}
}

static __always_inline __u32 fq_home(__u64 flow)
{
	return (flow ^ (flow >> 32)) & (FQ_TABLE - 1);
}

/* The table index holding `flow`, or the empty one where its probe ends (where it goes). The
 * probe ends within FQ_SLOTS steps: a run holds at most max_flows ≤ FQ_MAX_FLOWS entries. */
__noinline int fq_probe(const struct fq_state *st, __u64 flow)
{
	if (!st)
		return 0;
	__u32 h = fq_home(flow);
	for (int k = 0; k < FQ_SLOTS; k++) {
		__u32 e = st->table[h];
		if (e == 0 || st->slots[fq_ix(e - 1)].flow == flow)
			break;
		h = (h + 1) & (FQ_TABLE - 1);
	}
	return h;
}

/* Empties table index i and shifts back the entries of its run that may fill the hole (Knuth's
 * Algorithm R): lookups stay as short as the load allows, with no tombstones to pile up. */
__noinline int fq_unmap_at(struct fq_state *st, __u32 i)
{
	if (!st)
		return 0;
	i &= FQ_TABLE - 1;
	__u32 j = i;
	for (int k = 0; k < FQ_SLOTS; k++) {
		j = (j + 1) & (FQ_TABLE - 1);
		__u32 e = st->table[j];
		if (e == 0)
			break;
		__u32 home = fq_home(st->slots[fq_ix(e - 1)].flow);
		/* e may move back to i iff its home is not cyclically within (i, j] */
		if (((j - home) & (FQ_TABLE - 1)) >= ((j - i) & (FQ_TABLE - 1))) {
			st->table[i & (FQ_TABLE - 1)] = e;
			i = j;
		}
	}
	st->table[i & (FQ_TABLE - 1)] = 0;
	return 0;
}

/* The window list: every slot whose current window's entry the core's FIFO still holds. */
static __always_inline void fq_unlist(struct fq_state *st, __u32 s)
{
	struct fq_slot *q = fq_slot(st, s);
	if (!q->listed)
		return;
	q->listed = 0;
	if (q->prev == FQ_NONE)
		st->win_head = q->next;
	else
		fq_slot(st, q->prev)->next = q->next;
	if (q->next == FQ_NONE)
		st->win_tail = q->prev;
	else
		fq_slot(st, q->next)->prev = q->prev;
}

static __always_inline void fq_list_last(struct fq_state *st, __u32 s)
{
	struct fq_slot *q = fq_slot(st, s);
	fq_unlist(st, s);
	q->listed = 1;
	q->prev = st->win_tail;
	q->next = FQ_NONE;
	if (st->win_tail == FQ_NONE)
		st->win_head = s;
	else
		fq_slot(st, st->win_tail)->next = s;
	st->win_tail = s;
}

/* FlowQueues::reclaim: gives an empty slot back; its flow is forgotten. */
static __always_inline void fq_reclaim(struct fq_state *st, __u32 s)
{
	struct fq_slot *q = fq_slot(st, s);
	if (s == st->overflow) {
		st->overflow = FQ_NONE;
	} else {
		fq_unmap_at(st, fq_probe(st, q->flow));
		st->mapped--;
	}
	fq_unlist(st, s);
	q->magic_nb = 0;
	q->accepted = 0;
	q->window_end = 0;
	st->free[fq_ix(st->free_len)] = s;
	st->free_len++;
	st->flows_reclaimed++;
}

static __always_inline __u32 fq_take_slot(struct fq_state *st, __u64 flow)
{
	__u32 s = st->free_len > 0 ? st->free[fq_ix(--st->free_len)] : st->slots_used++;
	struct fq_slot *q = fq_slot(st, s);
	st->flows_created++;
	q->flow = flow;
	q->finish = 0;
	q->key = 0;
	q->pos = FQ_NONE;
	q->magic_nb = 0;
	q->accepted = 0;
	q->window_end = 0;
	q->listed = 0;
	return s;
}

/* FlowQueues::slot: the flow's slot, created if it has none; the overflow queue if max_flows
 * flows hold one. */
static __always_inline __u32 fq_slot_of(const struct fq_params *P, struct fq_state *st, __u64 flow)
{
	__u32 at = fq_probe(st, flow) & (FQ_TABLE - 1);
	__u32 e = st->table[at];
	if (e)
		return e - 1;
	if (st->mapped >= P->max_flows) {
		st->overflow_packets++;
		if (st->overflow == FQ_NONE)
			st->overflow = fq_take_slot(st, flow);
		return st->overflow;
	}
	__u32 s = fq_take_slot(st, flow);
	st->table[at] = s + 1;
	st->mapped++;
	return s;
}

/* What the bpf_loop callbacks share with their caller. */
struct fq_ctx {
	const struct fq_params *P;
	struct fq_state *st;
	__u64 t;
	__u64 budget; /* fq_serve_step: service left to hand out */
};

static long fq_rebase_step(__u64 i, void *data)
{
	struct fq_ctx *c = data;
	struct fq_state *st = c->st;
	if (i >= st->heap_len)
		return 1;
	struct fq_slot *q = fq_slot(st, st->heap[fq_ix(i)]);
	q->finish -= st->level;
	q->key -= st->level;
	return 0;
}

/* One turn of FlowQueues::serve: 1 once the budget is spread over the queues left. */
static long fq_serve_step(__u64 i, void *data)
{
	struct fq_ctx *c = data;
	struct fq_state *st = c->st;
	__u32 n = st->heap_len;
	if (n == 0) {
		/* idle: service is lost, as the shaper's link idles; the level restarts */
		st->carry = 0;
		st->level = 0;
		return 1;
	}
	__u32 top = st->heap[0];
	struct fq_slot *q = fq_slot(st, top);
	__u64 reach = q->key - st->level;
	/* the common case: nobody reaches its key, every queue gets an equal part */
	if (c->budget / n < reach) {
		__u64 part = c->budget / n;
		st->level += part;
		st->carry = c->budget - part * n;
		if (st->level > FQ_REBASE_AT) {
			bpf_loop(FQ_SLOTS, fq_rebase_step, c, 0);
			st->level = 0;
		}
		return 1;
	}
	c->budget -= reach * n; /* budget ≥ reach·n here: no overflow */
	st->level = q->key;
	if (q->finish > st->level) {
		q->key = q->finish;
		fq_sift_down(st, 0);
		return 0;
	}
	fq_heap_remove(st, 0);
	/* drained: PQP forgets the flow (its window_end is 0); BC-PQP once its window has ended */
	q->magic_nb = 0;
	if (c->t >= q->window_end)
		fq_reclaim(st, top);
	return 0;
}

/* Serves `budget` nano-bytes fairly. Each turn empties or re-keys a queue, at most once each
 * per call, so 2·FQ_SLOTS + 1 turns always finish; the first turn runs inline, since most
 * packets empty no queue. */
static __always_inline void fq_serve(const struct fq_params *P, struct fq_state *st, __u64 budget, __u64 t)
{
	struct fq_ctx c = { .P = P, .st = st, .t = t, .budget = rk_sat_add(budget, st->carry) };
	if (fq_serve_step(0, &c) == 0)
		bpf_loop(2 * FQ_SLOTS + 1, fq_serve_step, &c, 0);
}

/* Slot s's magic, clamped to its occupancy (and stored so: magic drains last). */
static __always_inline __u64 fq_clamp_magic(struct fq_state *st, __u32 s)
{
	struct fq_slot *q = fq_slot(st, s);
	__u64 occupancy = fq_occupancy(st, s);
	if (q->magic_nb > occupancy)
		q->magic_nb = occupancy;
	return q->magic_nb;
}

/* X_i = ⌊r·T / n⌋, n the non-empty queues (at least 1). */
static __always_inline __u64 fq_expected(const struct fq_params *P, const struct fq_state *st)
{
	return P->window_budget_nb / (st->heap_len > 0 ? st->heap_len : 1);
}

static __always_inline void fq_restart_window(const struct fq_params *P, struct fq_state *st, __u32 s, __u64 t)
{
	struct fq_slot *q = fq_slot(st, s);
	__u64 end = rk_sat_add(t, P->window_ns);
	q->accepted = 0;
	/* the same end: its entry stands where the core's first one does (a later one is inert) */
	if (q->window_end != end) {
		q->window_end = end;
		fq_list_last(st, s);
	}
}

/* FlowBcPqp::close_window: removes the magic if A_i < θ−·X_i, then restarts the window. Global:
 * both the arrival and the due-window callback call it, and it is verified once for both. */
__noinline int fq_close_window(const struct fq_params *P, struct fq_state *st, __u32 s, __u64 t)
{
	if (!P || !st)
		return 0;
	struct fq_slot *q = fq_slot(st, s);
	__u64 magic = fq_clamp_magic(st, s);
	if (magic > 0 && !rk_le_products(P->theta_minus, fq_expected(P, st), q->accepted, THETA_ONE_NB)) {
		fq_remove(st, s, magic);
		q->magic_nb = 0;
		st->magic_removals++;
	}
	fq_restart_window(P, st, s, t);
	return 0;
}

/* One due window, in order of end: closes it if it holds magic, reclaims a drained flow, or
 * leaves the window to close at the flow's next arrival. */
static long fq_close_due_step(__u64 i, void *data)
{
	struct fq_ctx *c = data;
	struct fq_state *st = c->st;
	__u32 s = st->win_head;
	if (s == FQ_NONE || fq_slot(st, s)->window_end > c->t)
		return 1;
	fq_unlist(st, s);
	if (fq_clamp_magic(st, s) > 0)
		fq_close_window(c->P, st, s, c->t);
	else if (fq_occupancy(st, s) == 0)
		fq_reclaim(st, s);
	return 0;
}

static __always_inline __u64 fq_next_end(struct fq_state *st)
{
	return st->win_head == FQ_NONE ? ~0ULL : fq_slot(st, st->win_head)->window_end;
}

/* FlowBcPqp::fill_with_magic: fills slot s up to B and restarts its window. */
static __always_inline void fq_fill_with_magic(const struct fq_params *P, struct fq_state *st, __u32 s, __u64 t)
{
	__u64 magic = P->queue_size_nb - fq_occupancy(st, s);
	fq_add(st, s, magic);
	fq_slot(st, s)->magic_nb = magic;
	st->burst_fills++;
	fq_restart_window(P, st, s, t);
}

/* FlowPqp / FlowBcPqp::on_arrival: -1 to pass, else the drop reason. */
static __always_inline int fq_decide(const struct fq_params *P, struct fq_state *st, const struct rk_pkt *pkt,
				     __u64 now)
{
	__u64 t = now > st->last_ns ? now : st->last_ns;
	if (now > st->last_ns) {
		fq_serve(P, st, rk_sat_mul(P->rate, now - st->last_ns), t);
		st->last_ns = now;
	}
	if (P->burst && fq_next_end(st) <= t) {
		struct fq_ctx c = { .P = P, .st = st, .t = t };
		bpf_loop(FQ_SLOTS + 1, fq_close_due_step, &c, 0);
	}
	__u32 s = fq_slot_of(P, st, pkt->flow);
	struct fq_slot *q = fq_slot(st, s);
	if (P->burst && t >= q->window_end)
		fq_close_window(P, st, s, t);
	__u64 nb = (__u64)pkt->len * NANOS_PER_SEC;
	__u64 occupancy = fq_occupancy(st, s);
	__u64 magic = fq_clamp_magic(st, s); /* PQP's magic stays 0 */
	if (rk_sat_add(occupancy, nb) > P->queue_size_nb)
		return rk_sat_add(occupancy - magic, nb) <= P->queue_size_nb ? RK_DROP_BURST_CONTROL : RK_DROP_OVERLIMIT;
	fq_add(st, s, nb);
	if (!P->burst)
		return -1;
	q->accepted += pkt->len;
	if (magic == 0 && !rk_le_products(q->accepted, THETA_ONE_NB, P->theta_plus, fq_expected(P, st))) /* A > θ+·X */
		fq_fill_with_magic(P, st, s, t);
	return -1;
}

static long fq_clear_table_step(__u64 i, void *data)
{
	struct fq_ctx *c = data;
	((__u64 *)c->st->table)[i & (FQ_TABLE / 4 - 1)] = 0;
	return 0;
}

/* A new aggregate, or a live update to other parameters: its queues start afresh. */
static __always_inline void fq_reset(const struct fq_params *P, struct fq_state *st, __u64 now)
{
	struct fq_ctx c = { .P = P, .st = st };
	bpf_loop(FQ_TABLE / 4, fq_clear_table_step, &c, 0);
	st->last_ns = now;
	st->level = 0;
	st->carry = 0;
	st->heap_len = 0;
	st->slots_used = 0;
	st->free_len = 0;
	st->mapped = 0;
	st->overflow = FQ_NONE;
	st->win_head = FQ_NONE;
	st->win_tail = FQ_NONE;
	st->shape = P->shape;
}

SEC("tc")
int rk_pqp_flows(struct __sk_buff *skb)
{
	__u32 zero = 0;
	struct rk_settings *s = bpf_map_lookup_elem(&rk_settings, &zero);
	struct fq_params *P = bpf_map_lookup_elem(&fq_params, &zero);
	struct rk_pkt pkt = {};
	struct fq_state *st;
	__u64 now;
	int reason;

	if (!s || !P || P->rate == 0 || rk_parse(skb, s, &pkt) < 0)
		return TC_ACT_OK;
	now = rk_now(skb, s);
	st = rk_state_or_insert(&fq_state, &fq_zero, &pkt.agg);
	if (!st)
		return rk_untracked_pass();
	if (rk_lock(&st->lock) < 0)
		return rk_untracked_pass();
	if (st->shape != P->shape)
		fq_reset(P, st, now);
	reason = fq_decide(P, st, &pkt, now);
	rk_count(&st->stats, pkt.len, reason);
	rk_unlock(&st->lock);
	return reason < 0 ? TC_ACT_OK : TC_ACT_SHOT;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
