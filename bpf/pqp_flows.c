/* SPDX-License-Identifier: (Apache-2.0 OR GPL-2.0) */
/* PQP and BC-PQP over exact per-flow phantom queues under a flat fair policy (`flows = "exact"`,
 * `classify = "flow"`, issue 17), mirroring ratekit_core::{pqp_flows::FlowPqp,
 * bcpqp_flows::FlowBcPqp} operation for operation on the flow queues of flows.h (class 0). */
#include "flows.h"

struct fq_state {
	__u32 lock; /* rk_lock */
	__u32 _pad;
	__u64 last_ns;
	__u64 shape; /* 0: fresh */
	struct rk_stats stats;
	struct fq_flows f;
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
	/* 75 KB a value: allocate an aggregate's state at its first packet, not the table up front */
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

/* X_i = ⌊r·T / n⌋, n the non-empty queues (at least 1). */
static __always_inline __u64 fq_expected(const struct fq_params *P, struct fq_flows *st)
{
	__u32 n = st->cls[0].heap_len;
	return P->window_budget_nb / (n > 0 ? n : 1);
}

/* The first window on the list if it is due at t: closes it if it holds magic, reclaims a
 * drained flow, or leaves the window to close at the flow's next arrival; 1 if none is due. */
static __always_inline long fq_close_first_due(const struct fq_params *P, struct fq_flows *st, __u64 t)
{
	__u32 s = st->win_head;
	if (s == FQ_NONE || fq_slot(st, s)->window_end > t)
		return 1;
	fq_unlist(st, s);
	if (fq_clamp_magic(st, 0, s) > 0)
		fq_close_window(P, st, s, t, fq_expected(P, st));
	else if (fq_occupancy(st, 0, s) == 0)
		fq_reclaim(st, s);
	return 0;
}

/* One due window, in order of end, closed at x->t. */
static long fq_close_due_step(__u64 i, void *data)
{
	struct fq_ctx *x = data;
	return fq_close_first_due(x->P, x->f, x->t);
}

/* FlowBcPqp::close_windows_at_their_ends, one window per turn: the service up to the end of the
 * first window on the list, if it ended by x->t, then its close at that end. */
static long fq_catch_up_step(__u64 i, void *data)
{
	struct fq_ctx *x = data;
	const struct fq_params *P = x->P;
	struct fq_state *st = x->st;
	struct fq_flows *f = x->f;
	if (f->win_head == FQ_NONE)
		return 1;
	__u32 s = f->win_head;
	__u64 end = fq_slot(f, s)->window_end;
	if (end > x->t)
		return 1;
	if (end > st->last_ns) {
		fq_serve(f, 0, rk_sat_mul(P->rate, end - st->last_ns), end);
		st->last_ns = end;
	}
	/* a flow that drained by then was reclaimed, its window with it: the turn is spent */
	if (f->win_head == s)
		fq_close_first_due(P, f, st->last_ns);
	return 0;
}

/* FlowPqp / FlowBcPqp::on_arrival: -1 to pass, else the drop reason. */
static __always_inline int fq_decide(const struct fq_params *P, struct fq_state *st, const struct rk_pkt *pkt,
				     __u64 now)
{
	struct fq_flows *f = &st->f;
	if (P->burst && fq_next_end(f) <= now) {
		struct fq_ctx x = { .P = P, .st = st, .f = f, .t = now };
		bpf_loop(RK_CATCH_UP_WINDOWS, fq_catch_up_step, &x, 0);
	}
	__u64 t = now > st->last_ns ? now : st->last_ns;
	if (now > st->last_ns) {
		fq_serve(f, 0, rk_sat_mul(P->rate, now - st->last_ns), t);
		st->last_ns = now;
	}
	if (P->burst && fq_next_end(f) <= t) {
		struct fq_ctx x = { .P = P, .f = f, .t = t };
		bpf_loop(FQ_SLOTS + 1, fq_close_due_step, &x, 0);
	}
	__u32 s = fq_slot_of(P, f, 0, pkt->flow);
	if (P->burst && t >= fq_slot(f, s)->window_end)
		fq_close_window(P, f, s, t, fq_expected(P, f));
	__u64 magic;
	int reason = fq_admit(P, f, 0, s, pkt->len, &magic);
	if (reason >= 0 || !P->burst)
		return reason;
	if (magic == 0 && !rk_le_products(fq_slot(f, s)->accepted, THETA_ONE_NB, P->theta_plus, fq_expected(P, f))) /* A > θ+·X */
		fq_fill_with_magic(P, f, 0, s, t);
	return -1;
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
	if (st->shape != P->shape) {
		fq_reset(&st->f, NULL);
		st->last_ns = now;
		st->shape = P->shape;
	}
	reason = fq_decide(P, st, &pkt, now);
	rk_count(&st->stats, pkt.len, reason);
	rk_unlock(&st->lock);
	return reason < 0 ? TC_ACT_OK : TC_ACT_SHOT;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
