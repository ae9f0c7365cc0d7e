"""A peer that dies, or stops calling, fails the survivor's Work with an exception that names
the collective, within a bounded time; nothing hangs. NCCL_TIMEOUT is 3 s here.

  killed: rank 1 is SIGKILLed while rank 0 waits in an all_reduce; ringcc sees the process
          leave (it watches its peers) and fails the operation long before the timeout.
  silent: rank 1 stays alive but never calls; rank 0's all_reduce fails at NCCL_TIMEOUT.
  ddp:    rank 1 is killed between two DDP steps; rank 0's backward raises.
After the failure the group refuses further work with an exception too (ringcc's
communicator keeps its error), again without waiting.
"""

import os
import signal
import time

import torch
import torch.distributed as dist

import harness

TIMEOUT_S = 3


def expect_failure(what, limit_s, call=None, words=("ncclAllReduce",)):
    """call() (default: an async all_reduce, then Work.wait) must raise RuntimeError naming
    `words` within limit_s."""
    t = torch.ones(1 << 20)
    call = call or (lambda: dist.all_reduce(t, async_op=True).wait())
    start = time.monotonic()
    try:
        call()
    except RuntimeError as e:
        took = time.monotonic() - start
        print(f"{what}: failed after {took:.2f} s: {str(e)[:300]}", flush=True)
        missing = [w for w in words if w not in str(e)]
        assert not missing, f"{what}: the error does not name {missing}: {e}"
        assert took < limit_s, f"{what}: took {took:.1f} s, limit {limit_s} s"
        return
    raise AssertionError(f"{what}: succeeded without its peer")


def killed(rank, n):
    dist.all_reduce(torch.ones(4))  # connections made, both alive
    if rank == 1:
        time.sleep(1.0)  # rank 0 is waiting inside its all_reduce by now
        os.kill(os.getpid(), signal.SIGKILL)
    expect_failure("killed peer", limit_s=1.0 + TIMEOUT_S / 2)
    # A blocking call raises too (Work.wait() of a failed operation raises).
    expect_failure("after the failure", limit_s=1.0, call=lambda: dist.all_reduce(torch.ones(2)))


def silent(rank, n):
    dist.all_reduce(torch.ones(4))
    if rank == 1:
        time.sleep(TIMEOUT_S + 4)  # alive, but never joins; rank 0 gives up meanwhile
        return
    expect_failure("silent peer", limit_s=TIMEOUT_S + 3)
    expect_failure("after the failure", limit_s=1.0)


def ddp_killed(rank, n):
    """DDP waits on the futures of its bucket all-reduces: a peer killed before backward makes
    loss.backward() raise, not hang."""
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(64, 64))
    model(torch.ones(2, 64)).sum().backward()  # one good step
    if rank == 1:
        os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(0.5)
    expect_failure("DDP backward, peer killed", limit_s=TIMEOUT_S + 3,
                   call=lambda: model(torch.ones(2, 64)).sum().backward(),
                   words=("ncclAllReduce", "peer"))


def main():
    env = {"NCCL_TIMEOUT": str(TIMEOUT_S * 1000)}
    codes = harness.launch(killed, 2, env=env, timeout=60)
    assert codes == [0, -signal.SIGKILL], f"killed: exit codes {codes}, want [0, -9]"
    codes = harness.launch(silent, 2, env=env, timeout=60)
    assert codes == [0, 0], f"silent: exit codes {codes}"
    codes = harness.launch(ddp_killed, 2, env=env, timeout=60)
    assert codes == [0, -signal.SIGKILL], f"ddp_killed: exit codes {codes}, want [0, -9]"
    print("ok fault")


if __name__ == "__main__":
    main()
