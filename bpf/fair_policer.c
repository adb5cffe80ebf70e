/* SPDX-License-Identifier: (Apache-2.0 OR GPL-2.0) */
/* FairPolicer per aggregate (algorithms.md §4; 001 §IV, weighted: 000 §6.4.2), mirroring
 * ratekit_core::fair_policer and ratekit_core::count_min bit for bit: one global bucket B
 * filled at R, each flow's occupied tokens in a count-min sketch (Dietzfelbinger's
 * multiply-add-shift columns from the same per-row constants), Σ o_i exact beside it, pass iff
 * B − Σ o_i ≥ l and ô_i < B − Σ o_i, generated tokens handed round robin (token_unit × weight a
 * turn, no token wasted) to the flows on the active list, lazily on arrival.
 *
 * Bounds of the data-plane version (checked by the loader, crates/dataplane/src/bpf.rs):
 * sketch depth ≤ FP_DEPTH, width ≤ FP_WIDTH; the active list holds at most FP_ACTIVE flows (the
 * core's is unbounded): a packet that would have to join a full list is dropped as overlimit,
 * so no flow ever holds tokens without being on the list; FP_ACTIVE·(B/unit + 1) ≤ FP_STEPS, so
 * the allocation loop (bpf_loop, whose cap is FP_STEPS) always runs to the core's end.
 *
 * Verifier: every loop is a bpf_loop callback, verified once however many turns it takes; the
 * state (70 KB, too large for the stack) is locked with rk_lock, since bpf_loop callbacks may not
 * run under a bpf_spin_lock. Every struct is mirrored in crates/dataplane/src/maps.rs. */
#include "common.h"

#define FP_DEPTH 4
#define FP_WIDTH 4096
#define FP_ACTIVE 256
#define FP_CLASSES 64 /* DSCP: the class the data plane sees */
#define FP_STEPS (1U << 23) /* bpf_loop's largest count */

/* One entry (key 0) in `fp_params`. */
struct fp_params {
	__u64 rate;   /* bytes per second */
	__u64 bucket; /* B, bytes (≤ 2^32 − 1) */
	__u64 unit;   /* token_unit, bytes */
	__u64 row_a[FP_DEPTH]; /* count_min::row_constants */
	__u64 row_b[FP_DEPTH];
	/* Identifies sketch shape, seed and bucket: state kept under another shape is reset (its
	 * counters kept), so a live rate, unit or weight change keeps the flows' tokens. */
	__u64 shape;
	__u32 depth;
	__u32 shift; /* 64 − log2(width) */
	__u32 weights[FP_CLASSES]; /* 1 for the plain FairPolicer and for classes beyond the list */
};

struct fp_flow {
	__u64 flow;    /* rk_flow_hash */
	__u64 quantum; /* unit × weight, bytes per turn */
};

struct fp_state {
	__u32 lock; /* rk_lock */
	__u32 _pad;
	__u64 last_ns;
	__u64 shape;
	__u64 credit_nb; /* generated tokens not yet handed out, nano-bytes */
	__u64 occupied;  /* Σ o_i, bytes */
	__u64 owed;      /* residue no flow holds, not yet paid by credit (fair_policer.rs) */
	__u32 head;      /* the active list: a ring of `len` flows from `head` */
	__u32 len;
	__u64 allocation_steps;
	__u64 residue_clears;
	__u64 residue_bytes;
	__u64 list_full_drops; /* packets dropped because the list held FP_ACTIVE flows */
	struct rk_stats stats;
	struct fp_flow active[FP_ACTIVE];
	__u32 sketch[FP_DEPTH * FP_WIDTH]; /* row r, column c at r·FP_WIDTH + c */
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct fp_params);
} fp_params SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	/* 70 KB a value: allocate an aggregate's state at its first packet, not the table up front */
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct rk_agg_key);
	__type(value, struct fp_state);
} fp_state SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct fp_state);
} fp_zero SEC(".maps");

/* What the bpf_loop callbacks share with their caller. */
struct fp_ctx {
	const struct fp_params *P;
	struct fp_state *st;
	__u64 flow;
	__u32 found;   /* fp_find: the flow is on the list */
	__u32 emptied; /* fp_step: the list ran empty */
};

