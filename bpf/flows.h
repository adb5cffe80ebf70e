/* SPDX-License-Identifier: (Apache-2.0 OR GPL-2.0) */
/* Exact per-flow phantom queues (`flows = "exact"`, issue 17), mirroring
 * ratekit_core::phantom::FlowQueues and the per-flow half of burst control (bcpqp_flows.rs)
 * operation for operation, so that the same arrivals give the same verdicts and occupancies
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
 * Classes (pqp_class_flows.c): the flows of each class are one FlowQueues of the core, with its
 * own level, carry and heap (struct fq_class); slots, the flow table, the free stack and the
 * window list are one pool per aggregate. A class's heap is the range [heap_base, heap_base +
 * its capacity) of `heap`, so the ranges never overlap. The flat program (pqp_flows.c) is class 0.
 *
 * The flow → slot lookup is an open-addressing table inside the aggregate's value (linear
 * probing, backward-shift deletion, load ≤ 1/2), keyed by (flow, class), not a BPF hash map: it
 * lives under the aggregate's rk_lock with the slots it points to, so lookup, insertion and
 * reclaim are one critical section; a probe is a load or two in the value's cache lines instead
 * of a helper call with jhash; it needs no map sized for every aggregate's flows at once, and a
 * reset clears it with the rest of the state.
 *
 * Bounds (checked by the loader, crates/dataplane/src/bpf.rs): at most FQ_MAX_FLOWS flows in the
 * classes' tables together; every loop is bounded by what the structure can hold (heap depth,
 * FQ_SLOTS, probe length ≤ entries). Every struct is mirrored in crates/dataplane/src/maps.rs
 * with a compile-time size check. */
#ifndef RATEKIT_FLOWS_H
#define RATEKIT_FLOWS_H

#include "common.h"

#define FQ_MAX_FLOWS 1024
#define FQ_CLASSES 16
#define FQ_SLOTS (FQ_MAX_FLOWS + FQ_CLASSES) /* the flows' queues, and an overflow queue per class */
#define FQ_SLOTS_PADDED 1040                 /* u16 arrays of FQ_SLOTS, rounded to 8 bytes */
#define FQ_TABLE 2048                        /* ≥ 2·FQ_SLOTS: short probes */
#define FQ_NONE 0xffffffffU
#define FQ_HEAP_DEPTH 11 /* levels of a binary heap of FQ_SLOTS entries */
/* The level is rebased to 0 past this, so that level + a queue (≤ 16 GiB in nano-bytes) fits. */
#define FQ_REBASE_AT (1ULL << 60)

/* One entry (key 0) in `fq_params`; the first member of the class program's params. */
struct fq_params {
	__u64 rate;          /* bytes per second */
	__u64 queue_size_nb; /* B per flow, nano-bytes */
	/* BC-PQP only */
	__u64 theta_plus;       /* θ+ · 2^16 */
	__u64 theta_minus;      /* θ− · 2^16 */
	__u64 window_ns;        /* T */
	__u64 window_budget_nb; /* r·T */
	__u64 shape; /* state kept under another shape is reset (its counters kept) */
	__u32 max_flows; /* per class */
	__u32 burst; /* 1: BC-PQP's burst control; 0: PQP */
};

/* FlowQueues' Slot with FlowBurst as its data. */
struct fq_slot {
	__u64 flow;
	__u64 finish;     /* its class's level at which the queue is empty, nano-bytes */
	__u64 key;        /* heap key, ≤ finish while in the heap */
	__u64 magic_nb;   /* clamped to the occupancy when the queue is touched */
	__u64 accepted;   /* A_i, bytes */
	__u64 window_end; /* 0: no window ran */
	__u32 pos;        /* position in its class's heap, FQ_NONE while empty */
	__u32 prev;       /* the window list, in order of end */
	__u32 next;
	__u16 listed;
	__u16 cls;
};

/* The per-class part of one FlowQueues. */
struct fq_class {
	__u64 level; /* virtual time: service every non-empty queue has had, nano-bytes */
	__u64 carry; /* service that did not divide among the queues, owed to the next batch */
	__u64 synced; /* class program: the class queue's occupancy when its flows were last served */
	__u32 heap_len;
	__u32 heap_base;
	__u32 mapped;   /* flows in the table */
	__u32 overflow; /* the overflow queue's slot, FQ_NONE while none */
};

