/* SPDX-License-Identifier: (Apache-2.0 OR GPL-2.0) */
/* Phantom queues served by a policy tree: PQP and BC-PQP per aggregate (algorithms.md §2-3),
 * mirroring ratekit_core::{phantom, pqp, bcpqp} operation for operation (docs/bcpqp.md, "Exact
 * arithmetic"), so that the same arrivals give the same verdicts and the same nano-byte state.
 *
 * Bounds of the data-plane version (checked by the loader, crates/dataplane/src/bpf.rs):
 * at most PQ_QUEUES queues, PQ_INNER inner policy nodes, nesting depth 3 (root, one level of
 * inner nodes, leaves), and r·T·max weight < 2^64. The depth bound is what lets the tree walks
 * below be loops instead of recursion (BPF has none): a batch is split at the root, and the
 * parts given to inner children are split among their leaves afterwards (pq_apply). Every
 * struct is mirrored in crates/dataplane/src/maps.rs with a compile-time size check. */
#ifndef RATEKIT_PHANTOM_H
#define RATEKIT_PHANTOM_H

#include "common.h"

#define PQ_QUEUES 16
#define PQ_NODES 32
#define PQ_INNER 8
#define PQ_SLOTS 32
#define PQ_CHILDREN 16 /* an inner node has at most PQ_QUEUES children */

#define PQ_LEAF 0
#define PQ_SHARE 1 /* fair and weighted: water-filling by weight */
#define PQ_PRIORITY 2

#define PQ_CLASSIFY_FLOW 0
#define PQ_CLASSIFY_CLASS 1

/* Masks keep every index provably in bounds for the verifier (the loader guarantees it). */
#define QI(q) ((q) & (PQ_QUEUES - 1))
#define NI(n) ((n) & (PQ_NODES - 1))
#define II(i) ((i) & (PQ_INNER - 1))
#define SI(s) ((s) & (PQ_SLOTS - 1))

/* A fresh load of a list length: never a value the compiler kept in a register, whose range
 * would differ with the number of removals on each path and defeat the verifier's pruning. */
#define PQ_LEN(s, ix) (*(volatile __u8 *)&(s)->active_len[II(ix)])

/* ratekit_core::phantom::NodeInfo. Node 0 is the root; node ids in depth-first order. */
struct pq_node {
	__u32 weight;  /* within the parent (1 under fair and priority) */
	__u8 kind;     /* PQ_LEAF, PQ_SHARE, PQ_PRIORITY */
	__u8 parent;
	__u8 rank;     /* position among the parent's children: the priority order */
	__u8 index;    /* leaves: the queue; inner nodes: the index into the inner arrays */
	__u8 first_slot;
	__u8 n_children;
	__u8 _pad[2];
};

/* One entry (key 0) in `pqp_params` / `bcpqp_params`. */
struct pq_params {
	__u64 rate;          /* bytes per second */
	__u64 queue_size_nb; /* B, nano-bytes */
	/* BC-PQP only */
	__u64 theta_plus;       /* θ+ · 2^16 */
	__u64 theta_minus;      /* θ− · 2^16 */
	__u64 window_ns;        /* T */
	__u64 window_budget_nb; /* r·T */
	/* Identifies queues, classification and policy tree: state kept under another shape
	 * is reset (its counters kept), so a live update never reads a list of another tree. */
	__u64 shape;
	__u32 queues;
	__u32 classify;
	__u32 flat_share; /* every queue directly under a fair/weighted root: service may be deferred */
	__u32 flat_fair;  /* ... and every weight is 1 */
	/* Always 0. Loop cursors start from this load, so the verifier tracks them as bounded
	 * unknowns rather than constants and can prune the paths of a loop that differ only in
	 * where a cursor stands (with constant cursors the tree walks exceed its 1M limit). */
	__u32 zero;
	__u32 _pad;
	struct pq_node nodes[PQ_NODES];
	__u8 children[PQ_SLOTS];       /* every inner node's children in order, from first_slot */
	__u8 leaf_of_queue[PQ_QUEUES];
	__u8 inner_node[PQ_INNER]; /* node id of each inner index */
};