/* The flow's column in each row; the mask only proves the bound (the loader keeps shift ≥ 52). */
static __always_inline void fp_columns(const struct fp_params *P, __u64 flow, __u32 idx[FP_DEPTH])
{
#pragma unroll
	for (int r = 0; r < FP_DEPTH; r++)
		idx[r] = r * FP_WIDTH + (((P->row_a[r] * flow + P->row_b[r]) >> (P->shift & 63)) & (FP_WIDTH - 1));
}

/* count_min::estimate: the smallest of the flow's counters. */
static __always_inline __u32 fp_estimate(const struct fp_params *P, const struct fp_state *st, const __u32 idx[FP_DEPTH])
{
	__u32 min = ~0U;
#pragma unroll
	for (int r = 0; r < FP_DEPTH; r++) {
		__u32 c = st->sketch[idx[r] & (FP_DEPTH * FP_WIDTH - 1)];
		if (r < P->depth && c < min)
			min = c;
	}
	return min;
}

/* One turn of State::allocate's loop; returns 1 to stop. */
static long fp_step(__u64 i, void *data)
{
	struct fp_ctx *c = data;
	const struct fp_params *P = c->P;
	struct fp_state *st = c->st;
	struct fp_flow head;
	__u32 idx[FP_DEPTH];
	__u64 held, give, cost;

	if (st->len == 0) {
		c->emptied = 1;
		return 1;
	}
	head = st->active[st->head & (FP_ACTIVE - 1)];
	fp_columns(P, head.flow, idx);
	held = fp_estimate(P, st, idx);
	give = head.quantum < held ? head.quantum : held;
	cost = give * NANOS_PER_SEC; /* give ≤ 2^32 − 1: no overflow */
	if (cost > st->credit_nb)
		return 1;
	st->credit_nb -= cost;
	st->allocation_steps++;
#pragma unroll
	for (int r = 0; r < FP_DEPTH; r++) {
		__u32 *ctr = &st->sketch[idx[r] & (FP_DEPTH * FP_WIDTH - 1)];
		if (r < P->depth)
			*ctr = *ctr > give ? *ctr - (__u32)give : 0;
	}
	st->occupied = st->occupied > give ? st->occupied - give : 0;
	st->head = (st->head + 1) & (FP_ACTIVE - 1);
	st->len--;
	if (held > give) {
		st->active[(st->head + st->len) & (FP_ACTIVE - 1)] = head;
		st->len++;
	}
	return 0;
}

/* Turn i clears counters 2i and 2i + 1 of the d x w in use (w ≥ 2): the counters outside are
 * never read under this shape, and a later shape clears its own when it starts. */
static long fp_clear_step(__u64 i, void *data)
{
	struct fp_ctx *c = data;
	__u32 half = 63 - (c->P->shift & 63); /* log2(w / 2) */
	__u64 at = (i >> half) * FP_WIDTH + (i & ((1ULL << half) - 1)) * 2;
	*(__u64 *)&c->st->sketch[at & (FP_DEPTH * FP_WIDTH - 2)] = 0;
	return 0;
}

static __always_inline void fp_clear(struct fp_ctx *c)
{
	bpf_loop(c->P->depth << (63 - (c->P->shift & 63)), fp_clear_step, c, 0);
}

static long fp_find(__u64 i, void *data)
{
	struct fp_ctx *c = data;
	struct fp_state *st = c->st;
	if (st->active[(st->head + i) & (FP_ACTIVE - 1)].flow == c->flow) {
		c->found = 1;
		return 1;
	}
	return 0;
}

/* State::pay_owed: returns 1 once nothing is owed. */
static __always_inline int fp_pay_owed(struct fp_state *st)
{
	if (st->owed != 0) {
		__u64 pay = st->credit_nb / NANOS_PER_SEC;
		if (pay > st->owed)
			pay = st->owed;
		st->owed -= pay;
		st->credit_nb -= pay * NANOS_PER_SEC;
	}
	return st->owed == 0;
}