struct fq_flows {
	__u64 burst_fills;
	__u64 magic_removals;
	__u64 flows_created;
	__u64 flows_reclaimed;
	__u64 overflow_packets;
	__u32 slots_used; /* slots ever handed out: the next fresh one */
	__u32 free_len;
	__u32 win_head;
	__u32 win_tail;
	__u32 cursor; /* the heap walks' position, kept here for the verifier (fq_walk_to) */
	__u32 _pad;
	struct fq_class cls[FQ_CLASSES];
	__u16 heap[FQ_SLOTS_PADDED];
	__u16 free[FQ_SLOTS_PADDED]; /* a stack, as the core's Vec */
	__u16 table[FQ_TABLE];       /* slot + 1; 0: empty */
	struct fq_slot slots[FQ_SLOTS];
};

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

static __always_inline struct fq_slot *fq_slot(struct fq_flows *st, __u32 s)
{
	return &st->slots[fq_ix(s)];
}

static __always_inline struct fq_class *fq_cls(struct fq_flows *st, __u32 c)
{
	return &st->cls[c & (FQ_CLASSES - 1)];
}

/* The heap entry at position i of class c's heap. */
static __always_inline __u16 *fq_heap_at(struct fq_flows *st, __u32 c, __u32 i)
{
	return &st->heap[fq_ix(fq_cls(st, c)->heap_base + i)];
}

static __always_inline __u64 fq_key_at(struct fq_flows *st, __u32 c, __u32 i)
{
	return fq_slot(st, *fq_heap_at(st, c, i))->key;
}

static __always_inline void fq_place(struct fq_flows *st, __u32 c, __u32 i, __u32 s)
{
	*fq_heap_at(st, c, i) = s;
	fq_slot(st, s)->pos = i;
}

/* Moves a heap walk's cursor to heap position i. Through the state, read back as any value and
 * clamped: every path then reaches the loop head with one range, and the verifier's pruning
 * keeps the walk linear in its depth (in registers, each path's range differs and the paths
 * multiply level by level). */
static __always_inline __u32 fq_walk_to(struct fq_flows *st, __u32 i)
{
	st->cursor = i;
	return fq_ix(*(volatile __u32 *)&st->cursor);
}

/* Global: verified once, whatever the number of call sites. */
__noinline int fq_sift_up(struct fq_flows *st, __u32 c, __u32 i)
{
	if (!st)
		return 0;
	__u32 s = *fq_heap_at(st, c, i);
	__u64 key = fq_slot(st, s)->key;
	for (int k = 0; k < FQ_HEAP_DEPTH && i > 0; k++) {
		__u32 parent = (i - 1) / 2;
		if (fq_key_at(st, c, parent) <= key)
			break;
		fq_place(st, c, i, *fq_heap_at(st, c, parent));
		i = fq_walk_to(st, parent);
	}
	fq_place(st, c, i, s);
	return 0;
}

__noinline int fq_sift_down(struct fq_flows *st, __u32 c, __u32 i)
{
	if (!st)
		return 0;
	__u32 s = *fq_heap_at(st, c, i);
	__u64 key = fq_slot(st, s)->key;
	for (int k = 0; k < FQ_HEAP_DEPTH; k++) {
		__u32 n = *(volatile __u32 *)&fq_cls(st, c)->heap_len; /* fresh: see fq_walk_to */
		__u32 left = 2 * i + 1, child = left;
		if (left >= n)
			break;
		if (left + 1 < n && fq_key_at(st, c, left + 1) < fq_key_at(st, c, left))
			child = left + 1;
		if (fq_key_at(st, c, child) >= key)
			break;
		fq_place(st, c, i, *fq_heap_at(st, c, child));
		i = fq_walk_to(st, child);
	}
	fq_place(st, c, i, s);
	return 0;
}