/* One aggregate's phantom queues (ratekit_core::phantom::PhantomQueues), nano-bytes. */
struct pq_queues {
	__u64 occupancy[PQ_QUEUES];
	__u64 backlog[PQ_INNER];       /* per inner node: Σ occupancy below */
	__u64 active_weight[PQ_INNER]; /* per inner node: Σ weight of its non-empty children */
	__u64 deferred;                /* service owed, not yet handed out (flat policies) */
	__u64 defer_limit;             /* deferral is exact while deferred < defer_limit */
	__u64 pending[PQ_INNER];       /* scratch of pq_apply: service given to an inner node, to split */
	__u8 active_len[PQ_INNER];
	__u8 slots[PQ_SLOTS]; /* non-empty children of each inner node, from its first_slot */
};

/* BC-PQP's per-queue burst state (ratekit_core::bcpqp::BurstState). */
struct pq_burst {
	__u64 magic_nb;
	__u64 accepted;
	__u64 accepted_prev;
	__u64 window_end;
};

/* A struct, so that global functions can take it (their pointer arguments are sized by type). */
struct pq_bursts {
	struct pq_burst q[PQ_QUEUES];
};

/* BC-PQP's on_drain (`clamp_magic`): magic drains last, so at most the occupancy left is magic. */
static __always_inline void pq_clamp(struct pq_bursts *burst, __u32 q, __u64 occ)
{
	if (burst && burst->q[QI(q)].magic_nb > occ)
		burst->q[QI(q)].magic_nb = occ;
}

static __always_inline const struct pq_node *pq_node(const struct pq_params *P, __u32 node)
{
	return &P->nodes[NI(node)];
}

static __always_inline __u64 pq_node_backlog(const struct pq_params *P, const struct pq_queues *s, __u32 node)
{
	const struct pq_node *n = pq_node(P, node);
	return n->kind == PQ_LEAF ? s->occupancy[QI(n->index)] : s->backlog[II(n->index)];
}

static __always_inline void pq_zero_leaf(const struct pq_node *n, struct pq_queues *s, struct pq_bursts *burst)
{
	s->occupancy[QI(n->index)] = 0;
	pq_clamp(burst, n->index, 0);
}

static __always_inline void pq_reset_inner(struct pq_queues *s, __u32 ix)
{
	s->backlog[II(ix)] = 0;
	s->active_weight[II(ix)] = 0;
	s->active_len[II(ix)] = 0;
}

/* drain_all for a leaf or an inner node whose children are leaves. */
static __always_inline void pq_drain_low(const struct pq_params *P, struct pq_queues *s, struct pq_bursts *burst,
					 __u32 node, const int nested)
{
	const struct pq_node *n = pq_node(P, node);
	if (n->kind == PQ_LEAF) {
		pq_zero_leaf(n, s, burst);
		return;
	}
	if (!nested)
		return;
	__u32 len = s->active_len[II(n->index)];
	for (__u32 i = 0; i < PQ_CHILDREN && i < len; i++)
		pq_zero_leaf(pq_node(P, s->slots[SI(n->first_slot + i)]), s, burst);
	pq_reset_inner(s, n->index);
}

__noinline int pq_drain_g(const struct pq_params *P, struct pq_queues *s, struct pq_bursts *burst, __u32 node)
{
	if (P && s)
		pq_drain_low(P, s, burst, node, 1);
	return 0;
}

/* drain_all of the whole tree (the root's children are leaves or, nested, low inner nodes). */
static __always_inline void pq_drain_root(const struct pq_params *P, struct pq_queues *s, struct pq_bursts *burst,
					  const int nested)
{
	__u32 len = s->active_len[0];
	for (__u32 i = 0; i < PQ_CHILDREN && i < len; i++)
		pq_drain_g(P, s, burst, s->slots[SI(i)]);
	pq_reset_inner(s, 0);
}

