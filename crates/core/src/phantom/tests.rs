use super::*;
use crate::policy::PolicyNode;

fn build(spec: &str, n: usize, weights: Option<&[u32]>) -> (PhantomPolicy, PhantomQueues) {
    let p = PhantomPolicy::compile(&PolicyNode::resolve(spec, n, weights).unwrap()).unwrap();
    let s = PhantomQueues::new(&p);
    (p, s)
}

fn occ(p: &PhantomPolicy, s: &PhantomQueues, n: usize) -> Vec<u64> {
    (0..n).map(|q| s.occupancy(p, q)).collect()
}

#[test]
fn reciprocal_division_is_exact() {
    for w in [1u64, 2, 3, 7, 16, 1000, 65_537, u32::MAX as u64 * 1024] {
        let r = u64::MAX / w;
        for d in [0, 1, w - 1, w, w + 1, 12_345_678_901, u64::MAX / 3, u64::MAX - 1, u64::MAX] {
            assert_eq!(div_rem_by_reciprocal(d, w, r), (d / w, d % w), "{d}/{w}");
        }
    }
}

/// The defer limit's level is taken from a hand-out (activation, flat-fair service) instead
/// of a scan where it can be: after every operation that sets the limit, it must be what a
/// fresh scan of the queues gives (an off-by-one level changes few verdicts, so the golden
/// digests alone would not notice).
#[test]
fn defer_limit_matches_a_fresh_scan() {
    for (spec, weights) in [("fair", None), ("weighted", Some(&[1, 2, 3, 5, 8, 13, 21, 34][..]))] {
        let (p, mut s) = build(spec, 8, weights);
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move |n: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n
        };
        let mut checked = 0;
        for _ in 0..50_000 {
            let sets_limit = if next(2) == 0 {
                let q = next(8) as usize;
                let empty = s.occ(&p)[q] == 0;
                s.add(&p, q, (1 + next(3000)) * 1_000_000, &mut |_, _| {});
                empty
            } else {
                let budget = if next(50) == 0 { next(30_000) } else { next(3_500) } * 1_000_000;
                let sets = s.root().backlog > 0 && budget > 0 && s.deferred.saturating_add(budget) >= s.defer_limit;
                s.serve(&p, budget, &mut |_, _| {});
                sets
            };
            if sets_limit && s.root().active_len > 0 {
                let mut fresh = s.clone();
                fresh.set_defer_limit(&p);
                let state = |t: &PhantomQueues| (t.defer_limit, t.weight_reciprocal, t.root().head_queue);
                assert_eq!(state(&s), state(&fresh), "{spec}");
                checked += 1;
            }
        }
        assert!(checked > 5_000, "{spec}: {checked}");
    }
}

#[test]
fn fair_water_fills_max_min() {
    let (p, mut s) = build("fair", 3, None);
    s.add(&p, 0, 10, &mut |_, _| {});
    s.add(&p, 1, 100, &mut |_, _| {});
    s.add(&p, 2, 100, &mut |_, _| {});
    // 10 goes to queue 0 (it empties), the other 50 split evenly.
    s.serve(&p, 60, &mut |_, _| {});
    assert_eq!(occ(&p, &s, 3), vec![0, 75, 75]);
    assert_eq!(s.backlog(), 150);
    s.serve(&p, 1, &mut |_, _| {});
    assert_eq!(s.occupancy(&p, 1) + s.occupancy(&p, 2), 149);
    assert_eq!(s.backlog(), 149);
}

/// Flat policies that list their queues out of order take the leaf lookup, not the
/// in-order shortcut: each queue is served its own share.
#[test]
fn flat_policies_listing_queues_out_of_order() {
    for (spec, want) in [("fair(2, 0, 1)", vec![0, 130, 630]), ("weighted(2:1, 0:3, 1:3)", vec![0, 95, 665])] {
        let (p, mut s) = build(spec, 3, None);
        assert!(!p.flat_in_order, "{spec}");
        s.add(&p, 1, 200, &mut |_, _| {});
        s.add(&p, 2, 700, &mut |_, _| {});
        // Deferred, then handed out when queue 0 joins, then water-filled until it empties.
        s.serve(&p, 100, &mut |_, _| {});
        s.add(&p, 0, 10, &mut |_, _| {});
        s.serve(&p, 50, &mut |_, _| {});
        assert_eq!(occ(&p, &s, 3), want, "{spec}");
    }
    let (p, _) = build("weighted(0:2, 1:1, 2:1)", 3, None);
    assert!(p.flat_in_order);
}

#[test]
fn weighted_and_priority_and_nested() {
    let (p, mut s) = build("weighted", 2, Some(&[1, 3]));
    s.add(&p, 0, 1000, &mut |_, _| {});
    s.add(&p, 1, 1000, &mut |_, _| {});
    s.serve(&p, 400, &mut |_, _| {});
    assert_eq!(occ(&p, &s, 2), vec![900, 700]);

    let (p, mut s) = build("priority", 3, None);
    s.add(&p, 2, 100, &mut |_, _| {});
    s.add(&p, 1, 100, &mut |_, _| {});
    s.serve(&p, 150, &mut |_, _| {});
    assert_eq!(occ(&p, &s, 3), vec![0, 0, 50]);

    let (p, mut s) = build("priority(0, weighted(1:1, 2:2))", 3, None);
    s.add(&p, 0, 30, &mut |_, _| {});
    s.add(&p, 1, 1000, &mut |_, _| {});
    s.add(&p, 2, 1000, &mut |_, _| {});
    s.serve(&p, 330, &mut |_, _| {});
    assert_eq!(occ(&p, &s, 3), vec![0, 900, 800]);
    assert_eq!(s.backlog(), 1700);
}

