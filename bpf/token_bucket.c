/* SPDX-License-Identifier: (Apache-2.0 OR GPL-2.0) */
/* Token-bucket policer per aggregate (algorithms.md §1), mirroring ratekit_core::token_bucket
 * bit for bit: credit in nano-bytes (bytes x 1e9) so rate x dt is an exact product, the bucket
 * capped at burst, a packet passes iff the bucket holds its length.
 *
 * The state is locked with rk_lock (common.h), not bpf_spin_lock, whose pair cost about 55 ns per
 * packet on the reference kernel and made this, the simplest policer, the slowest of the four.
 * Lock-free is not an option: tokens and last_ns must change together and BPF has no 128-bit
 * compare-and-swap (docs/dataplane.md, "Token bucket cost"). */
#include "common.h"

struct tb_params {
	__u64 rate;    /* bytes per second */
	__u64 burst;   /* bucket size B, bytes */
	__u64 initial; /* tokens of a new aggregate, bytes */
};

struct tb_state {
	__u32 lock; /* rk_lock */
	__u32 _pad;
	__u64 tokens_nb; /* nano-bytes */
	__u64 last_ns;
	struct rk_stats stats;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct tb_params);
} tb_params SEC(".maps");

struct {
	/* not LRU: eviction would hand a live aggregate a fresh bucket, and could recycle a value
	 * whose lock another CPU holds */
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, struct rk_agg_key);
	__type(value, struct tb_state);
} tb_state SEC(".maps");

SEC("tc")
int rk_token_bucket(struct __sk_buff *skb)
{
	__u32 zero = 0;
	struct rk_settings *s = bpf_map_lookup_elem(&rk_settings, &zero);
	struct tb_params *p = bpf_map_lookup_elem(&tb_params, &zero);
	struct rk_pkt pkt = {};
	struct tb_state *st;
	__u64 now, cap, need, credit, dt;
	int reason = -1;

	if (!s || !p || p->rate == 0 || rk_parse(skb, s, &pkt) < 0)
		return TC_ACT_OK;
	now = rk_now(skb, s);
	st = bpf_map_lookup_elem(&tb_state, &pkt.agg);
	if (!st) {
		struct tb_state fresh = {};
		fresh.tokens_nb = p->initial * NANOS_PER_SEC;
		fresh.last_ns = now;
		bpf_map_update_elem(&tb_state, &pkt.agg, &fresh, BPF_NOEXIST);
		st = bpf_map_lookup_elem(&tb_state, &pkt.agg);
		if (!st)
			return rk_untracked_pass();
	}
	cap = p->burst * NANOS_PER_SEC;
	need = (__u64)pkt.len * NANOS_PER_SEC;

	if (rk_lock(&st->lock) < 0)
		return rk_untracked_pass();
	if (now > st->last_ns) {
		dt = now - st->last_ns;
		/* saturating rate x dt: a long idle period fills the bucket, never wraps */
		credit = rk_sat_mul(p->rate, dt);
		st->tokens_nb = credit >= cap - (st->tokens_nb < cap ? st->tokens_nb : cap)
					? cap
					: st->tokens_nb + credit;
		st->last_ns = now;
	}
	if (st->tokens_nb > cap)
		st->tokens_nb = cap; /* a smaller burst configured live */
	if (st->tokens_nb >= need)
		st->tokens_nb -= need;
	else
		reason = RK_DROP_OVERLIMIT;
	rk_count(&st->stats, pkt.len, reason);
	rk_unlock(&st->lock);
	return reason < 0 ? TC_ACT_OK : TC_ACT_SHOT;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