static __always_inline void pq_remove_slot(struct pq_queues *s, __u32 ix, __u32 base, __u32 i, __u64 weight)
{
	__u8 len = PQ_LEN(s, ix) - 1;
	PQ_LEN(s, ix) = len;
	s->active_weight[II(ix)] -= weight;
	s->slots[SI(base + i)] = s->slots[SI(base + len)];
}

/* `fill` of a child with `amount` (< its backlog): a leaf at once, an inner child after the
 * split of its parent (its subtree is disjoint from everything the parent's split touches). */
static __always_inline void pq_fill_child(const struct pq_params *P, struct pq_queues *s, struct pq_bursts *burst,
					  __u32 child, __u64 amount)
{
	const struct pq_node *n = pq_node(P, child);
	if (n->kind == PQ_LEAF) {
		__u32 q = QI(n->index);
		s->occupancy[q] -= amount;
		pq_clamp(burst, q, s->occupancy[q]);
	} else {
		s->pending[II(n->index)] = amount;
	}
}

/* `fill` of inner node `node` with `budget` (< its backlog): strict order under priority,
 * max-min weighted water-filling under fair/weighted (phantom.rs `fill` and `water_fill`). */
static __always_inline void pq_split(const struct pq_params *P, struct pq_queues *s, struct pq_bursts *burst,
				     __u32 node, __u64 budget, const int nested)
{
	const struct pq_node *n = pq_node(P, node);
	__u32 ix = II(n->index), base = n->first_slot;

	s->backlog[ix] -= budget;
	if (n->kind == PQ_PRIORITY) {
		__u64 left = budget;
		__u32 emptied = P->zero, len;
		for (__u32 k = 0; k < PQ_CHILDREN && left > 0; k++) {
			__u32 child = s->slots[SI(base + emptied)];
			__u64 d = pq_node_backlog(P, s, child);
			if (left >= d) {
				left -= d;
				pq_drain_g(P, s, burst, child);
				s->active_weight[ix] -= pq_node(P, child)->weight;
				emptied = (emptied + 1) & (PQ_SLOTS - 1);
			} else {
				pq_fill_child(P, s, burst, child, left);
				left = 0;
			}
		}
		len = s->active_len[ix];
		for (__u32 j = 0; j < PQ_CHILDREN && emptied + j < len; j++)
			s->slots[SI(base + j)] = s->slots[SI(base + emptied + j)];
		s->active_len[ix] = len - emptied;
		return;
	}

	__u64 left = budget;
	for (__u32 pass = 0; pass < PQ_CHILDREN; pass++) {
		__u8 len_before = PQ_LEN(s, ix);
		__u32 i = P->zero;
		for (__u32 k = 0; k < PQ_CHILDREN && i < PQ_LEN(s, ix); k++) {
			__u32 child = s->slots[SI(base + i)];
			__u64 w = pq_node(P, child)->weight;
			__u64 d = pq_node_backlog(P, s, child);
			if (rk_le_products(d, s->active_weight[ix], left, w)) {
				left -= d;
				pq_drain_g(P, s, burst, child);
				pq_remove_slot(s, ix, base, i, w);
			} else {
				i = (i + 1) & (PQ_SLOTS - 1);
			}
		}
		if (PQ_LEN(s, ix) == len_before || left == 0)
			break; /* a pass that empties nobody ends the water-filling */
	}
	if (left == 0)
		return;
	__u64 wsum = s->active_weight[ix];
	__u64 unit = left / wsum;
	__u64 spare = left - unit * wsum;
	__u32 i = P->zero;
	for (__u32 k = 0; k < PQ_CHILDREN && i < PQ_LEN(s, ix); k++) {
		__u32 child = s->slots[SI(base + i)];
		__u64 w = pq_node(P, child)->weight;
		__u64 d = pq_node_backlog(P, s, child);
		__u64 give = unit * w;
		__u64 extra = rk_min(spare, d - give);
		give += extra;
		spare -= extra;
		if (give >= d) {
			pq_drain_g(P, s, burst, child);
			pq_remove_slot(s, ix, base, i, w);
		} else {
			if (give > 0)
				pq_fill_child(P, s, burst, child, give);
			i = (i + 1) & (PQ_SLOTS - 1);
		}
	}
}