/* Takes the i-th entry out of class c's heap (its slot's pos becomes FQ_NONE). */
static __always_inline void fq_heap_remove(struct fq_flows *st, __u32 c, __u32 i)
{
	fq_slot(st, *fq_heap_at(st, c, i))->pos = FQ_NONE;
	__u32 n = --fq_cls(st, c)->heap_len;
	__u32 last = *fq_heap_at(st, c, n);
	if (i < n) {
		fq_place(st, c, i, last);
		/* the moved entry may belong above or below i */
		fq_sift_up(st, c, i);
		fq_sift_down(st, c, fq_slot(st, last)->pos);
	}
}

static __always_inline __u64 fq_occupancy(struct fq_flows *st, __u32 c, __u32 s)
{
	struct fq_slot *q = fq_slot(st, s);
	return q->pos == FQ_NONE ? 0 : q->finish - fq_cls(st, c)->level;
}

/* FlowQueues::add: nb nano-bytes into slot s of class c (a packet, or magic). */
static __always_inline void fq_add(struct fq_flows *st, __u32 c, __u32 s, __u64 nb)
{
	struct fq_slot *q = fq_slot(st, s);
	struct fq_class *k = fq_cls(st, c);
	if (q->pos != FQ_NONE) {
		q->finish = rk_sat_add(q->finish, nb);
		return;
	}
	q->finish = rk_sat_add(k->level, nb);
	q->key = q->finish;
	__u32 n = k->heap_len++;
	fq_place(st, c, n, s);
	fq_sift_up(st, c, n);
}

/* FlowQueues::remove: nb ≤ occupancy out of slot s of class c unserved (magic removal). */
static __always_inline void fq_remove(struct fq_flows *st, __u32 c, __u32 s, __u64 nb)
{
	struct fq_slot *q = fq_slot(st, s);
	q->finish = q->finish > nb ? q->finish - nb : 0;
	if (q->finish <= fq_cls(st, c)->level) {
		fq_heap_remove(st, c, q->pos);
	} else if (q->key > q->finish) {
		q->key = q->finish;
		fq_sift_up(st, c, q->pos);
	}
}

/* Class 0's home is the flat program's: flow ^ flow >> 32. */
static __always_inline __u32 fq_home(__u64 flow, __u32 c)
{
	return (flow ^ (flow >> 32) ^ (c * 0x9e3779b1U)) & (FQ_TABLE - 1);
}

/* The table index holding (flow, c), or the empty one where its probe ends (where it goes). The
 * probe ends within FQ_SLOTS steps: a run holds at most the mapped flows, fewer than FQ_SLOTS. */
__noinline int fq_probe(const struct fq_flows *st, __u64 flow, __u32 c)
{
	if (!st)
		return 0;
	__u32 h = fq_home(flow, c);
	for (int k = 0; k < FQ_SLOTS; k++) {
		__u32 e = st->table[h];
		if (e == 0)
			break;
		const struct fq_slot *q = &st->slots[fq_ix(e - 1)];
		if (q->flow == flow && q->cls == c)
			break;
		h = (h + 1) & (FQ_TABLE - 1);
	}
	return h;
}

/* Empties table index i and shifts back the entries of its run that may fill the hole (Knuth's
 * Algorithm R): lookups stay as short as the load allows, with no tombstones to pile up. */
__noinline int fq_unmap_at(struct fq_flows *st, __u32 i)
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
		const struct fq_slot *q = &st->slots[fq_ix(e - 1)];
		__u32 home = fq_home(q->flow, q->cls);
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
static __always_inline void fq_unlist(struct fq_flows *st, __u32 s)
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

static __always_inline void fq_list_last(struct fq_flows *st, __u32 s)
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
static __always_inline void fq_reclaim(struct fq_flows *st, __u32 s)
{
	struct fq_slot *q = fq_slot(st, s);
	struct fq_class *k = fq_cls(st, q->cls);
	if (s == k->overflow) {
		k->overflow = FQ_NONE;
	} else {
		fq_unmap_at(st, fq_probe(st, q->flow, q->cls));
		k->mapped--;
	}
	fq_unlist(st, s);
	q->magic_nb = 0;
	q->accepted = 0;
	q->window_end = 0;
	st->free[fq_ix(st->free_len)] = s;
	st->free_len++;
	st->flows_reclaimed++;
}

