"""GPU step: PyTorch's own NCCL process group with ringcc preloaded (docs/pytorch.md).

Run by tests/gpu/run.sh as: LD_PRELOAD=<build>/libnccl.so.2 python3 torch_nccl_preload.py
Checks, on a machine where torch has CUDA: the process maps ringcc's libnccl.so.2 and no
other; the loaded soname exports ringccGetVersion (ncclGetVersion says 23203, as NVIDIA 2.32.3 would); and an all_reduce of a CUDA tensor
on backend 'nccl' (one process, world size 1) either gives the exact result or fails with
ringcc's error naming what is missing (CUDA communicators, until the CUDA executor exists).
Exit 0: checks passed; 1: a check failed; 2: torch has no CUDA here (nothing checked).
"""
import ctypes
import os
import sys


def mapped_libnccl():
    with open("/proc/self/maps") as f:
        return sorted({line.split()[-1] for line in f if "libnccl" in line})


def main():
    import torch
    import torch.distributed as dist

    if not torch.cuda.is_available():
        print("torch_nccl_preload: torch has no CUDA on this machine: nothing checked")
        return 2
    v = ctypes.c_int()
    loaded = ctypes.CDLL("libnccl.so.2")
    loaded.ncclGetVersion(ctypes.byref(v))
    is_ringcc = hasattr(loaded, "ringccGetVersion")  # only ringcc exports it
    maps = mapped_libnccl()
    print(f"torch {torch.__version__}, CUDA {torch.version.cuda}; ncclGetVersion {v.value}; "
          f"mapped: {maps}; torch.cuda.nccl.version() (headers) {torch.cuda.nccl.version()}")
    if not is_ringcc or len(maps) != 1:
        print("torch_nccl_preload: FAIL: ringcc is not the one libnccl.so.2 loaded")
        return 1
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29533")
    dist.init_process_group("nccl", rank=0, world_size=1)
    x = torch.arange(1024, dtype=torch.float32, device="cuda")
    try:
        dist.all_reduce(x)
        torch.cuda.synchronize()
    except RuntimeError as e:  # ringcc's CUDA executor must run it
        print(f"torch_nccl_preload: FAIL: all_reduce on CUDA through ringcc: {e}")
        return 1
    ok = torch.equal(x.cpu(), torch.arange(1024, dtype=torch.float32))
    print(f"torch_nccl_preload: all_reduce on CUDA through ringcc: {'exact' if ok else 'WRONG'}")
    dist.destroy_process_group()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