/* The heavy walks are global functions: the verifier checks each once, whatever the number of
 * call sites (inlined, every call site would be walked again, well beyond its 1M-instruction
 * limit). Global functions cannot be called under a bpf_spin_lock, hence rk_lock (common.h). */
__noinline int pq_split_g(const struct pq_params *P, struct pq_queues *s, struct pq_bursts *burst, __u32 node,
			  __u64 budget)
{
	if (!P || !s)
		return 0;
	/* only the root of a nested tree has inner children */
	if (node == 0 && !P->flat_share)
		pq_split(P, s, burst, node, budget, 1);
	else
		pq_split(P, s, burst, node, budget, 0);
	return 0;
}

/* phantom.rs `serve_flat_fair`: water-filling with unit weights on the root's list. */
static __always_inline void pq_serve_flat_fair(const struct pq_params *P, struct pq_queues *s,
					       struct pq_bursts *burst, __u64 budget)
{
	__u64 left = budget;
	s->backlog[0] -= budget;
	for (__u32 pass = 0; pass < PQ_CHILDREN; pass++) {
		__u8 len_before = PQ_LEN(s, 0);
		__u64 level = left / len_before;
		__u32 i = P->zero;
		/* backlog·n ≤ s ⇔ backlog ≤ ⌊s/n⌋; the level only rises as queues leave */
		for (__u32 k = 0; k < PQ_CHILDREN && i < PQ_LEN(s, 0); k++) {
			const struct pq_node *leaf = pq_node(P, s->slots[SI(i)]);
			__u32 q = QI(leaf->index);
			__u64 d = s->occupancy[q];
			if (d <= level) {
				left -= d;
				pq_zero_leaf(leaf, s, burst);
				pq_remove_slot(s, 0, 0, i, 1);
			} else {
				i = (i + 1) & (PQ_SLOTS - 1);
			}
		}
		if (PQ_LEN(s, 0) == len_before || left == 0)
			break;
	}
	if (left == 0)
		return;
	__u64 unit = left / PQ_LEN(s, 0);
	__u64 spare = left - unit * PQ_LEN(s, 0);
	/* the remainder in list order, each queue taking what it holds beyond unit (water_fill's
	 * rule, which the deferred view pq_occupancy assumes); a queue it empties leaves the list */
	__u32 i = P->zero;
	for (__u32 k = 0; k < PQ_CHILDREN && i < PQ_LEN(s, 0); k++) {
		const struct pq_node *leaf = pq_node(P, s->slots[SI(i)]);
		__u32 q = QI(leaf->index);
		__u64 extra = rk_min(spare, s->occupancy[q] - unit);
		spare -= extra;
		if (unit + extra >= s->occupancy[q]) {
			pq_zero_leaf(leaf, s, burst);
			pq_remove_slot(s, 0, 0, i, 1);
		} else {
			s->occupancy[q] -= unit + extra;
			pq_clamp(burst, q, s->occupancy[q]);
			i = (i + 1) & (PQ_SLOTS - 1);
		}
	}
}

/* phantom.rs `set_defer_limit`: with m = min ⌊L_q/w_q⌋ over active queues and W their weight,
 * deferring D < (m − W + 1)·W empties no queue. */
