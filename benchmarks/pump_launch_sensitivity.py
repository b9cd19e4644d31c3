"""How PUMP's gain over naive UM depends on the host's run-ahead bounds (launch queue depth,
sync point), both on the caching allocator, four paper points (docs/pump.md).

    python benchmarks/pump_launch_sensitivity.py > benchmarks/results/pump_launch_sensitivity.md
"""
from g10fast.validate import claims_pump as cp
import numpy as np
from g10fast.engine.launch import host_bound_kernels
w = cp._workload("bert-base", 256)
print("bert-256 kernels", w.num_kernels, "under 10us", host_bound_kernels(w.exec_cycles / 1.2e9, 10.0), "under 5us", host_bound_kernels(w.exec_cycles / 1.2e9, 5.0), "min us", w.exec_cycles.min()/1.2e3)
pts=[("bert-base",256,1.5),("inceptionv3",1536,1.5),("resnet152",1280,3.0),("senet154",1024,1.5)]
vars_=[("defaults",()),("depth 333",(("launch_queue_depth",333),)),("depth 100",(("launch_queue_depth",100),)),
       ("depth 3000",(("launch_queue_depth",3000),)),("sync iteration",(("sync","iteration"),)),("sync none",(("sync","none"),))]
print("| point | "+" | ".join(v for v,_ in vars_)+" |")
print("|---|"+"---|"*len(vars_))
for m,b,R in pts:
    tu=cp._time(m,b,R,"uvm",(),cp.CACHING)
    print(f"| {m} {b} {R:g}x | "+" | ".join(f"{tu/cp._time(m,b,R,'pump',o,cp.CACHING):.2f}" for _,o in vars_)+" |", flush=True)