#[test]
fn share_floor_bounds_expected_share_from_below() {
    // Every subset of active queues (8 queues: all 256), for share, priority and nested trees.
    for (spec, weights) in [
        ("fair", None),
        ("weighted", Some(&[1, 2, 3, 4, 5, 6, 7, 9][..])),
        ("priority", None),
        ("priority(0, fair(1, 2, 3), weighted(4:3, 5:1, 6:2, 7:1))", None),
        ("weighted(fair(0, 1, 2):2, priority(3, 4):1, weighted(5:1, 6:3, 7:1):3)", None),
    ] {
        let (p, _) = build(spec, 8, weights);
        let budget = 1_000_000_007;
        let mut tight = 0;
        for set in 0u32..256 {
            let mut s = PhantomQueues::new(&p);
            for q in (0..8).filter(|q| set & (1 << q) != 0) {
                s.add(&p, q, 1000, &mut |_, _| {});
            }
            for q in 0..8 {
                let floor = p.share_floor(q, budget);
                let share = s.expected_share(&p, q, budget, &|_| 0);
                assert!(floor <= share, "{spec}: queue {q}, active {set:08b}: {floor} > {share}");
                tight += (floor == share && set == 255) as u32;
            }
        }
        // With every queue active and no demand the floor is reached (except below priority).
        assert!(tight > 0, "{spec}");
    }
}

#[test]
fn outranked_only_by_a_backlogged_higher_branch() {
    let (p, mut s) = build("weighted(priority(0, weighted(1:1, 2:2)):1, fair(3, 4):1)", 5, None);
    let none: Vec<bool> = (0..5).map(|q| s.outranked(&p, q)).collect();
    assert_eq!(none, vec![false; 5]);
    s.add(&p, 2, 5, &mut |_, _| {});
    s.add(&p, 3, 5, &mut |_, _| {});
    // Siblings under a share node never outrank each other, nor does a lower class.
    assert_eq!((0..5).map(|q| s.outranked(&p, q)).collect::<Vec<_>>(), vec![false; 5]);
    s.add(&p, 0, 5, &mut |_, _| {});
    assert_eq!((0..5).map(|q| s.outranked(&p, q)).collect::<Vec<_>>(), vec![false, true, true, false, false]);
    // Once the higher class is served empty, the lower ones are no longer outranked.
    s.serve(&p, 10, &mut |_, _| {});
    assert_eq!(s.occupancy(&p, 0), 0);
    assert!(!s.outranked(&p, 1) && !s.outranked(&p, 2));
}

#[test]
fn expected_share_follows_policy() {
    let (p, mut s) = build("priority(0, weighted(1:1, 2:2))", 3, None);
    // Queue 0 is greedy once it has sent something.
    let greedy = |q| if q == 0 { u64::MAX } else { 0 };
    let idle = |_| 0;
    // Alone, a queue expects the whole rate.
    assert_eq!(s.expected_share(&p, 1, 900, &idle), 900);
    assert_eq!(s.expected_share(&p, 1, 900, &greedy), 0, "a greedy higher class counts even between packets");
    s.add(&p, 2, 5, &mut |_, _| {});
    assert_eq!(s.expected_share(&p, 1, 900, &idle), 300);
    assert_eq!(s.expected_share(&p, 2, 900, &idle), 900);
    s.add(&p, 0, 5, &mut |_, _| {});
    assert_eq!(s.expected_share(&p, 0, 900, &greedy), 900);
    assert_eq!(s.expected_share(&p, 2, 900, &greedy), 0);
    let uses_300 = |q| if q == 0 { 300 } else { 0 };
    assert_eq!(s.expected_share(&p, 2, 900, &uses_300), 600);
    assert_eq!(s.expected_share(&p, 1, 900, &uses_300), 200);
}

/// Two equal queues served one nano-byte short of both: the remainder's nano-byte empties the
/// first. It must leave the active list, or its next arrival lists it twice and it is served
/// a double share from then on (the one-each remainder did that).
#[test]
fn a_queue_the_remainder_empties_leaves_the_active_list() {
    for (spec, weights) in [("fair", None), ("weighted", Some(&[1, 1, 1][..]))] {
        let (p, mut s) = build(spec, 3, weights);
        s.add(&p, 0, 3, &mut |_, _| {});
        s.add(&p, 1, 3, &mut |_, _| {});
        s.serve(&p, 5, &mut |_, _| {});
        assert_eq!(occ(&p, &s, 3), [0, 1, 0], "{spec}");
        s.add(&p, 0, 7, &mut |_, _| {});
        let mut active = Vec::new();
        s.active_queues(&p, &mut active);
        active.sort();
        assert_eq!(active, [0, 1], "{spec}");
        s.serve(&p, 6, &mut |_, _| {});
        assert_eq!(occ(&p, &s, 3), [2, 0, 0], "{spec}: q1 drains its 1, q0 takes the other 5");
    }
}