static __always_inline void pq_set_defer_limit(const struct pq_params *P, struct pq_queues *s, const int nested)
{
	s->defer_limit = 0;
	if (nested || !P->flat_share || s->active_len[0] == 0)
		return;
	__u64 m = ~0ULL, w = s->active_weight[0];
	__u32 len = s->active_len[0];
	for (__u32 i = 0; i < PQ_CHILDREN && i < len; i++) {
		const struct pq_node *leaf = pq_node(P, s->slots[SI(i)]);
		m = rk_min(m, s->occupancy[QI(leaf->index)] / leaf->weight);
	}
	if (m >= w)
		s->defer_limit = rk_sat_mul(m - w + 1, w);
}

/* phantom.rs `apply`: hands out `budget` nano-bytes of service by the policy. */
static __always_inline void pq_apply(const struct pq_params *P, struct pq_queues *s, struct pq_bursts *burst,
				     __u64 budget, const int nested)
{
	__u64 total = s->backlog[0];
	if (total == 0 || budget == 0)
		return;
	if (budget >= total) {
		pq_drain_root(P, s, burst, nested);
	} else if (!nested && P->flat_fair) {
		pq_serve_flat_fair(P, s, burst, budget);
	} else if (!nested) {
		pq_split_g(P, s, burst, 0, budget);
	} else {
		pq_split_g(P, s, burst, 0, budget);
		for (__u32 ix = 1; ix < PQ_INNER; ix++) {
			__u64 amount = s->pending[ix];
			if (amount) {
				s->pending[ix] = 0;
				pq_split_g(P, s, burst, P->inner_node[ix], amount); /* its children are leaves */
			}
		}
	}
	pq_set_defer_limit(P, s, nested);
}

__noinline int pq_apply_g(const struct pq_params *P, struct pq_queues *s, struct pq_bursts *burst, __u64 budget)
{
	if (!P || !s)
		return 0;
	if (P->flat_share)
		pq_apply(P, s, burst, budget, 0);
	else
		pq_apply(P, s, burst, budget, 1);
	return 0;
}

/* Hands out deferred service now, before the set of non-empty queues may change. */
static __always_inline void pq_flush(const struct pq_params *P, struct pq_queues *s, struct pq_bursts *burst,
				     const int nested)
{
	if (nested)
		return; /* nested policies never defer */
	if (s->deferred > 0) {
		__u64 d = s->deferred;
		s->deferred = 0;
		pq_apply_g(P, s, burst, d);
	}
}

/* phantom.rs `serve`: r·Δt of service, deferred while no queue can empty. */
static __always_inline void pq_serve(const struct pq_params *P, struct pq_queues *s, struct pq_bursts *burst,
				     __u64 budget, const int nested)
{
	__u64 d = rk_sat_add(s->deferred, budget);
	if (d < s->defer_limit) {
		s->deferred = d;
		return;
	}
	s->deferred = 0;
	pq_apply_g(P, s, burst, d);
}

/* Occupancy of queue q with any deferred service applied (phantom.rs `occupancy`). */
static __always_inline __u64 pq_occupancy(const struct pq_params *P, const struct pq_queues *s, __u32 q)
{
	__u64 stored = s->occupancy[QI(q)];
	if (s->deferred == 0 || stored == 0)
		return stored;
	__u32 leaf = P->leaf_of_queue[QI(q)];
	__u64 w = P->flat_fair ? 1 : pq_node(P, leaf)->weight;
	__u64 wsum = s->active_weight[0];
	__u64 unit = s->deferred / wsum;
	__u64 spare = s->slots[0] == leaf ? s->deferred - unit * wsum : 0;
	return stored - (unit * w + spare);
}

/* Walks from leaf q up to the root (depth ≤ 3: at most two steps). */
#define PQ_UP_STEPS 2

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
__noinline __u64 bc_subtree_demand_g(const struct pq_params *P, const struct pq_bursts *burst, __u32 node, __u64 now)
{
	if (!P || !burst)
		return 0;
	const struct pq_node *n = pq_node(P, node);
	if (n->kind == PQ_LEAF)
		return bc_demand(&burst->q[QI(n->index)], now, P->window_ns);
	__u64 demand = 0;
	for (__u32 j = 0; j < PQ_CHILDREN && j < n->n_children; j++) {
		const struct pq_node *l = pq_node(P, P->children[SI(n->first_slot + j)]);
		demand = rk_sat_add(demand, bc_demand(&burst->q[QI(l->index)], now, P->window_ns));
	}
	return demand;
}

