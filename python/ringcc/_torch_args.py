"""Argument checks and helpers shared by the ringcc process group's operations."""

import torch


def cpu_tensor(name, t, what="tensor"):
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"ringcc {name}: {what} must be a torch.Tensor, got {type(t).__name__}")
    if t.device.type != "cpu" or t.layout != torch.strided:
        raise ValueError(f"ringcc {name}: {what} must be a dense CPU tensor, got "
                         f"{t.device} {t.layout}")
    return t


def one(name, tensors):
    if len(tensors) != 1:
        raise ValueError(f"ringcc {name}: takes one tensor per process, got {len(tensors)}")
    return cpu_tensor(name, tensors[0])


def same(name, tensors, like, what):
    for t in tensors:
        cpu_tensor(name, t, what)
        if t.dtype != like.dtype or t.numel() != like.numel():
            raise ValueError(f"ringcc {name}: every {what} must match the input "
                             f"({like.dtype}, {like.numel()} elements), got {t.dtype}, "
                             f"{t.numel()} elements")


def scaled(name, big, small, n, big_what, small_what):
    """Checks that tensor `big` holds n x the elements of `small`, of its dtype (an all-gather's
    output, a reduce-scatter's input); the message names both as big_what and small_what."""
    if big.dtype != small.dtype or big.numel() != small.numel() * n:
        raise ValueError(f"ringcc {name}: {big_what} must be {n} x {small_what} "
                         f"({small.dtype}, {small.numel()} elements), got {big.dtype}, "
                         f"{big.numel()} elements")


class Staged:
    """A contiguous stand-in for a tensor; copy_back() writes results to a non-contiguous
    original."""

    def __init__(self, t):
        self.orig = t
        self.t = t if t.is_contiguous() else t.contiguous()

    def copy_back(self):
        if self.t is not self.orig:
            self.orig.copy_(self.t)


def ptr(t):
    return t.data_ptr()
