"""torch dtypes and ReduceOps to ringcc's datatypes and ops.

Reductions need a datatype ringcc reduces (int8, uint8, int32, int64, float16, float32,
float64, bfloat16; bool as uint8 like PyTorch's NCCL backend; complex as pairs of reals for
sums). Data movement (broadcast, gathers, scatters, all-to-all, send/recv) copies bytes, so it
takes every dtype.
"""

import ctypes

import torch
from torch.distributed import ReduceOp

from . import _comm as C

REDUCE_DTYPES = {
    torch.int8: C.INT8,
    torch.uint8: C.UINT8,
    torch.int32: C.INT32,
    torch.int64: C.INT64,
    torch.float16: C.FLOAT16,
    torch.float32: C.FLOAT32,
    torch.float64: C.FLOAT64,
    torch.bfloat16: C.BFLOAT16,
}

_RED = ReduceOp.RedOpType
_NCCL_OPS = {_RED.SUM: C.SUM, _RED.PRODUCT: C.PROD, _RED.MAX: C.MAX, _RED.MIN: C.MIN,
             _RED.AVG: C.AVG}
# Bitwise ops NCCL lacks: ringcc all-gathers and reduces locally with these.
BITWISE = {_RED.BAND: torch.bitwise_and, _RED.BOR: torch.bitwise_or,
           _RED.BXOR: torch.bitwise_xor}


def op_type(op):
    """The RedOpType of a ReduceOp (or of a RedOpType, which torch also passes around)."""
    return op.op if hasattr(op, "op") else op


def reduce_view(name, t, op):
    """(tensor to reduce, ncclDataType, kind) for contiguous t, where kind is an ncclRedOp
    value, "premul", or a torch bitwise function. Raises TypeError for what ringcc cannot
    reduce."""
    kind = op_type(op)
    if kind in BITWISE:
        if t.is_floating_point() or t.is_complex():
            raise TypeError(f"ringcc {name}: {kind.name} needs an integer or bool tensor, "
                            f"got {t.dtype}")
        return t, None, BITWISE[kind]
    if t.dtype == torch.bool:
        # Logical or / and, as PyTorch's NCCL backend does for bool.
        as_u8 = {_RED.SUM: C.MAX, _RED.MAX: C.MAX, _RED.PRODUCT: C.MIN, _RED.MIN: C.MIN}
        if kind not in as_u8:
            raise TypeError(f"ringcc {name}: {kind.name} is not defined for torch.bool")
        return t.view(torch.uint8), C.UINT8, as_u8[kind]
    if t.is_complex():
        if kind not in (_RED.SUM, _RED.AVG, _RED.PREMUL_SUM):
            raise TypeError(f"ringcc {name}: {kind.name} is not defined for {t.dtype}")
        t = torch.view_as_real(t)
    if t.dtype not in REDUCE_DTYPES:
        names = ", ".join(str(d) for d in REDUCE_DTYPES)
        raise TypeError(f"ringcc {name}: cannot reduce {t.dtype}; ringcc reduces {names}, "
                        "bool and complex")
    if kind == _RED.PREMUL_SUM:
        return t, REDUCE_DTYPES[t.dtype], "premul"
    if kind not in _NCCL_OPS:
        raise TypeError(f"ringcc {name}: unsupported ReduceOp {kind}")
    return t, REDUCE_DTYPES[t.dtype], _NCCL_OPS[kind]


def bytes_view(t):
    """A contiguous tensor's memory as a 1-D uint8 tensor (for data movement)."""
    flat = t.reshape(-1)
    return flat.view(torch.uint8) if flat.dtype != torch.uint8 else flat


# PreMulSum's factor lives in the C++ ReduceOp. torch 2.x pickles ReduceOp, so its
# __getstate__() gives (op type, factor) with the factor a float or a tensor (_state below).
# torch 1.13 exposes no accessor (its __getstate__ is object's: None). There we read it
# from memory: the pybind11 object holds a pointer to the ReduceOp (a CustomClassHolder:
# vtable, two counts, then op_ at 24 and supplement_ at 32); the NCCLPreMulSumSupplement
# (vtable, two counts) has double_factor at 24 and tensor_factor at 32. The layout is checked
# once against ops we make ourselves; if it differs (another torch), premul sum raises
# NotImplementedError instead of guessing.
_OP_AT, _SUPPLEMENT_AT, _FACTOR_AT, _TENSOR_AT = 24, 32, 24, 32
_premul_layout_ok = None
_no_tensor = None  # what tensor_factor holds when the factor is a float


def _read_premul(op):
    """(op_ byte, double_factor, tensor_factor word) of a ReduceOp, or None without supplement."""
    value = ctypes.c_void_p.from_address(id(op) + 16).value  # after PyObject's refcount, type
    op_byte = ctypes.c_uint8.from_address(value + _OP_AT).value
    supplement = ctypes.c_void_p.from_address(value + _SUPPLEMENT_AT).value
    if not supplement:
        return op_byte, None, None
    return (op_byte, ctypes.c_double.from_address(supplement + _FACTOR_AT).value,
            ctypes.c_uint64.from_address(supplement + _TENSOR_AT).value)


def _check_premul_layout():
    global _no_tensor
    make = getattr(torch.distributed, "_make_nccl_premul_sum", None)
    if make is None or _read_premul(ReduceOp.SUM) != (0, None, None):
        return False
    factors = (2.5, -0.375, 1e10)
    seen = [_read_premul(make(f)) for f in factors]
    if any(s[:2] != (8, f) for s, f in zip(seen, factors)) or len({s[2] for s in seen}) != 1:
        return False
    _no_tensor = seen[0][2]
    return True


def _state(op):
    """(op type, factor) from torch 2.x's ReduceOp.__getstate__, else None (torch 1.13)."""
    get = getattr(op, "__getstate__", None)
    state = get() if get is not None else None
    return state if isinstance(state, tuple) and len(state) == 2 else None


def premul_factor(name, op):
    """The float factor of a ReduceOp made by _make_nccl_premul_sum(float)."""
    global _premul_layout_ok
    state = _state(op)
    if state is not None:
        factor = state[1]
        if isinstance(factor, torch.Tensor):
            raise NotImplementedError(f"ringcc {name}: PREMUL_SUM with a tensor factor; "
                                      "pass a float to _make_nccl_premul_sum")
        if factor is None:
            raise ValueError(f"ringcc {name}: PREMUL_SUM without a factor")
        return float(factor)
    if _premul_layout_ok is None:
        _premul_layout_ok = _check_premul_layout()
    if not _premul_layout_ok:
        raise NotImplementedError(f"ringcc {name}: cannot read the PREMUL_SUM factor from this "
                                  f"torch ({torch.__version__})")
    op_byte, factor, tensor_word = _read_premul(op)
    if op_byte != 8 or factor is None:
        raise ValueError(f"ringcc {name}: PREMUL_SUM without a factor")
    if tensor_word != _no_tensor:
        raise NotImplementedError(f"ringcc {name}: PREMUL_SUM with a tensor factor; "
                                  "pass a float to _make_nccl_premul_sum")
    return factor
