"""Eviction rules of the page engine: which GPU page leaves when a page needs a frame and the
GPU is full (simulator spec §8). A rule is a kernel the engine specialises on: `run_engine`
takes it as an argument and passes it down to the general path (`_general_page`), and since
each Numba function is a type of its own, the engine is compiled once per rule with the
rule's code inlined, as if it were written there (nothing is slower for the built-in rules).
The default comparison, which runs both built-in rules, therefore compiles the kernels typed by
the rule (`run_engine`, `_busy_ticks`, `_general_page`) twice when cold; one compile for both
(a run-time choice by the DeepUM flag, tried in f75e45b) saved 6.5 of its 43 CPU s cold but made
warm ResNet152-1280 G10 runs 5-6 % slower in every paired run, and was reverted
(benchmarks/results/page-engine-split.md, step 4).

Built-in rules (`EVICTION_RULES`, named by `PageMode.eviction`):

* `"arrival"`: the artifact's "LRU" (§8.1, `lru` and `prefetch_lru`). Kernel accesses never
  touch the list (O-6), so it is FIFO by GPU arrival: the victim is the first page from the
  cursor ("suggested LRU base") that is resident and not in transfer, else the first such
  page from the head; the cursor moves past it. The artifact's "FIFO" is this same mechanism
  (one rule, not two); a true recency order would need every kernel access to move its pages
  to the tail, which the artifact never does and this engine does not track.
* `"deepum"`: DeepUM's ring (§8.2, `deepUM`): a non-PF victim is the first page from the
  cursor whose tensor is outside the prefetch window, and END is sticky until the next kernel
  starts (O-15); a PF victim is the first page from the head not in transfer, and moves the
  cursor past it when it is the cursor's page. (Its other parts, the window, the dropped dead
  victims and the rescue stages, are DeepUM's migration policy, `PageMode.deepum`.)

A rule defined elsewhere (`eviction_rule`, then `register_eviction` or `PageMode(eviction=
kernel)`) runs on the general per-page path only: the bulk paths (whole-tensor hints on page
ranges, the extent LRU, replayed busy ticks) and the fast paths are specialised to
the built-in rules, so the engine turns them off for it (`simulate_pages`; the results of a
built-in rule are the same either way). Its first run compiles the engine for it (tens of
seconds); the compiled engine is cached on disk like the built-in ones.

The rule kernel's signature (what it sees, all read-only: a rule writes no array):

    rule(pf, srt, tt, pstate, lru, lm, hd, lru_tail, lru_cur, lru_scan, dum_end, tc_c)
        -> (slot, lru_cur, lru_scan, dum_end, tc_c)

* `pf` (bool): the page needing a frame is a demand fault, or of a tensor the current kernel
  requires (§8: `is_pf OR required`).
* `lru`, `lm`, `hd`, `lru_tail`: the arrival ring (O-6, `g10fast.engine.page.lru`): the
  entries `e = lru[s & lm]` at positions `hd <= s < lru_tail`, oldest first, each
  `page << GEN_SHIFT | generation` or -1 (a tombstone); an entry is a possible victim iff
  `_eligible(np.int64(pstate[e >> GEN_SHIFT]), e)` (its page is in the GPU, not in transfer,
  and the entry is not stale). Every GPU page not in transfer has exactly one such entry.
* `pstate`: the page states (`layout`: location bits, F_TRANSFER, F_WAIT, generation).
* `lru_cur`: the cursor (a position; reset to the head at each kernel start and when its page
  leaves), `lru_scan`: entries before it are never eligible again (a scan may start there),
  `dum_end`: DeepUM's sticky END flag; a rule that keeps none of them returns them as given.
* `srt`, `tt`, `tc_c`: the page -> tensor lookup (`_tpos(srt, tc_c, page)` gives the position
  of the page's tensor in `srt`, `srt[1, pos]` its id; `tc_c` is the lookup's cache) and the
  tensor table (`tt[T, TT_REQ]`: required by the current kernel, `tt[T, TT_WIN]`: in DeepUM's
  window, `TT_BIRTH`, `TT_DEATH`, ...).

It returns the victim's ring position `slot` (the engine evicts page `lru[slot & lm] >>
GEN_SHIFT` and leaves a tombstone there), or -1 when it finds none (the stage ends; the run
stops with E_NO_VICTIM, but for DeepUM's non-PF search), and the cursor, scan position, END
flag and lookup cache after its search. The victim's destination is the engine's (§9.2: host
memory, or the SSD when the host is full; DeepUM drops a dead victim).
"""

from __future__ import annotations

import numpy as np

from g10fast.engine.page.helpers import _eligible, _live, _tpos
from g10fast.engine.page.layout import (  # noqa: F401  (for rules: the entry and table layout)
    GEN_SHIFT,
    TT_BIRTH,
    TT_DEATH,
    TT_REQ,
    TT_WIN,
    _kernel_page,
    _u,
)
from g10fast.errors import InputError

#: the decorator of an eviction rule: a link-only kernel without reference counting, inlined
#: into the engine's general path (as `_general_page` is into `_busy_ticks`)
eviction_rule = _kernel_page
#: eligible(np.int64(pstate[page]), e): whether ring entry e (>= 0) may be a victim (its page
#: in the GPU, not in transfer, the entry not stale)
eligible = _eligible
#: tensor_pos(srt, tc_c, page): the position in srt of the page's tensor (its id:
#: srt[1, position]), tc_c being the position of the last lookup (a cache)
tensor_pos = _tpos


