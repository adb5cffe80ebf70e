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

/* Ends queue q's window at now; removes its magic if it accepted less than θ−·X_i, where X_i is 0
 * while a higher-priority branch holds backlog (BcPqp::close_window). */
static __always_inline void bc_close_window(const struct pq_params *P, struct bcpqp_state *st, __u32 q, __u64 now,
					    const int nested)
{
	struct pq_burst *b = &st->burst.q[QI(q)];
	__u64 magic = rk_min(b->magic_nb, pq_occupancy(P, &st->q, q));
	if (magic > 0 && !(nested && pq_outranked(P, &st->q, q))) {
		__u64 x = bc_expected_g(P, &st->q, &st->burst, q, now);
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

/* What bc_catch_up_step shares with its caller. */
struct bc_ctx {
	const struct pq_params *P;
	struct bcpqp_state *st;
	__u64 now;
};

/* BcPqp::close_magic_windows_at_their_ends, one window end per turn: the phantom service up to
 * the earliest end of a magic window, then that instant's closes. */
static long bc_catch_up_step(__u64 i, void *data)
{
	struct bc_ctx *x = data;
	const struct pq_params *P = x->P;
	struct bcpqp_state *st = x->st;
	__u64 due = st->magic_deadline;
	if (due > x->now)
		return 1;
	if (P->flat_share) {
		pq_advance(P, &st->q, &st->burst, &st->last_ns, due, 0);
		bc_close_magic_windows(P, st, due, 0);
	} else {
		pq_advance(P, &st->q, &st->burst, &st->last_ns, due, 1);
		bc_close_magic_windows(P, st, due, 1);
	}
	return 0;
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
	if (now >= st->magic_deadline) {
		struct bc_ctx x = { .P = P, .st = st, .now = now };
		bpf_loop(RK_CATCH_UP_WINDOWS, bc_catch_up_step, &x, 0);
	}
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
		__u64 x = bc_expected_g(P, &st->q, &st->burst, q, now);
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
