"""Point to point, barrier and monitored_barrier of the ringcc process group: a mixin of
ProcessGroupRingcc (_torch_pg.py), which provides _submit, _submit_p2p, _comm, _store (the
group's c10d store; store_call serializes our use of it) and _timeout.

Receiving from any source. NCCL has no such receive: ncclRecv names its peer. So every send is
announced in the group's c10d store before it is queued: sender s adds 1 to the counter
`ringcc_p2p/s>d` (on the caller's thread, in call order). Receiver d keeps, per peer, how many
sends it has matched (`_matched`, touched only by the progress thread, in queue order): a
receive from s matches the next send of s (NCCL matches one pair's messages in order), so it
just counts; a receive from any source is a job of its own in the queue, which polls the
counters of every peer until one is ahead of its matched count (bounded by the group's
timeout), takes that sender (peers scanned from a rotating start, so one busy sender does not
starve the others), counts it matched, and runs ncclRecv from it. Work._source_rank() then
gives that rank, which is what dist.recv returns and irecv's Work tells. Because named receives
count too, a later receive from s never takes a message that an earlier any-source receive
took, with any number of senders. (torch 2.x hands dist.recv not our Work but a C++ one whose
_source_rank() cannot be overridden; _torch_compat.source_rank_lookup covers that.) Costs: one
store round trip per send (RINGCC_ANY_SOURCE=0 on every rank, when a group is made, turns
announcing off for it, and its receives from any source then raise); an any-source receive
runs after the sends queued before it, outside
their batch (so two ranks must not both send to each other and then receive from any source:
the sends wait).

monitored_barrier also runs over the store, on the caller's thread, not the communicator: its
point is to name ranks that did not arrive, when the communicator may be stuck on them.
"""

import datetime
import time

import torch

from . import _comm as C
from ._torch_args import Staged, one, ptr
from ._torch_types import bytes_view
from ._torch_work import note_source

_POLL_MIN_S, _POLL_MAX_S = 0.0005, 0.02
_DEFAULT_TIMEOUT = datetime.timedelta(minutes=30)


def _sent_key(src, dst):
    return f"ringcc_p2p/{src}>{dst}"


def _seconds(timeout):
    return (timeout or _DEFAULT_TIMEOUT).total_seconds()


def _poll(ready, deadline):
    """Calls ready() until it gives something true or `deadline` passes (then None)."""
    pause = _POLL_MIN_S
    while True:
        got = ready()
        if got or time.monotonic() >= deadline:
            return got
        time.sleep(pause)
        pause = min(pause * 2, _POLL_MAX_S)


class PointToPointOps:

    def _peer(self, name, peer):
        if not isinstance(peer, int) or not 0 <= peer < self.size() or peer == self.rank():
            raise ValueError(f"ringcc {name}: peer {peer} must be another rank in "
                             f"0..{self.size() - 1}")
        return peer

    def send(self, tensors, dst, tag=0):
        name = "send"
        t = one(name, tensors).contiguous()
        peer = self._peer(name, dst)
        if self._announce:
            self.store_call("add", _sent_key(self.rank(), peer), 1)  # see the module doc

        def issue():
            b = bytes_view(t)
            self._comm.send(ptr(b), b.numel(), C.UINT8, peer)

        return self._submit_p2p(name, issue, [t])

    def recv(self, tensors, src, tag=0):
        name = "recv"
        t = Staged(one(name, tensors))
        peer = self._peer(name, src)

        def issue():
            self._matched[peer] += 1
            b = bytes_view(t.t)
            self._comm.recv(ptr(b), b.numel(), C.UINT8, peer)

        work = self._submit_p2p(name, issue, [t.orig], finish=t.copy_back)
        work.source = peer
        return work

    def recv_anysource(self, tensors, tag=0):
        name = "recv (any source)"
        if not self._announce:
            raise NotImplementedError(f"ringcc {name}: this group was made with "
                                      "RINGCC_ANY_SOURCE=0 (sends not announced); name the "
                                      "source rank")
        t = Staged(one(name, tensors))
        me, n = self.rank(), self.size()
        work = None

        def next_sender():
            start = self._any_start
            for k in range(n):
                s = (start + k) % n
                if s != me and self.store_call("add", _sent_key(s, me), 0) > self._matched[s]:
                    self._any_start = (s + 1) % n
                    return s + 1  # true also for rank 0
            return None

        def run():
            deadline = time.monotonic() + _seconds(self._timeout)
            found = _poll(next_sender, deadline)
            if not found:
                raise RuntimeError(f"no rank sent to rank {me} within "
                                   f"{_seconds(self._timeout):g} s (the group's timeout)")
            src = found - 1
            self._matched[src] += 1
            b = bytes_view(t.t)
            self._comm.recv(ptr(b), b.numel(), C.UINT8, src)
            work.source = src
            note_source(t.orig, src)  # for torch 2.x (_torch_compat.source_rank_lookup)
            t.copy_back()

        work = self._submit(name, run, [t.orig])
        return work

    def barrier(self, opts=None):
        token = torch.zeros(1, dtype=torch.uint8)

        def run():
            self._comm.all_reduce(ptr(token), ptr(token), 1, C.UINT8, C.SUM)

        return self._submit("barrier", run, [token])

    def monitored_barrier(self, opts=None, wait_all_ranks=False):
        """Every rank checks in with rank 0 through the store; rank 0 raises RuntimeError
        naming the rank (wait_all_ranks: every rank) that did not arrive within the timeout,
        else releases the others, who raise if no release comes in time. `opts`: a
        BarrierOptions (torch 2.x) or a timedelta (torch 1.13's call); None: the group's."""
        timeout = getattr(opts, "timeout", opts)
        if timeout is not None and not isinstance(timeout, datetime.timedelta):
            raise TypeError(f"ringcc monitored_barrier: timeout must be a timedelta, got "
                            f"{type(timeout).__name__}")
        if not timeout:  # torch 2.x passes a zero timeout for "unset"
            timeout = self._timeout
        ms = int(_seconds(timeout) * 1000)
        deadline = time.monotonic() + _seconds(timeout)
        key = f"ringcc_monitored_barrier/{self._mb_seq}/"
        self._mb_seq += 1
        if self.rank() != 0:
            self.store_call("add", key + str(self.rank()), 1)
            if not _poll(lambda: self.store_call("add", key + "go", 0), deadline):
                raise RuntimeError(f"ringcc monitored_barrier: rank {self.rank()}: rank 0 did "
                                   f"not release the barrier within {ms} ms")
            return None
        missing = []
        for r in range(1, self.size()):
            if not _poll(lambda: self.store_call("add", key + str(r), 0), deadline):
                missing.append(r)
                if not wait_all_ranks:
                    break
        if missing:
            who = (f"Rank {missing[0]}" if len(missing) == 1 else
                   "Ranks " + ", ".join(str(r) for r in missing))
            raise RuntimeError(f"ringcc monitored_barrier: {who} failed to pass "
                               f"monitoredBarrier in {ms} ms")
        self.store_call("add", key + "go", 1)
        return None