/* X_i = r_i*·T (BcPqp::expected_window_nb via PhantomQueues::expected_share): queue q's share of
 * r·T by the tree, priority siblings charged their demand per window (`burst`; BC-PQP over
 * classes of exact flows keeps it per class). */
static __always_inline __u64 bc_expected(const struct pq_params *P, const struct pq_queues *s,
					 const struct pq_bursts *burst, __u32 q, __u64 now, const int nested)
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
			__u64 wsum = s->active_weight[II(p->index)] + (pq_node_backlog(P, s, child) == 0 ? w : 0);
			b = b * w / wsum; /* the loader keeps r·T·w below 2^64 */
		} else if (nested) {
			for (__u32 r = 0; r < PQ_CHILDREN && r < c->rank; r++) {
				if (b == 0)
					break;
				__u64 demand = bc_subtree_demand_g(P, burst, P->children[SI(p->first_slot + r)], now);
				b = b > demand ? b - demand : 0;
			}
		}
	}
	return b;
}

__noinline __u64 bc_expected_g(const struct pq_params *P, const struct pq_queues *s, const struct pq_bursts *burst,
			      __u32 q, __u64 now)
{
	if (!P || !s || !burst)
		return 0;
	return P->flat_share ? bc_expected(P, s, burst, q, now, 0) : bc_expected(P, s, burst, q, now, 1);
}


/* phantom.rs `outranked`: 1 iff a priority node on queue q's path has a higher-ranked child holding
 * backlog (priority lists are kept in rank order, so the first entry decides). */
static __always_inline int pq_outranked(const struct pq_params *P, const struct pq_queues *s, __u32 q)
{
	__u32 node = P->leaf_of_queue[QI(q)];
	for (int step = 0; step < PQ_UP_STEPS && node != 0; step++) {
		const struct pq_node *c = pq_node(P, node);
		const struct pq_node *p = pq_node(P, c->parent);
		__u32 ix = II(p->index);
		if (p->kind == PQ_PRIORITY && s->active_len[ix] > 0 && pq_node(P, s->slots[SI(p->first_slot)])->rank < c->rank)
			return 1;
		node = c->parent;
	}
	return 0;
}

/* phantom.rs `add`: nb nano-bytes into queue q, activating it and its ancestors. */
static __always_inline void pq_add(const struct pq_params *P, struct pq_queues *s, struct pq_bursts *burst,
				   __u32 q, __u64 nb, const int nested)
{
	if (nb == 0)
		return;
	q = QI(q);
	__u32 node = P->leaf_of_queue[q];
	int was_empty = s->occupancy[q] == 0;
	if (was_empty)
		pq_flush(P, s, burst, nested);
	s->occupancy[q] += nb;
	int activate = was_empty;
	for (int step = 0; step < PQ_UP_STEPS && node != 0; step++) {
		const struct pq_node *info = pq_node(P, node);
		const struct pq_node *parent = pq_node(P, info->parent);
		__u32 ix = II(parent->index);
		int parent_was_empty = s->backlog[ix] == 0;
		if (activate) {
			__u32 base = parent->first_slot, pos = s->active_len[ix];
			if (parent->kind == PQ_PRIORITY) {
				/* insertion keeps rank order, so service walks children highest first */
				for (int k = 0; k < PQ_CHILDREN && pos > 0; k++) {
					__u8 prev = s->slots[SI(base + pos - 1)];
					if (pq_node(P, prev)->rank <= info->rank)
						break;
					s->slots[SI(base + pos)] = prev;
					pos--;
				}
			}
			s->slots[SI(base + pos)] = node;
			s->active_len[ix]++;
			s->active_weight[ix] += info->weight;
		}
		s->backlog[ix] += nb;
		activate = parent_was_empty;
		node = info->parent;
	}
	if (was_empty)
		pq_set_defer_limit(P, s, nested);
}

