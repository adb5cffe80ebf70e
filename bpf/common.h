/* SPDX-License-Identifier: (Apache-2.0 OR GPL-2.0) */
/* Shared by every ratekit tc-BPF program: packet parsing, aggregate keys, flow hashing, the
 * clock and per-aggregate counters. Every struct here is mirrored field for field in
 * crates/dataplane/src/maps.rs, with compile-time size checks on the Rust side (Cilium's
 * bpf/lib/common.h practice: explicit padding, same names on both sides). */
#ifndef RATEKIT_COMMON_H
#define RATEKIT_COMMON_H

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#define NANOS_PER_SEC 1000000000ULL

/* Window ends per packet that BC-PQP closes at their own instant, each after the phantom
 * service up to it (ratekit_core::bcpqp::CATCH_UP_WINDOWS); later ones close at the packet. */
#define RK_CATCH_UP_WINDOWS 1024

/* Drop reasons, numbered as crates/dataplane/src/maps.rs `BPF_DROP_REASONS`. */
enum rk_drop_reason {
	RK_DROP_OVERLIMIT = 0,
	RK_DROP_BURST_CONTROL = 1,
	RK_DROP_FLOW_THRESHOLD = 2,
	RK_DROP_REASONS = 4, /* room for one more without changing the layout */
};

/* How packets map to aggregates; one entry (key 0) in `rk_settings`. */
struct rk_settings {
	__u32 match_dst;  /* 1: the aggregate is the destination address (downstream policing) */
	__u32 prefix4;    /* IPv4 aggregates are /prefix4 prefixes (32: one per address) */
	__u32 prefix6;    /* IPv6 aggregates are /prefix6 prefixes */
	__u32 test_clock; /* 1: `now` is skb->tstamp (BPF_PROG_TEST_RUN), else bpf_ktime_get_ns() */
};

/* A masked address; IPv4 is stored as ::ffff:a.b.c.d so one map serves both families. */
struct rk_agg_key {
	__u8 addr[16];
};

/* Per-aggregate counters, kept inside each state value under its lock. */
struct rk_stats {
	__u64 passed_packets;
	__u64 passed_bytes;
	__u64 dropped_packets;
	__u64 dropped_bytes;
	__u64 drops_by_reason[RK_DROP_REASONS];
};

/* What the policers see of a packet: ratekit-core's `Packet` (len = IP length). */
struct rk_pkt {
	struct rk_agg_key agg;
	__u64 flow;  /* rk_flow_hash of the 5-tuple */
	__u32 len;   /* IP packet length in bytes */
	__u32 class; /* DSCP (top 6 bits of TOS / traffic class) */
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct rk_settings);
} rk_settings SEC(".maps");

/* Packets of aggregates that found the state map full: passed unpoliced, counted here. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} rk_untracked SEC(".maps");

/* An aggregate's state, created from the all-zero template in `zeroes` on its first packet (NULL only
 * if the state map is full). Maps are passed as pointers: always inlined, so the verifier sees them. */
static __always_inline void *rk_state_or_insert(void *states, void *zeroes, const void *key)
{
	__u32 zero = 0;
	void *st = bpf_map_lookup_elem(states, key);
	void *fresh;

	if (st)
		return st;
	fresh = bpf_map_lookup_elem(zeroes, &zero);
	if (!fresh)
		return NULL;
	bpf_map_update_elem(states, key, fresh, BPF_NOEXIST);
	return bpf_map_lookup_elem(states, key);
}

static __always_inline int rk_untracked_pass(void)
{
	__u32 zero = 0;
	__u64 *n = bpf_map_lookup_elem(&rk_untracked, &zero);
	if (n)
		*n += 1;
	return TC_ACT_OK;
}

/* SplitMix64's finaliser: the same function as ratekit_core::packet::mix64. */
static __always_inline __u64 rk_mix64(__u64 x)
{
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
	return x ^ (x >> 31);
}

/* Flow key: h = mix64(h ^ w) over the words src[0..8], src[8..16], dst[0..8], dst[8..16],
 * (sport << 24 | dport << 8 | proto) with native-endian loads of the 16-byte addresses and
 * host-order ports. Mirrored by ratekit_dataplane::packet::flow_hash. */
