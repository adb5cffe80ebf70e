/* SPDX-License-Identifier: (Apache-2.0 OR GPL-2.0) */
/* PQP per aggregate (algorithms.md §2): N phantom queues served at the aggregate rate by the
 * policy tree; a packet passes iff its queue has room. Mirrors ratekit_core::pqp::Pqp. */
#include "phantom.h"

struct pqp_state {
	__u32 lock; /* rk_lock */
	__u32 _pad;
	__u64 last_ns;
	__u64 shape; /* the params' shape this state was built for; 0: fresh */
	struct pq_queues q;
	struct rk_stats stats;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct pq_params);
} pqp_params SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, struct rk_agg_key);
	__type(value, struct pqp_state);
} pqp_state SEC(".maps");


struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct pqp_state);
} pqp_zero SEC(".maps");

static __always_inline int pqp_decide(const struct pq_params *P, struct pqp_state *st, const struct rk_pkt *pkt,
				      __u64 now, const int nested)
{
	__u32 q = pq_queue_of(P, pkt);
	pq_advance(P, &st->q, 0, &st->last_ns, now, nested);
	__u64 nb = rk_sat_mul(pkt->len, NANOS_PER_SEC);
	if (rk_sat_add(pq_occupancy(P, &st->q, q), nb) > P->queue_size_nb)
		return RK_DROP_OVERLIMIT;
	pq_add(P, &st->q, 0, q, nb, nested);
	return -1;
}

SEC("tc")
int rk_pqp(struct __sk_buff *skb)
{
	__u32 zero = 0;
	struct rk_settings *s = bpf_map_lookup_elem(&rk_settings, &zero);
	struct pq_params *P = bpf_map_lookup_elem(&pqp_params, &zero);
	struct rk_pkt pkt = {};
	struct pqp_state *st;
	__u64 now;
	int reason;

	if (!s || !P || P->rate == 0 || rk_parse(skb, s, &pkt) < 0)
		return TC_ACT_OK;
	now = rk_now(skb, s);
	st = rk_state_or_insert(&pqp_state, &pqp_zero, &pkt.agg);
	if (!st)
		return rk_untracked_pass();
	if (rk_lock(&st->lock) < 0)
		return rk_untracked_pass();
	if (st->shape != P->shape) {
		/* a new aggregate, or a live update to another tree: start its queues afresh */
		__builtin_memset(&st->q, 0, sizeof(st->q));
		st->last_ns = now;
		st->shape = P->shape;
	}
	reason = P->flat_share ? pqp_decide(P, st, &pkt, now, 0) : pqp_decide(P, st, &pkt, now, 1);
	rk_count(&st->stats, pkt.len, reason);
	rk_unlock(&st->lock);
	return reason < 0 ? TC_ACT_OK : TC_ACT_SHOT;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
