"""Plain-Python twin of G10's planner (planner spec §5.2–§5.7), written the straightforward
way: every main-loop iteration recomputes every interval's area by direct summation and
re-sorts the whole list, as G10 does. For small workloads only.

The numbers follow g10fast's planner conventions so that the two can be compared exactly:
areas in bytes × cycles (integers). With o10_cxx_sort_order (G10's behaviour) the list is
re-sorted in place each iteration by the plain-Python std::sort (plan.cxx_sort_ids) and
zero-area intervals are taken in the order it leaves them; without it, ties are broken by
time × size then creation order, and the loop stops when the best area is 0. Returns a dict
of the same arrays as MigrationPlan.
"""

from __future__ import annotations

import bisect

from g10fast.planner.plan import cxx_sort_ids

NOT_PRESENT, IN_SSD, IN_CPU, IN_GPU, NOT_KNOWN = 0, 1, 2, 3, 4
D_FITS, D_SPAN1, D_SHORT, D_SSD, D_HOST, D_NO_BW, D_HOST_FULL, D_NO_SLOT = 1, 2, 3, 4, 5, 6, 7, 8


def twin_plan(size, is_global, birth, death, cycles, time_us, time_ext, ivs, p, o):
    """size/is_global/birth/death: per tensor; cycles: per kernel; time_us[K+1], time_ext;
    ivs: list of (tensor, s, e, looped, time_us); p: PlannerParams; o: option dict."""
    K = len(cycles)
    T = len(size)
    total = sum(size) + (size[0] if o["o8_double_count_input"] else 0)
    est = [total] * K
    hints = []
    # §5.3
    for t in range(1, T):
        if o["o3_early_exit"] and max(est) <= p.target:
            break
        if is_global[t] or birth[t] < 0:
            continue
        b = birth[t]
        start = time_us[b] - size[t] * p.malloc_uspB
        j = 0
        if start >= 0:
            j = max(bisect.bisect_right(time_us[: b + 1], start) - 1, 0)
            for k in range(j):
                est[k] -= size[t]
        hints.append((j, t, NOT_KNOWN, IN_GPU))
        d = death[t] if death[t] != -1 else b + 1
        hints.append((d, t, NOT_KNOWN, NOT_PRESENT))
        for k in range(d, K):
            est[k] -= size[t]
    est_prealloc = list(est)

    dur = [time_us[k + 1] - time_us[k] for k in range(K)]
    cap = {
        "rs": [p.b_ssd * d for d in dur],
        "ws": [p.b_ssd * d for d in dur],
        "rp": [p.b_cpu * d for d in dur],
        "wp": [p.b_cpu * d for d in dur],
    }
    bw = {x: [0.0] * K for x in cap}
    full = {x: [False] * K for x in cap}
    cpu = [0] * K

    def free(x, k):
        return 0.0 if full[x][k] else cap[x][k] - bw[x][k]

    def fwd(x, size_, k):
        rest = size_
        while True:
            if not full[x][k]:
                rest = int(rest - free(x, k))
            if rest <= 0 or k == K - 1:
                return k
            k += 1

    def bwd(x, size_, needed):
        rest = size_
        k = needed - 1
        while True:
            if not full[x][k]:
                rest = int(rest - free(x, k))
            if rest <= 0 or k <= 0:
                return k
            k -= 1

    def sim_ssd(s_, pc, size_, k):
        rest = size_
        while rest > 0 and k < K:
            if not full[s_][k]:
                room = cap[s_][k] - bw[s_][k]
                if rest + bw[s_][k] > cap[s_][k]:
                    rest = int(rest - room)
                    bw[pc][k] += room
                    bw[s_][k] = cap[s_][k]
                    full[s_][k] = True
                else:
                    bw[s_][k] += rest
                    bw[pc][k] += rest
                    rest = -1
                if bw[pc][k] >= cap[pc][k]:
                    full[pc][k] = True
            if rest <= 0 or k == K - 1:
                break
            k += 1

    def sim_pcie(pc, s_, size_, k):
        rest = size_
        while rest > 0 and k < K:
            if not full[pc][k]:
                if rest + bw[pc][k] > cap[pc][k]:
                    rest = int(rest - (cap[pc][k] - bw[pc][k]))
                    bw[pc][k] = cap[pc][k]
                    full[pc][k] = True
                    bw[s_][k] = cap[s_][k]
                    full[s_][k] = True
                else:
                    before = bw[pc][k]
                    bw[pc][k] += rest
                    rest = -1
                    over = bw[pc][k] - (cap[pc][k] - cap[s_][k])
                    if over >= 0:
                        if not o["o13_cumulative_spill"]:
                            over = min(over, bw[pc][k] - before)
                        bw[s_][k] += over
                        if bw[s_][k] >= cap[s_][k]:
                            bw[s_][k] = cap[s_][k]
                            full[s_][k] = True
            if rest <= 0 or k == K - 1:
                break
            k += 1

    def area(i):
        t, s, e, looped, _ = ivs[i]
        S = size[t]
        on = [est[k] > p.capacity for k in range(K)]
        if looped:
            if o["o5_looped_area"]:
                c = sum(cycles[k] for k in range(s, K) if on[k])
                if e >= 1 and on[0]:
                    c -= sum(cycles)
                c += sum(cycles[m - 1] for m in range(1, e) if on[m])
            else:
                c = sum(cycles[k] for k in range(s, K) if on[k]) + sum(
                    cycles[k] for k in range(0, e) if on[k]
                )
            return S * c
        lo = fwd("ws", S // 2, s)
        hi = bwd("rs", S // 2, e)
        return S * sum(cycles[k] for k in range(lo, hi) if on[k])

    def find(x, lo, hi):
        j = bisect.bisect_right(time_ext, x) - 1
        return min(max(j, lo), hi - 1)

    I = len(ivs)
    processed = [False] * I
    decision = [0] * I
    ef = [-1] * I
    pfo = [-1] * I
    pff = [-1] * I
    selected = [-1] * I
    offl = []
    it = 0
    cxx = o.get("o10_cxx_sort_order", True)
    perm = list(range(I))
    tsz = [ivs[i][4] * size[ivs[i][0]] for i in range(I)]
    while it < I:
        if max(est) <= p.target:
            break
        if cxx:
            # O-10: G10's in-place std::sort of the list with the area comparator
            ka = [0 if processed[i] else area(i) for i in range(I)]
            cxx_sort_ids(
                perm,
                lambda x, y: (
                    (tsz[x] > tsz[y]) if (ka[x] != 0 and ka[y] != 0 and ka[x] == ka[y]) else ka[x] > ka[y]
                ),
            )
            c = perm[0]
            a = ka[c]
            if processed[c]:
                break
        else:
            keyed = sorted(((0 if processed[i] else area(i), tsz[i], -i) for i in range(I)), reverse=True)
            a, _, mi = keyed[0]
            c = -mi
            if processed[c] or a == 0:
                break
        selected[c] = it
        it += 1
        t, s, e, looped, tm = ivs[c]
        S = size[t]
        ee = e + K if looped else e
        if all(est[j % K] <= p.target for j in range(s, ee)):
            processed[c] = True
            decision[c] = D_FITS
            continue
        if ee - s == 1:
            processed[c] = True
            decision[c] = D_SPAN1
            continue
        sm = p.ssd_lat + p.sys_lat + S / p.b_ssd
        cm = p.sys_lat + S / p.b_cpu
        ssd_safe, ssd_pref = 2 * sm + p.delta * sm, sm + p.delta * sm
        cpu_safe, cpu_pref = 2 * cm + p.delta * cm, cm + p.delta * cm
        cpu_ok = max(cpu) <= p.cpu_line - S
        if tm > ssd_safe:
            if not looped:
                ecl = bisect.bisect_right(time_us, time_us[s] + sm) - 1
                if ecl == s and o["o12_empty_window_crowded"]:
                    crowded = True
                else:
                    crowded = all(full["ws"][k] for k in range(s, max(ecl, s + 1)))
                if crowded and cpu_ok:
                    pf, pe = bwd("rp", S, e), fwd("wp", S, s)
                    if pf > pe:
                        hints.append((s, t, NOT_KNOWN, IN_CPU))
                        decision[c], ef[c], pfo[c] = D_HOST, pe, pf
                        offl.append(c)
                        sim_pcie("rp", "rs", S, pf)
                        sim_pcie("wp", "ws", S, s)
                        for j in range(s, e):
                            cpu[j % K] += S
                    else:
                        processed[c] = True
                        decision[c] = D_NO_BW
                        continue
                else:
                    pf, pe = bwd("rs", S, e), fwd("ws", S, s)
                    if pf > pe:
                        hints.append((s, t, NOT_KNOWN, IN_SSD))
                        decision[c], ef[c], pfo[c] = D_SSD, pe, pf
                        offl.append(c)
                        sim_ssd("rs", "rp", S, pf)
                        sim_ssd("ws", "wp", S, s)
                    else:
                        processed[c] = True
                        decision[c] = D_NO_BW
                        continue
                for k in range(pe + 1, pf):
                    est[k] -= S
            else:
                ecl = find(time_us[s] + sm, s, e + K)
                psi = find(time_ext[e + K] - ssd_pref, s, e + K)
                if psi != s:
                    hints.append((s, t, NOT_KNOWN, IN_SSD))
                    hints.append((psi % K, t, NOT_KNOWN, IN_GPU))
                    decision[c], ef[c], pfo[c], pff[c] = D_SSD, ecl % K, psi % K, psi % K
                else:
                    decision[c] = D_NO_SLOT
                for j in range(ecl + 1, psi):
                    est[j % K] -= S
            processed[c] = True
        elif tm > cpu_safe:
            if not cpu_ok:
                processed[c] = True
                decision[c] = D_HOST_FULL
                continue
            evicted = False
            if not looped:
                pe, pf = fwd("wp", S, s), bwd("rp", S, e)
                if pf > pe:
                    hints.append((s, t, NOT_KNOWN, IN_CPU))
                    decision[c], ef[c], pfo[c] = D_HOST, pe, pf
                    offl.append(c)
                    evicted = True
                    sim_pcie("rp", "rs", S, pf)
                    sim_pcie("wp", "ws", S, s)
                else:
                    decision[c] = D_NO_BW
                for k in range(pe + 1, pf):
                    est[k] -= S
            else:
                ecl = find(time_us[s] + cm, s, e + K)
                psi = find(time_ext[e + K] - cpu_pref, s, e + K)
                if psi != s:
                    hints.append((s, t, NOT_KNOWN, IN_CPU))
                    hints.append((psi % K, t, NOT_KNOWN, IN_GPU))
                    decision[c], ef[c], pfo[c], pff[c] = D_HOST, ecl % K, psi % K, psi % K
                    evicted = True
                else:
                    decision[c] = D_NO_SLOT
                for j in range(ecl + 1, psi):
                    est[j % K] -= S
            processed[c] = True
            if evicted or o["o14_reserve_without_eviction"]:
                for j in range(s, ee):
                    cpu[j % K] += S
        else:
            decision[c] = D_SHORT
            if o["o11_short_stalls"] and cxx:
                # the next sort sees the same keys: a strict maximum stays first for good
                if a != 0 and all(
                    ka[c] > ka[x] or (ka[x] == ka[c] and tsz[c] > tsz[x]) for x in range(I) if x != c
                ):
                    break
                continue
            if o["o11_short_stalls"]:
                break
            processed[c] = True
    est_main = list(est)
    # §5.7
    if o.get("o21_cxx_prefetch_order", True):
        offl = cxx_sort_ids(list(offl), lambda x, y: pfo[x] < pfo[y])
    else:
        offl = sorted(offl, key=lambda c: pfo[c])  # stable: ties keep eviction order
    for c in offl:
        i = pfo[c]
        S = size[ivs[c][0]]
        extra = 0 if o["o16_hoist_overshoot"] else S
        while i > ef[c] + 1 and est[i - 1] + extra < p.target:
            i -= 1
        hints.append((i, ivs[c][0], NOT_KNOWN, IN_GPU))
        pff[c] = i
        for k in range(i, pfo[c]):
            est[k] += S
    return {
        "emitted": hints,
        "decision": decision,
        "evict_finish": ef,
        "prefetch_planned": pfo,
        "prefetch": pff,
        "selected": selected,
        "est_prealloc": est_prealloc,
        "est_main": est_main,
        "est_final": est,
        "cpu_est": cpu,
        "iterations": it,
    }