static __always_inline __u32 fq_take_slot(struct fq_flows *st, __u32 c, __u64 flow)
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
	q->cls = c;
	return s;
}

/* FlowQueues::slot: the flow's slot in class c, created if it has none; the class's overflow
 * queue if max_flows of its flows hold one. */
static __always_inline __u32 fq_slot_of(const struct fq_params *P, struct fq_flows *st, __u32 c, __u64 flow)
{
	struct fq_class *k = fq_cls(st, c);
	__u32 at = fq_probe(st, flow, c) & (FQ_TABLE - 1);
	__u32 e = st->table[at];
	if (e)
		return e - 1;
	if (k->mapped >= P->max_flows) {
		st->overflow_packets++;
		if (k->overflow == FQ_NONE)
			k->overflow = fq_take_slot(st, c, flow);
		return k->overflow;
	}
	__u32 s = fq_take_slot(st, c, flow);
	st->table[at] = s + 1;
	k->mapped++;
	return s;
}

/* What the bpf_loop callbacks share with their caller. */
struct fq_ctx {
	const void *P; /* the program's params */
	void *st;      /* the program's state */
	struct fq_flows *f;
	__u64 t;
	__u64 budget; /* fq_serve_step: service left to hand out */
	__u32 c;
};

static long fq_rebase_step(__u64 i, void *data)
{
	struct fq_ctx *x = data;
	struct fq_flows *st = x->f;
	struct fq_class *k = fq_cls(st, x->c);
	if (i >= k->heap_len)
		return 1;
	struct fq_slot *q = fq_slot(st, *fq_heap_at(st, x->c, i));
	q->finish -= k->level;
	q->key -= k->level;
	return 0;
}

/* One turn of FlowQueues::serve: 1 once the budget is spread over the queues left. */
static long fq_serve_step(__u64 i, void *data)
{
	struct fq_ctx *x = data;
	struct fq_flows *st = x->f;
	__u32 c = x->c;
	struct fq_class *k = fq_cls(st, c);
	__u32 n = k->heap_len;
	if (n == 0) {
		/* idle: service is lost, as the shaper's link idles; the level restarts */
		k->carry = 0;
		k->level = 0;
		return 1;
	}
	__u32 top = *fq_heap_at(st, c, 0);
	struct fq_slot *q = fq_slot(st, top);
	__u64 reach = q->key - k->level;
	/* the common case: nobody reaches its key, every queue gets an equal part */
	if (x->budget / n < reach) {
		__u64 part = x->budget / n;
		k->level += part;
		k->carry = x->budget - part * n;
		if (k->level > FQ_REBASE_AT) {
			bpf_loop(FQ_SLOTS, fq_rebase_step, x, 0);
			k->level = 0;
		}
		return 1;
	}
	x->budget -= reach * n; /* budget ≥ reach·n here: no overflow */
	k->level = q->key;
	if (q->finish > k->level) {
		q->key = q->finish;
		fq_sift_down(st, c, 0);
		return 0;
	}
	fq_heap_remove(st, c, 0);
	/* drained: PQP forgets the flow (its window_end is 0); BC-PQP once its window has ended */
	q->magic_nb = 0;
	if (x->t >= q->window_end)
		fq_reclaim(st, top);
	return 0;
}

/* Serves class c's flows `budget` nano-bytes fairly. Each turn empties or re-keys a queue, at
 * most once each per call, so 2·FQ_SLOTS + 1 turns always finish; the first turn runs inline,
 * since most packets empty no queue. */
static __always_inline void fq_serve(struct fq_flows *st, __u32 c, __u64 budget, __u64 t)
{
	struct fq_ctx x = { .f = st, .t = t, .c = c, .budget = rk_sat_add(budget, fq_cls(st, c)->carry) };
	if (fq_serve_step(0, &x) == 0)
		bpf_loop(2 * FQ_SLOTS + 1, fq_serve_step, &x, 0);
}

/* Slot s's magic, clamped to its occupancy (and stored so: magic drains last). */
static __always_inline __u64 fq_clamp_magic(struct fq_flows *st, __u32 c, __u32 s)
{
	struct fq_slot *q = fq_slot(st, s);
	__u64 occupancy = fq_occupancy(st, c, s);
	if (q->magic_nb > occupancy)
		q->magic_nb = occupancy;
	return q->magic_nb;
}

