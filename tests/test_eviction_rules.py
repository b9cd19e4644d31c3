"""Eviction rules as the unit of a page-engine policy (g10fast.engine.page.rules): MRU and a
seeded random eviction defined here, as rule kernels, each the eviction of a policy registered
in the test; run under the engine's invariant checker (check="full").

The hand-worked case: four one-page global tensors A, B, C, D read by kernels 0-3 in turn, on a
GPU of 3 frames, two iterations (A B C D A B C D), demand paging only. The artifact's "LRU"
(FIFO by arrival, O-6) evicts the page that would be read next every time: all 8 reads fault,
4 pages fetched in each iteration. MRU (by arrival: kernel hits never refresh, as for the
artifact's list) lets D evict C in the first iteration; in the second, A and B hit, C evicts
the newest page, D, and D evicts C: 2 pages fetched. The random rule is checked against a
plain-Python twin of the same draw.

Two extra compiles of the engine (one per rule kernel), shared by all tests here."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from g10fast.engine.page import PageMode, kernels as pk, simulate_pages, system_params
from g10fast.engine.page.rules import (
    EVICTION_RULES,
    GEN_SHIFT,
    TT_REQ,
    eligible,
    eviction_name,
    eviction_rule,
    tensor_pos,
)
from g10fast.errors import InputError
from g10fast.workload.model import PAGE_SIZE, Graph, build_workload, csr_from_lists
from synth import tiny_cfg


@eviction_rule
def mru(pf, srt, tt, pstate, lru, lm, hd, lru_tail, lru_cur, lru_scan, dum_end, tc_c):
    """The most recently arrived page that may be a victim, pages of the tensors the current
    kernel requires last (else a fault could evict the page it just brought)."""
    fallback = -1
    s = lru_tail - 1
    while s >= hd:
        e = lru[s & lm]
        if e >= 0:
            p = e >> GEN_SHIFT
            if eligible(np.int64(pstate[p]), e):
                tc_c = tensor_pos(srt, tc_c, p)
                if tt[srt[1, tc_c], TT_REQ] == 0:
                    return s, lru_cur, lru_scan, dum_end, tc_c
                if fallback < 0:
                    fallback = s
        s -= 1
    return fallback, lru_cur, lru_scan, dum_end, tc_c


def _draw(tail, n):
    """The random rule's draw (Knuth's multiplicative hash of the ring's tail position): an
    offset in 0..n-1. Plain Python: the twin's (the rule computes the same)."""
    return (tail * 2654435761) % 4294967296 % n


@eviction_rule
def random_rule(pf, srt, tt, pstate, lru, lm, hd, lru_tail, lru_cur, lru_scan, dum_end, tc_c):
    """A ring position drawn from the first one that may be a victim to the tail, and the first
    page there or after it (wrapping around once) that may be a victim and whose tensor the
    current kernel does not require; -1 when there is none. (The scan position moves to that
    first entry: those before it never become victims again.)"""
    s = max(hd, lru_scan)
    while s < lru_tail:
        e = lru[s & lm]
        if e >= 0 and eligible(np.int64(pstate[e >> GEN_SHIFT]), e):
            break
        s += 1
    lru_scan = s
    n = lru_tail - s
    if n <= 0:
        return -1, lru_cur, lru_scan, dum_end, tc_c
    j = s + (lru_tail * 2654435761) % 4294967296 % n
    for i in range(n):
        r = j + i
        if r >= lru_tail:
            r -= n
        e = lru[r & lm]
        if e >= 0 and eligible(np.int64(pstate[e >> GEN_SHIFT]), e):
            tc_c = tensor_pos(srt, tc_c, e >> GEN_SHIFT)
            if tt[srt[1, tc_c], TT_REQ] == 0:
                return r, lru_cur, lru_scan, dum_end, tc_c
    return -1, lru_cur, lru_scan, dum_end, tc_c


def _cyclic(n_tensors=4, reads_per_iter=None):
    """One-page global tensors read one per kernel, in turn (kernel k reads k % n_tensors)."""
    K = reads_per_iter or n_tensors
    in_ptr, in_idx = csr_from_lists([[k % n_tensors] for k in range(K)])
    out_ptr, out_idx = csr_from_lists([[] for _ in range(K)])
    g = Graph(
        name="cyclic",
        batch_size=1,
        raw_size=np.full(n_tensors, PAGE_SIZE, np.int64),
        is_global=np.ones(n_tensors, bool),
        kernel_name=[f"K{k}" for k in range(K)],
        kernel_parent=[f"{k}:read" for k in range(K)],
        in_ptr=in_ptr,
        in_idx=in_idx,
        out_ptr=out_ptr,
        out_idx=out_idx,
    )
    exe = np.full(K, 100_000, np.int64)
    return build_workload(g, exe, 2 * exe, 2 * exe, np.zeros(K, np.int64))


