/* SPDX-License-Identifier: (Apache-2.0 OR GPL-2.0) */
/* PQP and BC-PQP over classes of exact per-flow queues (`flows = "exact"`, `classify = "class"`,
 * issue 17 item 1), mirroring ratekit_core::{pqp_class_flows::ClassFlowPqp,
 * bcpqp_class_flows::ClassFlowBcPqp} operation for operation (docs/dataplane.md, "Classes of
 * exact flows"): the class tree is class-queued PQP (phantom.h), whose class queue holds the sum
 * of its flows' occupancies; the flows of a class (flows.h) are served lazily, when the class is
 * next touched, what the tree served the class since (its queue held `synced`, now L_c). Magic
 * enters and leaves a flow's queue and its class's together; X_i = r_c*·T / n_c with r_c*·T the
 * class's expected share by the tree (0 for the θ− test while a higher-priority class holds
 * backlog) and n_c its non-empty flows. A class not in `fair_classes` gives every packet the
 * flow key 0, so its flows share one queue. Bounds: the tree's (PQ_QUEUES classes, depth 3), and
 * at most FQ_MAX_FLOWS flows over the fair classes (loader: fair classes × max_flows). */
#include "phantom.h"
#include "flows.h"

_Static_assert(FQ_CLASSES == PQ_QUEUES, "a class of flows per queue of the tree");

struct cf_params {
	struct fq_params f;
	__u32 fair_mask; /* bit c: class c's flows each get a queue (fair_classes) */
	__u32 _pad;
	__u16 heap_base[FQ_CLASSES]; /* where class c's heap starts: the capacities before it */
	struct pq_params tree;
};

struct cf_state {
	__u32 lock; /* rk_lock */
	__u32 _pad;
	__u64 last_ns;
	__u64 shape; /* 0: fresh */
	struct rk_stats stats;
	struct pq_queues tree;
	struct pq_bursts demand; /* per class: bytes accepted per window (magic_nb unused) */
	struct fq_flows f;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct cf_params);
} cf_params SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	/* 76 KB a value: allocate an aggregate's state at its first packet, not the table up front */
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct rk_agg_key);
	__type(value, struct cf_state);
} cf_state SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct cf_state);
} cf_zero SEC(".maps");

static __always_inline __u64 cf_class_occupancy(const struct cf_params *P, const struct cf_state *st, __u32 c)
{
	return pq_occupancy(&P->tree, &st->tree, c);
}

/* ClassFlows::sync: serves class c's flows what the tree served the class since they were last
 * served. Global: the arrival and the due-window callback call it. */
__noinline int cf_sync(const struct cf_params *P, struct cf_state *st, __u32 c, __u64 t)
{
	if (!P || !st)
		return 0;
	struct fq_class *k = fq_cls(&st->f, c);
	__u64 occupancy = cf_class_occupancy(P, st, c);
	fq_serve(&st->f, c, k->synced - occupancy, t);
	k->synced = occupancy;
	return 0;
}

/* ClassFlows::add: nb admitted at one of class c's flows (a packet or magic) into its queue. */
__noinline int cf_tree_add(const struct cf_params *P, struct cf_state *st, __u32 c, __u64 nb)
{
	if (!P || !st)
		return 0;
	if (P->tree.flat_share)
		pq_add(&P->tree, &st->tree, NULL, c, nb, 0);
	else
		pq_add(&P->tree, &st->tree, NULL, c, nb, 1);
	fq_cls(&st->f, c)->synced = cf_class_occupancy(P, st, c);
	return 0;
}

/* X_i of class c's flows at t: its expected share of r·T over its non-empty flows; for the θ−
 * test (`removing`) the share is 0 while a higher-priority class holds backlog. */
static __always_inline __u64 cf_expected(const struct cf_params *P, struct cf_state *st, __u32 c, __u64 t,
					 int removing)
{
	__u64 share = 0;
	if (!(removing && !P->tree.flat_share && pq_outranked(&P->tree, &st->tree, c)))
		share = bc_expected_g(&P->tree, &st->tree, &st->demand, c, t);
	__u32 n = fq_cls(&st->f, c)->heap_len;
	return share / (n > 0 ? n : 1);
}

/* ClassFlowBcPqp::close_window: the flow's magic leaves its class's queue with it. */
__noinline int cf_close_window(const struct cf_params *P, struct cf_state *st, __u32 s, __u64 t)
{
	if (!P || !st)
		return 0;
	__u32 c = fq_slot(&st->f, s)->cls;
	__u64 removed = fq_close_window(&P->f, &st->f, s, t, cf_expected(P, st, c, t, 1));
	if (removed) {
		pq_remove_g(&P->tree, &st->tree, NULL, c, removed);
		fq_cls(&st->f, c)->synced = cf_class_occupancy(P, st, c);
	}
	return 0;
}

/* The first window on the list if it is due at t, after its class's flows are served: closes
 * it if it holds magic, reclaims a drained flow, or leaves the window to close at the flow's next
 * arrival; 1 if none is due. */
