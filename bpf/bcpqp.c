/* SPDX-License-Identifier: (Apache-2.0 OR GPL-2.0) */
/* BC-PQP per aggregate (algorithms.md §3): PQP plus magic-packet burst control, mirroring
 * ratekit_core::bcpqp::BcPqp (docs/bcpqp.md: per-queue windows, magic drains last, X_i from
 * the policy tree, θ± in 2^-16 fixed point compared in exact 128-bit products). */
#include "phantom.h"

struct bcpqp_state {
	__u32 lock; /* rk_lock */
	__u32 _pad;
	__u64 last_ns;
	__u64 shape; /* the params' shape this state was built for; 0: fresh */
	__u64 magic_deadline; /* earliest window end among queues holding magic */
	__u64 burst_fills;
	__u64 magic_removals;
	struct pq_queues q;
	struct pq_bursts burst;
	struct rk_stats stats;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct pq_params);
} bcpqp_params SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, struct rk_agg_key);
	__type(value, struct bcpqp_state);
} bcpqp_state SEC(".maps");


struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct bcpqp_state);
} bcpqp_zero SEC(".maps");

/* A queue's demand per window (nano-bytes): the running window or the last full one, whichever
 * is larger; only the last once the running one ended; nothing after a silent window. */
static __always_inline __u64 bc_demand(const struct pq_burst *b, __u64 t, __u64 window)
{
	__u64 bytes;
	if (t < b->window_end)
		bytes = b->accepted > b->accepted_prev ? b->accepted : b->accepted_prev;
	else if (t < rk_sat_add(b->window_end, window))
		bytes = b->accepted;
	else
		bytes = 0;
	return rk_sat_mul(bytes, NANOS_PER_SEC);
}

/* Σ demand over the queues below `node` (phantom.rs `subtree_demand`; depth ≤ 3). */
__noinline __u64 bc_subtree_demand_g(const struct pq_params *P, const struct bcpqp_state *st, __u32 node, __u64 now)
{
	if (!P || !st)
		return 0;
	const struct pq_node *n = pq_node(P, node);
	if (n->kind == PQ_LEAF)
		return bc_demand(&st->burst.q[QI(n->index)], now, P->window_ns);
	__u64 demand = 0;
	for (__u32 j = 0; j < PQ_CHILDREN && j < n->n_children; j++) {
		const struct pq_node *l = pq_node(P, P->children[SI(n->first_slot + j)]);
		demand = rk_sat_add(demand, bc_demand(&st->burst.q[QI(l->index)], now, P->window_ns));
	}
	return demand;
}

/* X_i = r_i*·T (BcPqp::expected_window_nb via PhantomQueues::expected_share). */
static __always_inline __u64 bc_expected(const struct pq_params *P, const struct bcpqp_state *st, __u32 q,
					 __u64 now, const int nested)
{
	__u32 leaf = P->leaf_of_queue[QI(q)];
	__u32 up = pq_node(P, leaf)->parent;
	__u32 path[PQ_UP_STEPS] = { leaf, up };
	int depth = nested && up != 0 ? 2 : 1;
	__u64 b = P->window_budget_nb;

	for (int k = PQ_UP_STEPS - 1; k >= 0; k--) {
		if (k >= depth)
			continue;
		__u32 child = path[k & 1];
		const struct pq_node *c = pq_node(P, child);
		const struct pq_node *p = pq_node(P, c->parent);
		if (p->kind == PQ_SHARE) {
			__u64 w = c->weight;
			__u64 wsum = st->q.active_weight[II(p->index)] + (pq_node_backlog(P, &st->q, child) == 0 ? w : 0);
			b = b * w / wsum; /* the loader keeps r·T·w below 2^64 */
		} else if (nested) {
			for (__u32 r = 0; r < PQ_CHILDREN && r < c->rank; r++) {
				if (b == 0)
					break;
				__u64 demand = bc_subtree_demand_g(P, st, P->children[SI(p->first_slot + r)], now);
				b = b > demand ? b - demand : 0;
			}
		}
	}
	return b;
}

__noinline __u64 bc_expected_g(const struct pq_params *P, const struct bcpqp_state *st, __u32 q, __u64 now)
{
	if (!P || !st)
		return 0;
	return P->flat_share ? bc_expected(P, st, q, now, 0) : bc_expected(P, st, q, now, 1);
}

/* Ends queue q's window at now; removes its magic if it accepted less than θ−·X_i, where X_i is 0
 * while a higher-priority branch holds backlog (BcPqp::close_window). */