/* State::allocate. */
static __always_inline void fp_allocate(struct fp_ctx *c, __u64 now)
{
	struct fp_state *st = c->st;
	if (now > st->last_ns) {
		__u64 credit = rk_sat_mul(c->P->rate, now - st->last_ns);
		st->credit_nb = st->credit_nb > ~0ULL - credit ? ~0ULL : st->credit_nb + credit;
		st->last_ns = now;
	}
	if (!fp_pay_owed(st))
		return;
	c->emptied = 0;
	bpf_loop(FP_STEPS, fp_step, c, 0);
	if (!c->emptied)
		return;
	if (st->occupied != 0) {
		/* the residue: cleared from the sketch, still owed */
		fp_clear(c);
		st->owed += st->occupied;
		st->residue_clears++;
		st->residue_bytes += st->occupied;
		st->occupied = 0;
	}
	/* Empty list, nothing owed: the bucket is full and further tokens are discarded. */
	if (fp_pay_owed(st))
		st->credit_nb = 0;
}

/* State::on_arrival; returns the drop reason or -1 to pass. */
static __always_inline int fp_decide(struct fp_ctx *c, const struct rk_pkt *pkt, __u64 now)
{
	const struct fp_params *P = c->P;
	struct fp_state *st = c->st;
	__u32 idx[FP_DEPTH];
	__u64 k;

	fp_allocate(c, now);
	k = P->bucket > st->occupied + st->owed ? P->bucket - st->occupied - st->owed : 0;
	if (k < pkt->len)
		return RK_DROP_OVERLIMIT;
	fp_columns(P, pkt->flow, idx);
	if (fp_estimate(P, st, idx) >= k)
		return RK_DROP_FLOW_THRESHOLD; /* Eq. 3 with T = k (Eq. 5) */
	c->flow = pkt->flow;
	c->found = 0;
	bpf_loop(st->len, fp_find, c, 0);
	if (!c->found) {
		if (st->len >= FP_ACTIVE) {
			st->list_full_drops++;
			return RK_DROP_OVERLIMIT;
		}
		st->active[(st->head + st->len) & (FP_ACTIVE - 1)] =
			(struct fp_flow){ .flow = pkt->flow, .quantum = P->unit * P->weights[pkt->class & (FP_CLASSES - 1)] };
		st->len++;
	}
#pragma unroll
	for (int r = 0; r < FP_DEPTH; r++) {
		__u32 *ctr = &st->sketch[idx[r] & (FP_DEPTH * FP_WIDTH - 1)];
		if (r < P->depth)
			*ctr = *ctr > ~0U - pkt->len ? ~0U : *ctr + pkt->len;
	}
	st->occupied += pkt->len;
	return -1;
}

SEC("tc")
int rk_fair_policer(struct __sk_buff *skb)
{
	__u32 zero = 0;
	struct rk_settings *s = bpf_map_lookup_elem(&rk_settings, &zero);
	struct fp_params *P = bpf_map_lookup_elem(&fp_params, &zero);
	struct rk_pkt pkt = {};
	struct fp_ctx c = {};
	struct fp_state *st;
	__u64 now;
	int reason;

	if (!s || !P || P->rate == 0 || rk_parse(skb, s, &pkt) < 0)
		return TC_ACT_OK;
	now = rk_now(skb, s);
	st = rk_state_or_insert(&fp_state, &fp_zero, &pkt.agg);
	if (!st)
		return rk_untracked_pass();
	if (rk_lock(&st->lock) < 0)
		return rk_untracked_pass();
	c.P = P;
	c.st = st;
	if (st->shape != P->shape) {
		/* a new aggregate (all zero, shape 0), or a live update to another sketch or bucket:
		 * start afresh */
		if (st->shape != 0)
			fp_clear(&c);
		st->head = 0;
		st->len = 0;
		st->occupied = 0;
		st->owed = 0;
		st->credit_nb = 0;
		st->last_ns = now;
		st->shape = P->shape;
	}
	reason = fp_decide(&c, &pkt, now);
	rk_count(&st->stats, pkt.len, reason);
	rk_unlock(&st->lock);
	return reason < 0 ? TC_ACT_OK : TC_ACT_SHOT;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