static __always_inline void fq_restart_window(const struct fq_params *P, struct fq_flows *st, __u32 s, __u64 t)
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

/* FlowBcPqp::close_window for slot s at t, X_i = x: removes the magic if A_i < θ−·X_i, then
 * restarts the window; the magic removed (nano-bytes), which a class queue also gives up. Global:
 * the arrival and the due-window callback call it, and it is verified once for both. */
__noinline __u64 fq_close_window(const struct fq_params *P, struct fq_flows *st, __u32 s, __u64 t, __u64 x)
{
	if (!P || !st)
		return 0;
	struct fq_slot *q = fq_slot(st, s);
	__u32 c = q->cls;
	__u64 magic = fq_clamp_magic(st, c, s), removed = 0;
	if (magic > 0 && !rk_le_products(P->theta_minus, x, q->accepted, THETA_ONE_NB)) {
		fq_remove(st, c, s, magic);
		q->magic_nb = 0;
		st->magic_removals++;
		removed = magic;
	}
	fq_restart_window(P, st, s, t);
	return removed;
}

/* The end of the first window on the list (~0: none). */
static __always_inline __u64 fq_next_end(struct fq_flows *st)
{
	return st->win_head == FQ_NONE ? ~0ULL : fq_slot(st, st->win_head)->window_end;
}

/* The core's FlowPqp<FlowBurst>::fill_with_magic: fills slot s of class c up to B and restarts
 * its window; the magic added. */
static __always_inline __u64 fq_fill_with_magic(const struct fq_params *P, struct fq_flows *st, __u32 c, __u32 s,
						 __u64 t)
{
	__u64 magic = P->queue_size_nb - fq_occupancy(st, c, s);
	fq_add(st, c, s, magic);
	fq_slot(st, s)->magic_nb = magic;
	st->burst_fills++;
	fq_restart_window(P, st, s, t);
	return magic;
}

/* FlowPqp::admit (admit_in_window under BC-PQP, whose window the caller has restarted if it
 * ended): -1 if the packet fits under B and is added, else the drop reason. *magic: M_i clamped. */
static __always_inline int fq_admit(const struct fq_params *P, struct fq_flows *st, __u32 c, __u32 s, __u32 len,
				    __u64 *magic)
{
	__u64 nb = (__u64)len * NANOS_PER_SEC;
	__u64 occupancy = fq_occupancy(st, c, s);
	*magic = fq_clamp_magic(st, c, s); /* PQP's magic stays 0 */
	if (rk_sat_add(occupancy, nb) > P->queue_size_nb)
		return rk_sat_add(occupancy - *magic, nb) <= P->queue_size_nb ? RK_DROP_BURST_CONTROL : RK_DROP_OVERLIMIT;
	fq_add(st, c, s, nb);
	fq_slot(st, s)->accepted += len;
	return -1;
}

static long fq_clear_table_step(__u64 i, void *data)
{
	struct fq_ctx *x = data;
	((__u64 *)x->f->table)[i & (FQ_TABLE / 4 - 1)] = 0;
	return 0;
}

/* A new aggregate, or a live update to other parameters: its queues start afresh (the counters
 * are kept). Class c's heap starts at heap_base[c]. */
static __always_inline void fq_reset(struct fq_flows *st, const __u16 *heap_base)
{
	struct fq_ctx x = { .f = st };
	bpf_loop(FQ_TABLE / 4, fq_clear_table_step, &x, 0);
	for (__u32 c = 0; c < FQ_CLASSES; c++) {
		struct fq_class *k = &st->cls[c];
		k->level = 0;
		k->carry = 0;
		k->synced = 0;
		k->heap_len = 0;
		k->heap_base = heap_base ? heap_base[c] : 0;
		k->mapped = 0;
		k->overflow = FQ_NONE;
	}
	st->slots_used = 0;
	st->free_len = 0;
	st->win_head = FQ_NONE;
	st->win_tail = FQ_NONE;
}

#endif