static __always_inline void bc_close_window(const struct pq_params *P, struct bcpqp_state *st, __u32 q, __u64 now,
					    const int nested)
{
	struct pq_burst *b = &st->burst.q[QI(q)];
	__u64 magic = rk_min(b->magic_nb, pq_occupancy(P, &st->q, q));
	if (magic > 0 && !(nested && pq_outranked(P, &st->q, q))) {
		__u64 x = bc_expected_g(P, st, q, now);
		if (!rk_le_products(P->theta_minus, x, b->accepted, THETA_ONE_NB)) { /* A·2^16 < θ−·X */
			pq_remove_g(P, &st->q, &st->burst, q, magic);
			b->magic_nb = 0;
			st->magic_removals++;
		}
	}
	/* a window that ended a whole window ago was idle: its successor accepted nothing */
	b->accepted_prev = now < rk_sat_add(b->window_end, P->window_ns) ? b->accepted : 0;
	b->accepted = 0;
	b->window_end = rk_sat_add(now, P->window_ns);
}

__noinline int bc_close_window_g(const struct pq_params *P, struct bcpqp_state *st, __u32 q, __u64 now)
{
	if (!P || !st)
		return 0;
	if (P->flat_share)
		bc_close_window(P, st, q, now, 0);
	else
		bc_close_window(P, st, q, now, 1);
	return 0;
}

static __always_inline void bc_close_magic_windows(const struct pq_params *P, struct bcpqp_state *st, __u64 now,
						   const int nested)
{
	__u64 next = ~0ULL;
	for (__u32 q = 0; q < PQ_QUEUES && q < P->queues; q++) {
		if (st->burst.q[q].magic_nb == 0)
			continue;
		if (st->burst.q[q].window_end <= now)
			bc_close_window_g(P, st, q, now);
		if (st->burst.q[q].magic_nb > 0)
			next = rk_min(next, st->burst.q[q].window_end);
	}
	st->magic_deadline = next;
}

static __always_inline void bc_fill_with_magic(const struct pq_params *P, struct bcpqp_state *st, __u32 q, __u64 now,
					       const int nested)
{
	__u64 magic = P->queue_size_nb - pq_occupancy(P, &st->q, q);
	pq_add(P, &st->q, &st->burst, q, magic, nested);
	st->burst_fills++;
	struct pq_burst *b = &st->burst.q[QI(q)];
	b->magic_nb = magic;
	b->accepted_prev = b->accepted;
	b->accepted = 0;
	b->window_end = rk_sat_add(now, P->window_ns);
	st->magic_deadline = rk_min(st->magic_deadline, b->window_end);
}

static __always_inline int bcpqp_decide(const struct pq_params *P, struct bcpqp_state *st, const struct rk_pkt *pkt,
					__u64 now, const int nested)
{
	__u32 q = pq_queue_of(P, pkt);
	struct pq_burst *b = &st->burst.q[q];
	pq_advance(P, &st->q, &st->burst, &st->last_ns, now, nested);
	if (now >= st->magic_deadline)
		bc_close_magic_windows(P, st, now, nested);
	if (now >= b->window_end)
		bc_close_window_g(P, st, q, now);
	__u64 nb = (__u64)pkt->len * NANOS_PER_SEC;
	__u64 occ = pq_occupancy(P, &st->q, q);
	__u64 magic = rk_min(b->magic_nb, occ);
	if (rk_sat_add(occ, nb) > P->queue_size_nb)
		return rk_sat_add(occ - magic, nb) <= P->queue_size_nb ? RK_DROP_BURST_CONTROL : RK_DROP_OVERLIMIT;
	pq_add(P, &st->q, &st->burst, q, nb, nested);
	b->accepted += pkt->len;
	if (magic == 0) {
		__u64 x = bc_expected_g(P, st, q, now);
		if (!rk_le_products(b->accepted, THETA_ONE_NB, P->theta_plus, x)) /* A·2^16 > θ+·X */
			bc_fill_with_magic(P, st, q, now, nested);
	}
	return -1;
}

SEC("tc")
int rk_bcpqp(struct __sk_buff *skb)
{
	__u32 zero = 0;
	struct rk_settings *s = bpf_map_lookup_elem(&rk_settings, &zero);
	struct pq_params *P = bpf_map_lookup_elem(&bcpqp_params, &zero);
	struct rk_pkt pkt = {};
	struct bcpqp_state *st;
	__u64 now;
	int reason;

	if (!s || !P || P->rate == 0 || rk_parse(skb, s, &pkt) < 0)
		return TC_ACT_OK;
	now = rk_now(skb, s);
	st = rk_state_or_insert(&bcpqp_state, &bcpqp_zero, &pkt.agg);
	if (!st)
		return rk_untracked_pass();
	if (rk_lock(&st->lock) < 0)
		return rk_untracked_pass();
	if (st->shape != P->shape) {
		/* a new aggregate, or a live update to another tree: start its queues afresh */
		__builtin_memset(&st->q, 0, sizeof(st->q));
		__builtin_memset(&st->burst, 0, sizeof(st->burst));
		st->last_ns = now;
		st->magic_deadline = ~0ULL;
		st->shape = P->shape;
	}
	reason = P->flat_share ? bcpqp_decide(P, st, &pkt, now, 0) : bcpqp_decide(P, st, &pkt, now, 1);
	rk_count(&st->stats, pkt.len, reason);
	rk_unlock(&st->lock);
	return reason < 0 ? TC_ACT_OK : TC_ACT_SHOT;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