/* Takes an emptied node out of its parent's active list: order-keeping under priority,
 * swap-remove otherwise (phantom.rs `remove`). */
__noinline int pq_unlink_g(const struct pq_params *P, struct pq_queues *s, __u32 node)
{
	if (!P || !s)
		return 0;
	const struct pq_node *info = pq_node(P, node);
	const struct pq_node *parent = pq_node(P, info->parent);
	__u32 ix = II(parent->index), base = parent->first_slot;
	__u32 len = PQ_LEN(s, ix), i = P->zero;
	for (int k = 0; k < PQ_CHILDREN && i < len && s->slots[SI(base + i)] != node; k++)
		i = (i + 1) & (PQ_SLOTS - 1);
	if (parent->kind == PQ_PRIORITY) {
		for (int k = 0; k < PQ_CHILDREN && i + 1 < len; k++, i = (i + 1) & (PQ_SLOTS - 1))
			s->slots[SI(base + i)] = s->slots[SI(base + i + 1)];
		PQ_LEN(s, ix) = len - 1;
		s->active_weight[ix] -= info->weight;
	} else {
		pq_remove_slot(s, ix, base, i, info->weight);
	}
	return 0;
}

/* phantom.rs `remove`: takes nb (≤ occupancy) out of queue q unserved (magic removal). */
static __always_inline void pq_remove(const struct pq_params *P, struct pq_queues *s, struct pq_bursts *burst,
				      __u32 q, __u64 nb, const int nested)
{
	pq_flush(P, s, burst, nested);
	q = QI(q);
	nb = rk_min(nb, s->occupancy[q]);
	if (nb == 0)
		return;
	s->occupancy[q] -= nb;
	int deactivate = s->occupancy[q] == 0;
	__u32 node = P->leaf_of_queue[q];
	for (int step = 0; step < PQ_UP_STEPS && node != 0; step++) {
		const struct pq_node *info = pq_node(P, node);
		const struct pq_node *parent = pq_node(P, info->parent);
		__u32 ix = II(parent->index);
		s->backlog[ix] -= nb;
		if (deactivate)
			pq_unlink_g(P, s, node);
		deactivate = s->backlog[ix] == 0;
		node = info->parent;
	}
	pq_set_defer_limit(P, s, nested);
}

__noinline int pq_remove_g(const struct pq_params *P, struct pq_queues *s, struct pq_bursts *burst, __u32 q, __u64 nb)
{
	if (!P || !s)
		return 0;
	if (P->flat_share)
		pq_remove(P, s, burst, q, nb, 0);
	else
		pq_remove(P, s, burst, q, nb, 1);
	return 0;
}

/* Pqp::queue_of: mix64(flow) mod N (the power-of-two mask is the same value), or the class. */
static __always_inline __u32 pq_queue_of(const struct pq_params *P, const struct rk_pkt *pkt)
{
	__u32 n = P->queues ? P->queues : 1;
	if (P->classify == PQ_CLASSIFY_CLASS)
		return QI(pkt->class < n - 1 ? pkt->class : n - 1);
	return QI(rk_mix64(pkt->flow) % n);
}

/* Pqp::advance: the service owed since the last arrival; a clock that went back serves nothing. */
static __always_inline void pq_advance(const struct pq_params *P, struct pq_queues *s, struct pq_bursts *burst,
				       __u64 *last_ns, __u64 now, const int nested)
{
	if (now > *last_ns) {
		pq_serve(P, s, burst, rk_sat_mul(P->rate, now - *last_ns), nested);
		*last_ns = now;
	}
}

#endif