def _fetched(eviction, frames=3, check="full"):
    """Pages fetched into the GPU per iteration of the cyclic case under `eviction`."""
    sp = dataclasses.replace(system_params(tiny_cfg(frames, 1000, "lru")), eviction=eviction_name(eviction))
    run = simulate_pages(_cyclic(), sp, check=check)
    assert run.extra["invariant_checks"] > 0
    return run.pcie[:, pk.PC_IN].tolist(), run


def _twin(victim, frames=3, n_tensors=4, iterations=2):
    """Plain Python: the pages fetched per iteration of the cyclic case. `victim(pos, tail)`
    chooses the victim among the resident pages, `pos` mapping each to its ring position (its
    arrival's number), `tail` the number of arrivals so far."""
    pos, tail, out = {}, 0, []
    for _ in range(iterations):
        n = 0
        for t in range(n_tensors):
            if t in pos:
                continue
            if len(pos) == frames:
                del pos[victim(pos, tail)]
            pos[t] = tail
            tail += 1
            n += 1
        out.append(n)
    return out


def _random_twin(pos, tail):
    first = min(pos.values())
    j = first + _draw(tail, tail - first)
    after = [p for p in pos if pos[p] >= j]
    return min(after or pos, key=pos.get)


def test_twin_hand_worked():
    # the twin itself, on the hand-worked numbers of the module's docstring
    assert _twin(lambda pos, tail: min(pos, key=pos.get)) == [4, 4]  # FIFO by arrival
    assert _twin(lambda pos, tail: max(pos, key=pos.get)) == [4, 2]  # MRU


def test_arrival_thrashes_mru_does_not():
    assert _fetched("arrival")[0] == [4, 4]
    got, run = _fetched(mru)
    assert got == [4, 2]
    # the evicted pages went to host memory (globals are alive): one page stays there
    assert run.host_used == 1 and run.gpu_used == 3


def test_random_rule_matches_its_twin():
    got, _ = _fetched(random_rule)
    assert got == _twin(_random_twin)
    assert got[0] == 4 and got != [4, 4]  # (the draw keeps a page the FIFO evicts)


def test_rules_by_name_and_errors():
    name = eviction_name(mru)  # registered on first use, by its qualified name
    assert name == f"{__name__}.mru"
    assert EVICTION_RULES[name] is mru and eviction_name(name) == name
    with pytest.raises(InputError, match="unknown eviction rule 'nope'"):
        eviction_name("nope")
    with pytest.raises(InputError, match="DeepUM's ring reads DeepUM's window"):
        system_params_with(PageMode(eviction="deepum"))
    with pytest.raises(InputError, match="goes with its ring"):
        system_params_with(PageMode(deepum=True, prefetch_degree=2, eviction="arrival"))


def system_params_with(mode):
    from g10fast.engine.page import page_params
    from g10fast.spec import builtin_spec

    return page_params(builtin_spec("vit", 8, "g10-artifact", "lru").system, mode)


# ---- the same rules as policies of the test's own, through g10fast.run.run ----


def _mode_of(rule):
    def engine_mode(options, engine):
        return PageMode(is_uvm=True, use_prefetch=False, num_iteration=engine.num_iteration, eviction=rule)

    return engine_mode


@pytest.fixture
def rule_policies():
    from g10fast import policies
    from g10fast.policies.registry import PolicyRecord

    recs = [
        PolicyRecord(
            name=name,
            display=name.upper(),
            engine="page",
            plan_depends_on_host=False,
            engine_mode=_mode_of(rule),
            description=f"demand paging, {name} eviction (a test's rule kernel)",
        )
        for name, rule in (("mru_test", mru), ("random_test", random_rule))
    ]
    for rec in recs:
        policies.register(rec)
    yield [r.name for r in recs]
    for rec in recs:
        policies.unregister(rec.name)


def test_rule_policies_run_under_check(rule_policies):
    from g10fast.run import run
    from g10fast.spec import builtin_spec

    def fetched(policy):
        res = run(
            builtin_spec("vit", 1, "g10-artifact", policy, overrides={"gpu.memory_gb": 0.02}), check="full"
        )
        assert res["status"] == "ok" and res["invariant_checks"] > 0
        return res, [it["pages"]["incoming"] for it in res["iterations"]]

    base, lru = fetched("lru")
    for policy, rule in zip(rule_policies, (mru, random_rule)):
        res, pages = fetched(policy)
        assert res["policy"] == policy and res["system"]["eviction"] == eviction_name(rule)
        # the first iteration fetches at least what it touches first; another eviction
        # order moves other pages
        assert pages != lru
    assert base["system"]["eviction"] == "arrival"