static __always_inline __u64 rk_flow_hash(const __u8 *src, const __u8 *dst, __u16 sport, __u16 dport,
					  __u8 proto)
{
	__u64 w, h = 0;
	__builtin_memcpy(&w, src, 8);
	h = rk_mix64(h ^ w);
	__builtin_memcpy(&w, src + 8, 8);
	h = rk_mix64(h ^ w);
	__builtin_memcpy(&w, dst, 8);
	h = rk_mix64(h ^ w);
	__builtin_memcpy(&w, dst + 8, 8);
	h = rk_mix64(h ^ w);
	w = ((__u64)sport << 24) | ((__u64)dport << 8) | proto;
	return rk_mix64(h ^ w);
}

/* a * b saturating at 2^64 - 1 (Rust's u64::saturating_mul). The barrier keeps clang from
 * turning the division test into a 128-bit multiply, which BPF lacks. */
static __always_inline __u64 rk_sat_mul(__u64 a, __u64 b)
{
	__u64 lim;
	if (a == 0)
		return 0;
	lim = ~0ULL / a;
	asm volatile("" : "+r"(lim));
	return b > lim ? ~0ULL : a * b;
}

#define THETA_ONE_NB (65536ULL * NANOS_PER_SEC) /* 2^16 (θ fixed point) × 10^9 (nano-bytes) */

/* 128-bit product a·b as (hi, lo), from 32-bit halves (BPF has no 64×64→128 multiply). */
static __always_inline void rk_mul128(__u64 a, __u64 b, __u64 *hi, __u64 *lo)
{
	__u64 a0 = a & 0xffffffff, a1 = a >> 32, b0 = b & 0xffffffff, b1 = b >> 32;
	__u64 p00 = a0 * b0, p01 = a0 * b1, p10 = a1 * b0, p11 = a1 * b1;
	__u64 mid = (p00 >> 32) + (p01 & 0xffffffff) + (p10 & 0xffffffff);
	*lo = (mid << 32) | (p00 & 0xffffffff);
	*hi = p11 + (p01 >> 32) + (p10 >> 32) + (mid >> 32);
}

/* 1 iff a·b ≤ c·d, exact. Branch-free (the borrow out of c·d − a·b, Hacker's Delight 2-13):
 * with branches, each comparison in a loop multiplies the paths the verifier must walk. */
__noinline int rk_le_products(__u64 a, __u64 b, __u64 c, __u64 d)
{
	__u64 h1, l1, h2, l2, lo, b0, hi;
	rk_mul128(a, b, &h1, &l1);
	rk_mul128(c, d, &h2, &l2);
	lo = l2 - l1;
	b0 = ((~l2 & l1) | (~(l2 ^ l1) & lo)) >> 63;
	hi = h2 - h1 - b0;
	return 1 ^ (((~h2 & h1) | (~(h2 ^ h1) & hi)) >> 63);
}

static __always_inline __u64 rk_sat_add(__u64 a, __u64 b)
{
	return a + b < a ? ~0ULL : a + b;
}

static __always_inline __u64 rk_min(__u64 a, __u64 b)
{
	return a < b ? a : b;
}

static __always_inline void rk_mask(__u8 *addr, __u32 prefix)
{
#pragma unroll
	for (int i = 0; i < 16; i++) {
		__u32 bit = (__u32)i * 8;
		if (prefix <= bit)
			addr[i] = 0;
		else if (prefix < bit + 8)
			addr[i] &= (__u8)(0xff << (bit + 8 - prefix));
	}
}

static __always_inline void rk_v4_mapped(__u8 *out, __be32 addr)
{
	__builtin_memset(out, 0, 10);
	out[10] = 0xff;
	out[11] = 0xff;
	__builtin_memcpy(out + 12, &addr, 4);
}

/* Parses an Ethernet frame. Returns 0 and fills *p, or -1 for anything that is not IPv4/IPv6
 * (those packets are not policed). Only the first IPv4 fragment carries ports. */