static __always_inline long cf_close_first_due(const struct cf_params *P, struct cf_state *st, __u64 t)
{
	struct fq_flows *f = &st->f;
	__u32 s = f->win_head;
	if (s == FQ_NONE)
		return 1;
	struct fq_slot *q = fq_slot(f, s);
	__u64 end = q->window_end;
	if (end > t)
		return 1;
	__u32 c = q->cls;
	fq_unlist(f, s);
	cf_sync(P, st, c, t);
	if (q->window_end != end)
		return 0; /* reclaimed by that service: drained, and its window has ended */
	if (fq_clamp_magic(f, c, s) > 0)
		cf_close_window(P, st, s, t);
	else if (fq_occupancy(f, c, s) == 0)
		fq_reclaim(f, s);
	return 0;
}

/* One due window, in order of end, closed at x->t. */
static long cf_close_due_step(__u64 i, void *data)
{
	struct fq_ctx *x = data;
	return cf_close_first_due(x->P, x->st, x->t);
}

/* ClassFlowBcPqp::close_windows_at_their_ends, one window per turn: the class tree's service up
 * to the end of the first window on the list, if it ended by x->t, then its close at that end. */
static long cf_catch_up_step(__u64 i, void *data)
{
	struct fq_ctx *x = data;
	const struct cf_params *P = x->P;
	struct cf_state *st = x->st;
	struct fq_flows *f = &st->f;
	if (f->win_head == FQ_NONE)
		return 1;
	__u64 end = fq_slot(f, f->win_head)->window_end;
	if (end > x->t)
		return 1;
	if (P->tree.flat_share)
		pq_advance(&P->tree, &st->tree, NULL, &st->last_ns, end, 0);
	else
		pq_advance(&P->tree, &st->tree, NULL, &st->last_ns, end, 1);
	cf_close_first_due(P, st, st->last_ns);
	return 0;
}

/* ClassFlowPqp / ClassFlowBcPqp::on_arrival: -1 to pass, else the drop reason. */
static __always_inline int cf_decide(const struct cf_params *P, struct cf_state *st, const struct rk_pkt *pkt,
				     __u64 now)
{
	struct fq_flows *f = &st->f;
	__u32 c = pq_queue_of(&P->tree, pkt);
	if (P->f.burst && fq_next_end(f) <= now) {
		struct fq_ctx x = { .P = P, .st = st, .t = now };
		bpf_loop(RK_CATCH_UP_WINDOWS, cf_catch_up_step, &x, 0);
	}
	__u64 t = now > st->last_ns ? now : st->last_ns;
	if (P->tree.flat_share)
		pq_advance(&P->tree, &st->tree, NULL, &st->last_ns, now, 0);
	else
		pq_advance(&P->tree, &st->tree, NULL, &st->last_ns, now, 1);
	if (P->f.burst && fq_next_end(f) <= t) {
		struct fq_ctx x = { .P = P, .st = st, .t = t };
		bpf_loop(FQ_SLOTS + 1, cf_close_due_step, &x, 0);
	}
	cf_sync(P, st, c, t);
	__u64 flow = (P->fair_mask >> c) & 1 ? pkt->flow : 0;
	__u32 s = fq_slot_of(&P->f, f, c, flow);
	if (P->f.burst && t >= fq_slot(f, s)->window_end)
		cf_close_window(P, st, s, t);
	__u64 magic;
	int reason = fq_admit(&P->f, f, c, s, pkt->len, &magic);
	if (reason >= 0)
		return reason;
	cf_tree_add(P, st, c, (__u64)pkt->len * NANOS_PER_SEC);
	if (!P->f.burst)
		return -1;
	struct pq_burst *d = &st->demand.q[QI(c)];
	if (t >= d->window_end) {
		/* BurstState::restart_window: a window that ended a whole window ago was idle */
		d->accepted_prev = t < rk_sat_add(d->window_end, P->f.window_ns) ? d->accepted : 0;
		d->accepted = 0;
		d->window_end = rk_sat_add(t, P->f.window_ns);
	}
	d->accepted += pkt->len;
	if (magic == 0 && !rk_le_products(fq_slot(f, s)->accepted, THETA_ONE_NB, P->f.theta_plus, cf_expected(P, st, c, t, 0)))
		cf_tree_add(P, st, c, fq_fill_with_magic(&P->f, f, c, s, t));
	return -1;
}

SEC("tc")
int rk_pqp_class_flows(struct __sk_buff *skb)
{
	__u32 zero = 0;
	struct rk_settings *s = bpf_map_lookup_elem(&rk_settings, &zero);
	struct cf_params *P = bpf_map_lookup_elem(&cf_params, &zero);
	struct rk_pkt pkt = {};
	struct cf_state *st;
	__u64 now;
	int reason;

	if (!s || !P || P->f.rate == 0 || rk_parse(skb, s, &pkt) < 0)
		return TC_ACT_OK;
	now = rk_now(skb, s);
	st = rk_state_or_insert(&cf_state, &cf_zero, &pkt.agg);
	if (!st)
		return rk_untracked_pass();
	if (rk_lock(&st->lock) < 0)
		return rk_untracked_pass();
	if (st->shape != P->f.shape) {
		/* a new aggregate, or a live update to another tree or flow bound: start afresh */
		__builtin_memset(&st->tree, 0, sizeof(st->tree));
		__builtin_memset(&st->demand, 0, sizeof(st->demand));
		fq_reset(&st->f, P->heap_base);
		st->last_ns = now;
		st->shape = P->f.shape;
	}
	reason = cf_decide(P, st, &pkt, now);
	rk_count(&st->stats, pkt.len, reason);
	rk_unlock(&st->lock);
	return reason < 0 ? TC_ACT_OK : TC_ACT_SHOT;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