@eviction_rule
def arrival(pf, srt, tt, pstate, lru, lm, hd, lru_tail, lru_cur, lru_scan, dum_end, tc_c):
    """§8.1 (the artifact's "LRU": FIFO by GPU arrival, O-6): the first page from the cursor
    that is resident and not in transfer, else from the head; the cursor moves past it.
    Entries before the cursor are never eligible (they were in transfer when passed, and such
    pages only leave the list), so one scan from the cursor is the artifact's
    scan-then-rescan."""
    slot = -1
    s = lru_cur
    if s < hd:
        s = hd
    while s < lru_tail:
        e = lru[_u(s & lm)]
        if e >= 0:
            vs = np.int64(pstate[_u(e >> GEN_SHIFT)])
            if _eligible(vs, e):
                slot = s
                break
        s += 1
    if slot < 0:
        # The scan starts past the entries an earlier one found ineligible: those can never
        # become eligible (tombstones stay dead until a compaction, and a GPU page in
        # transfer leaves the GPU before its flag clears), so this only saves rescanning a
        # growing prefix.
        slot, lru_scan = _first_eligible(lru, lm, pstate, hd, lru_tail, lru_scan)
    if slot >= 0:
        lru_cur = slot + 1
    return slot, lru_cur, lru_scan, dum_end, tc_c


@eviction_rule
def deepum(pf, srt, tt, pstate, lru, lm, hd, lru_tail, lru_cur, lru_scan, dum_end, tc_c):
    """§8.2 (DeepUM's ring): non-PF, the first live page from the cursor whose tensor is not in
    the window, END sticky (O-15); PF, the first page from the head not in transfer, which
    moves the cursor past it when it is the cursor's page."""
    slot = -1
    if not pf:
        if dum_end == 0:
            s = lru_cur
            if s < hd:
                s = hd
            while s < lru_tail:
                e = lru[_u(s & lm)]
                if e >= 0:
                    vp = e >> GEN_SHIFT
                    vs = np.int64(pstate[_u(vp)])
                    if _live(vs, e):
                        tc_c = _tpos(srt, tc_c, vp)
                        if not tt[srt[1, _u(tc_c)], TT_WIN]:
                            slot = s
                            break
                s += 1
            if slot >= 0:
                lru_cur = slot + 1
            else:
                lru_cur = lru_tail
                dum_end = 1
        return slot, lru_cur, lru_scan, dum_end, tc_c
    # (as `arrival`'s second scan: quadratic in DeepUM without it)
    slot, lru_scan = _first_eligible(lru, lm, pstate, hd, lru_tail, lru_scan)
    if slot >= 0 and lru_cur == slot:
        lru_cur = slot + 1
    return slot, lru_cur, lru_scan, dum_end, tc_c


@_kernel_page
def _first_eligible(lru, lm, pstate, hd, lru_tail, lru_scan):
    """The first eligible entry's position from max(lru_scan, hd) (-1: none) and the position
    where the scan stopped (the new `lru_scan`)."""
    slot = -1
    s = lru_scan
    if s < hd:
        s = hd
    while s < lru_tail:
        e = lru[_u(s & lm)]
        if e >= 0:
            vs = np.int64(pstate[_u(e >> GEN_SHIFT)])
            if _eligible(vs, e):
                slot = s
                break
        s += 1
    return slot, s


#: the built-in rules, by `PageMode.eviction` name (the engine's bulk paths know these)
BUILTIN = ("arrival", "deepum")
#: every registered rule: name -> kernel
EVICTION_RULES = {"arrival": arrival, "deepum": deepum}


def register_eviction(name: str, rule) -> None:
    """Register an eviction rule kernel (decorated with `eviction_rule`) under `name`, for
    `PageMode(eviction=name)`. A built-in name cannot be taken; registering the same kernel
    again is a no-op."""
    if not isinstance(name, str) or not name:
        raise InputError("an eviction rule's name must be a non-empty string", param="policy.eviction")
    old = EVICTION_RULES.get(name)
    if old is rule:
        return
    if old is not None:
        raise InputError(f"eviction rule {name!r} is already registered", param="policy.eviction")
    if not callable(rule):
        raise InputError(f"eviction rule {name!r} is not a kernel", param="policy.eviction")
    EVICTION_RULES[name] = rule


def eviction_name(eviction) -> str:
    """The registered name of `eviction` (a name, or a rule kernel: registered under its
    module and qualified name if it is not yet, in place of an earlier kernel of that name,
    as a redefinition in an interactive session makes)."""
    if isinstance(eviction, str):
        if eviction not in EVICTION_RULES:
            raise InputError(
                f"unknown eviction rule {eviction!r} (registered: {', '.join(sorted(EVICTION_RULES))})",
                param="policy.eviction",
            )
        return eviction
    for name, rule in EVICTION_RULES.items():
        if rule is eviction:
            return name
    fn = getattr(eviction, "py_func", eviction)
    name = f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', repr(fn))}"
    if not callable(eviction):
        raise InputError(f"eviction rule {eviction!r} is not a kernel", param="policy.eviction")
    EVICTION_RULES[name] = eviction
    return name


def eviction_kernel(name: str):
    """The rule kernel registered under `name`."""
    return EVICTION_RULES[eviction_name(name)]
