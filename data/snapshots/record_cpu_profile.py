"""Record `mlp-cpu-profiler.pickle`: a real PyTorch run on the CPU (two SGD training steps of
a 64-128-10 MLP on a batch of 32, float32) turned into a memory snapshot by torch's own
`torch.cuda._memory_viz._profile_to_snapshot`. `torch.cuda.memory._record_memory_history`
needs CUDA (specs/ecosystem.md); torch.profiler with `profile_memory=True` records the CPU
allocator's allocations and frees, which torch writes in the snapshot schema: alloc /
free_requested / free_completed entries with frames, tensors that existed before the
profiler as blocks of `segments`, no segment actions (its segments are address spans).

    python data/snapshots/record_cpu_profile.py      # torch 2.13, CPU
"""

import pickle
from pathlib import Path

import torch
from torch.cuda._memory_viz import _profile_to_snapshot


def main(out=None):
    out = Path(__file__).with_name("mlp-cpu-profiler.pickle") if out is None else Path(out)
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10))
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    x = torch.randn(32, 64)
    y = torch.randint(0, 10, (32,))
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU],
                                profile_memory=True, record_shapes=True, with_stack=True) as prof:
        for _ in range(2):
            loss = torch.nn.functional.cross_entropy(m(x), y)
            loss.backward()
            opt.step()
            opt.zero_grad()
    snap = _profile_to_snapshot(prof)
    with open(out, "wb") as f:
        pickle.dump(snap, f, protocol=4)
    return out


if __name__ == "__main__":
    print(main())
