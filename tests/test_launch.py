"""The host's run-ahead (g10fast/engine/driver/launch.py): hand-worked sequences and a plain twin."""

import itertools

import numpy as np
import pytest

from g10fast.engine.driver.launch import LaunchOptions, launched_by, sync_kernel
from g10fast.errors import InputError


def twin(K, n_iter, depth, sync_k):
    sync_ks = [sync_k] if isinstance(sync_k, int) else list(sync_k)
    """Kernel by kernel: the host launches g at the first boundary j (start of kernel j) at
    which the queue has room (at most `depth` launched and unfinished: kernel g - depth has
    ended, i.e. j >= g - depth + 1) and no unfinished sync is pending (every sync kernel
    before g has ended), never before its predecessor's launch."""
    out, prev = [], 0
    for g in range(K * n_iter):
        j = prev
        while True:
            ok_q = depth == 0 or j >= g - depth + 1
            syncs = [i * K + s for i in range(n_iter) for s in sync_ks if s >= 0 and i * K + s < g]
            ok_s = all(s < j for s in syncs)
            if ok_q and ok_s:
                break
            j += 1
        j = min(j, g)
        out.append(j)
        prev = j
    return out


def test_hand_worked():
    # K = 4, the loss at kernel 1, two iterations, no queue bound: kernels 0, 1 and 2, 3, 4, 5
    # (everything up to the next loss) launched at the start; 6, 7 after kernel 5 (iteration
    # 1's loss) ended
    L = launched_by(4, 2, LaunchOptions(queue_depth=0, sync="loss"), 1)
    assert L.tolist() == [0, 0, 2, 2, 2, 2, 6, 6]
    # a queue of 2 launches: kernel g waits for g - 2 to end
    L = launched_by(4, 2, LaunchOptions(queue_depth=2, sync="none"), -1)
    assert L.tolist() == [0, 0, 1, 2, 3, 4, 5, 6]
    # both: the later bound wins
    L = launched_by(4, 2, LaunchOptions(queue_depth=3, sync="iteration"), 3)
    assert L.tolist() == [0, 0, 0, 1, 4, 4, 4, 5]
    # unbounded: everything at the start
    assert launched_by(3, 2, LaunchOptions(0, "none"), -1).tolist() == [0] * 6


@pytest.mark.parametrize(
    "K,n_iter,depth,sync_k",
    [
        (K, n, d, s)
        for K, n, d in itertools.product((1, 3, 7), (1, 3), (0, 1, 2, 5, 50))
        for s in (-1, 0, K - 1, K // 2)
    ],
)
def test_against_twin(K, n_iter, depth, sync_k):
    got = launched_by(K, n_iter, LaunchOptions(queue_depth=depth), sync_k).tolist()
    assert got == twin(K, n_iter, depth, sync_k)


@pytest.mark.parametrize(
    "K,n_iter,depth,syncs", [(5, 3, 0, [0, 2]), (5, 3, 2, [1, 3, 4]), (6, 2, 3, [5, 0]), (4, 2, 0, [])]
)
def test_several_syncs_against_twin(K, n_iter, depth, syncs):
    got = launched_by(K, n_iter, LaunchOptions(queue_depth=depth), np.array(syncs)).tolist()
    assert got == twin(K, n_iter, depth, syncs)


def test_several_syncs_hand_worked():
    # K = 4, syncs after kernels 0 and 2 (say, two frees), no queue bound
    L = launched_by(4, 2, LaunchOptions(queue_depth=0), np.array([0, 2]))
    assert L.tolist() == [0, 1, 1, 3, 3, 5, 5, 7]


def test_sync_kernel():
    names = ["Conv2d_Forward", "makeLoss", "Conv2d_Backward", "Apply_Grad"]
    assert sync_kernel(names, "loss") == 1
    assert sync_kernel(names, "iteration") == 3
    assert sync_kernel(names, "none") == -1
    assert sync_kernel(["a", "b"], "loss") == 1  # no loss kernel: the last one


def test_bad_options():
    with pytest.raises(InputError, match="launch_queue_depth"):
        LaunchOptions(queue_depth=-1).check()
    with pytest.raises(InputError, match="sync"):
        LaunchOptions(sync="epoch").check()
    with pytest.raises(InputError, match="sync"):
        launched_by(3, 1, LaunchOptions(), 5)


def test_paper_workload_sync_is_the_loss():
    """On a built-in model the loss kernel lies inside the iteration (forward, then backward):
    the host can run ahead from the loss through the backward pass into the next forward."""
    from g10fast import api

    w = api.builtin_workload("bert-base", 8, "g10-artifact")
    s = sync_kernel(w.kernel_name, "loss")
    assert 0 < s < w.num_kernels - 1 and w.kernel_name[s] == "makeLoss"
    L = launched_by(w.num_kernels, 2, LaunchOptions(), s)
    assert np.all(np.diff(L) >= 0) and np.all(L <= np.arange(len(L)))


def test_host_bound_kernels():
    from g10fast.engine.driver.launch import host_bound_kernels

    assert host_bound_kernels(np.array([1e-6, 4.9e-6, 5e-6, 1e-3])) == 2
    assert host_bound_kernels(np.array([1e-6, 4.9e-6, 5e-6, 1e-3]), launch_us=10.0) == 3
