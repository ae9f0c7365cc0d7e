"""Receives from any source (dist.recv(t) without src, dist.irecv(t) without src) on ringcc,
which has to match senders itself (NCCL names the peer of every receive; _torch_p2p's doc
says how). Usage: test_anysource.py NRANKS (3 or more: several senders).

Checks: rank 0 receives from every other rank, twice each, without naming the source: each
message comes with its sender's rank (what dist.recv returns and the Work's _source_rank
says), each sender's messages in the order sent, all of them once; named and any-source
receives mixed, where the named one must get the message the any-source one left; ranks
receiving from any source in turn (not only rank 0); and a receive nobody sends to fails in
the group's timeout, naming the rank, instead of hanging; a Work that is not a receive has no
source rank; RINGCC_ANY_SOURCE=0 turns it off for a group (a clear error, named receives go on).
"""

import datetime
import os
import time

import torch
import torch.distributed as dist

import harness
from test_collectives import expect_error, same


def message(src, k, numel=1000):
    return torch.arange(numel, dtype=torch.float64) + src * 1000 + k * 0.5


def decode(t):
    """(sender, k) of a message()."""
    src, k = int(t[0].item() // 1000), (t[0].item() % 1000) / 0.5
    return src, int(k)


def check_many_senders(rank, n):
    if rank != 0:
        for k in range(2):
            dist.send(message(rank, k), 0)
        return
    seen = {}
    for _ in range(2 * (n - 1)):
        t = torch.empty(1000, dtype=torch.float64)
        src = dist.recv(t)  # no src: from any
        assert src == decode(t)[0], f"recv returned {src}, but the message is {decode(t)}"
        assert torch.equal(t, message(*decode(t))), f"message from {src} corrupted"
        seen.setdefault(src, []).append(decode(t)[1])
    want = {r: [0, 1] for r in range(1, n)}
    assert seen == want, f"received {seen}, want every sender's 0 then 1: {want}"
    print(f"ok dist.recv from any source: {2 * (n - 1)} messages from {n - 1} senders")


def check_irecv(rank, n):
    if rank == 0:
        t = torch.empty(1000, dtype=torch.float64)
        work = dist.irecv(t)
        work.wait()
        src = work._source_rank()
        assert 0 < src < n and torch.equal(t, message(src, 7)), f"irecv: {src} {decode(t)}"
        print(f"ok irecv without src: from {src}")
    elif rank == n - 1:
        dist.send(message(rank, 7), 0)


def check_mixed(rank, n):
    """Rank 0: any, then named from rank 1, then any. Rank 1 sends twice, rank 2 once: however
    the first any-source receive matches, the named one must get rank 1's next message."""
    if rank == 0:
        bufs = [torch.empty(1000, dtype=torch.float64) for _ in range(3)]
        first = dist.recv(bufs[0])
        named = dist.recv(bufs[1], src=1)
        last = dist.recv(bufs[2])
        got = [decode(b) for b in bufs]
        assert named == 1 and {first, last} == {1, 2}, f"sources {first} {named} {last}"
        from_1 = [k for s, k in got if s == 1]
        assert from_1 == [0, 1], f"rank 1's messages arrived as {from_1}, want [0, 1]"
        assert sorted(got) == [(1, 0), (1, 1), (2, 0)], f"got {got}"
        print(f"ok named and any-source receives mixed: sources {first}, {named}, {last}")
    elif rank == 1:
        dist.send(message(1, 0), 0)
        dist.send(message(1, 1), 0)
    elif rank == 2:
        dist.send(message(2, 0), 0)


def check_every_receiver(rank, n):
    """Each rank in turn receives one message from every other rank, from any source."""
    for receiver in range(n):
        if rank == receiver:
            srcs = []
            for _ in range(n - 1):
                t = torch.empty(1000, dtype=torch.float64)
                s = dist.recv(t)
                assert torch.equal(t, message(s, receiver)), f"{receiver} from {s}: {decode(t)}"
                srcs.append(s)
            assert sorted(srcs) == [r for r in range(n) if r != receiver], f"sources {srcs}"
        else:
            dist.send(message(rank, receiver), receiver)
        dist.barrier()
    if rank == 0:
        print("ok every rank received from any source in turn")


def check_timeout(rank, n):
    group = dist.new_group(list(range(n)), timeout=datetime.timedelta(seconds=2))
    if rank == 0:
        start = time.monotonic()
        try:
            dist.recv(torch.empty(3), group=group)
        except RuntimeError as e:
            took = time.monotonic() - start
            assert "no rank sent to rank 0" in str(e), f"message: {e}"
            assert took < 10, f"failed only after {took:.1f} s"
            print(f"ok a receive nobody sends to failed after {took:.1f} s: {e}")
        else:
            raise AssertionError("recv from any source with no sender returned")
    dist.barrier()


def check_not_a_receive(rank, n):
    """Only receives have a source rank: an all_reduce's Work still refuses (on torch 2.x
    that is torch's own error, which ringcc's lookup passes on)."""
    work = dist.all_reduce(torch.ones(2), async_op=True)
    work.wait()
    try:
        src = work._source_rank()
    except RuntimeError:
        pass
    else:
        raise AssertionError(f"an all_reduce's Work gave source rank {src}")


def check_switched_off(rank, n):
    """RINGCC_ANY_SOURCE=0 when a group is made: its sends are not announced, named
    receives work, a receive from any source raises naming the variable."""
    os.environ["RINGCC_ANY_SOURCE"] = "0"
    try:
        group = dist.new_group(list(range(n)))
    finally:
        del os.environ["RINGCC_ANY_SOURCE"]
    t = torch.empty(5)
    if rank == 0:
        expect_error("any source switched off", NotImplementedError, ["RINGCC_ANY_SOURCE"],
                     lambda: dist.recv(t, group=group))
        dist.recv(t, src=1, group=group)
        same("named recv with announcing off", t, torch.arange(5.0))
    elif rank == 1:
        dist.send(torch.arange(5.0), 0, group=group)
    dist.barrier()


def run(rank, n):
    for check in (check_many_senders, check_irecv, check_mixed, check_every_receiver,
                  check_timeout, check_not_a_receive, check_switched_off):
        check(rank, n)
        dist.barrier()


if __name__ == "__main__":
    n = harness.nranks_from_argv()
    if n < 3:
        raise SystemExit("test_anysource.py: needs 3 or more ranks (several senders)")
    harness.run_all(run, n)