static __always_inline int rk_parse(struct __sk_buff *skb, const struct rk_settings *s, struct rk_pkt *p)
{
	void *data = (void *)(long)skb->data;
	void *data_end = (void *)(long)skb->data_end;
	struct ethhdr *eth = data;
	__u8 src[16], dst[16], proto;
	__u16 sport = 0, dport = 0;
	__u32 prefix;
	void *l4;

	if ((void *)(eth + 1) > data_end)
		return -1;
	if (eth->h_proto == bpf_htons(ETH_P_IP)) {
		struct iphdr *ip = (void *)(eth + 1);
		if ((void *)(ip + 1) > data_end || ip->ihl < 5)
			return -1;
		rk_v4_mapped(src, ip->saddr);
		rk_v4_mapped(dst, ip->daddr);
		proto = ip->protocol;
		p->len = bpf_ntohs(ip->tot_len);
		p->class = ip->tos >> 2;
		l4 = (void *)ip + ip->ihl * 4;
		prefix = 96 + (s->prefix4 > 32 ? 32 : s->prefix4);
		if (ip->frag_off & bpf_htons(0x1fff))
			l4 = 0;
	} else if (eth->h_proto == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr *ip6 = (void *)(eth + 1);
		if ((void *)(ip6 + 1) > data_end)
			return -1;
		__builtin_memcpy(src, &ip6->saddr, 16);
		__builtin_memcpy(dst, &ip6->daddr, 16);
		proto = ip6->nexthdr;
		p->len = bpf_ntohs(ip6->payload_len) + sizeof(*ip6);
		p->class = ((ip6->priority << 4) | (ip6->flow_lbl[0] >> 4)) >> 2;
		l4 = ip6 + 1;
		prefix = s->prefix6;
	} else {
		return -1;
	}
	if (l4 && (proto == IPPROTO_TCP || proto == IPPROTO_UDP)) {
		__be16 *ports = l4;
		if ((void *)(ports + 2) <= data_end) {
			sport = bpf_ntohs(ports[0]);
			dport = bpf_ntohs(ports[1]);
		}
	}
	p->flow = rk_flow_hash(src, dst, sport, dport, proto);
	if (s->match_dst)
		__builtin_memcpy(p->agg.addr, dst, 16);
	else
		__builtin_memcpy(p->agg.addr, src, 16);
	rk_mask(p->agg.addr, prefix);
	return 0;
}

static __always_inline __u64 rk_now(struct __sk_buff *skb, const struct rk_settings *s)
{
	return s->test_clock ? skb->tstamp : bpf_ktime_get_ns();
}

/* A spin lock in a map value: a word taken with cmpxchg and released with fetch-and (both full
 * barriers: BPF atomics with fetch). Not bpf_spin_lock: a held bpf_spin_lock forbids calls to
 * global functions and bpf_loop, which PQP, BC-PQP and FairPolicer make in their critical section,
 * and on the reference kernel (6.18, KVM guest with PV spinlocks and SRSO return thunks) its
 * lock/unlock pair costs about 55 ns per packet against a few ns for these two inline atomics
 * (docs/dataplane.md, "Token bucket cost").
 * The holder is a tc program on another CPU with bottom halves off, so it normally finishes within
 * microseconds, but an interrupt or the hypervisor can stall it: on a 2-vCPU KVM guest a wait of
 * 4096 tries (15 us) gave up for 0.3-2.5 in 10^4 packets with two CPUs on one aggregate. So after
 * one inline try the wait goes on in a bpf_loop callback for up to 2^23 tries (bpf_loop's most),
 * which the verifier walks once (an unrolled wait is walked try by try and cannot pass its
 * 8192-jump history); it gives up only on a holder stalled for about 0.1 s, and then the packet
 * passes, counted untracked. */
struct rk_lock_wait {
	__u32 *lock;
	__u32 taken;
};

static long rk_lock_try(__u64 i, void *ctx)
{
	struct rk_lock_wait *w = ctx;

	/* read first: a failing cmpxchg would take the cache line from the holder */
	if (*(volatile __u32 *)w->lock == 0 && __sync_val_compare_and_swap(w->lock, 0, 1) == 0) {
		w->taken = 1;
		return 1;
	}
	return 0;
}

static __always_inline int rk_lock(__u32 *lock)
{
	if (__sync_val_compare_and_swap(lock, 0, 1) != 0) {
		struct rk_lock_wait w = { .lock = lock };

		bpf_loop(1 << 23, rk_lock_try, &w, 0);
		if (!w.taken)
			return -1;
	}
	return 0;
}

static __always_inline void rk_unlock(__u32 *lock)
{
	__sync_fetch_and_and(lock, 0);
}

static __always_inline void rk_count(struct rk_stats *st, __u32 len, int reason)
{
	if (reason < 0) {
		st->passed_packets++;
		st->passed_bytes += len;
	} else {
		st->dropped_packets++;
		st->dropped_bytes += len;
		if (reason < RK_DROP_REASONS)
			st->drops_by_reason[reason]++;
	}
}

#endif
