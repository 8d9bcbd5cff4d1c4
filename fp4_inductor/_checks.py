"""The one validation helper: every error names the argument, what was expected and what came."""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence

import torch
from torch.fx.experimental.symbolic_shapes import guard_or_false

FLOAT_DTYPES = (torch.float32, torch.bfloat16, torch.float16)
INDEX_DTYPES = (torch.int32, torch.int64)


def dtype_name(dtype: torch.dtype) -> str:
    """``bfloat16`` for ``torch.bfloat16``."""
    return str(dtype).removeprefix("torch.")


def describe(t: object) -> str:
    """``float16 [3, 64, 68] on cpu`` for a tensor; for anything else its type, named with its
    module outside the builtins (a numpy bool is ``numpy.bool``, not ``bool``), and a number's value."""
    if isinstance(t, torch.Tensor):
        return f"{dtype_name(t.dtype)} {list(t.shape)} on {t.device}"
    if _long_int(t):
        return shown(t)
    kind = type(t)
    name = kind.__name__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__qualname__}"
    # numpy's scalars (its bool among them) are not all numbers.Number.
    if isinstance(t, numbers.Number) or (kind.__module__ == "numpy" and getattr(t, "ndim", None) == 0):
        return f"{name} {t}"
    return name


def _long_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and abs(value).bit_length() > 64


def shown(value: object) -> str:
    """A value for a message; an int of more than 64 bits by its size (str() of one of 5000
    digits raises)."""
    return f"an int of {abs(value).bit_length()} bits" if _long_int(value) else str(value)


def quoted(value: object) -> str:
    """``repr(value)`` for a message, an int of more than 64 bits by its size as ``shown`` gives it."""
    return shown(value) if _long_int(value) else repr(value)


def dtype_names(dtypes: Sequence[torch.dtype]) -> str:
    return " or ".join(dtype_name(d) for d in dtypes)


def check_dtype(name: str, dtype: object, dtypes: Sequence[torch.dtype]) -> torch.dtype:
    """A dtype argument (not a tensor's dtype) that must be one of ``dtypes``."""
    if not isinstance(dtype, torch.dtype) or dtype not in dtypes:
        raise TypeError(f"{name}: expected {dtype_names(dtypes)}, got {quoted(dtype)}")
    return dtype


def check_tensor(
    name: str,
    t: object,
    *,
    dtypes: Sequence[torch.dtype],
    shape: Sequence[int | None | str],
    device: torch.device | None = None,
    device_of: str = "the cache",
) -> torch.Tensor:
    """Check type, dtype, rank and the fixed sizes of ``t``.

    ``shape`` holds an int (or a SymInt: another tensor's size under torch.compile) for a fixed
    size and a name (str) or None for a free one; the names only make the message read like the
    docstring. ``device_of`` names the tensor whose device ``device`` is.
    """
    # The message is built only on failure: these checks run on every eager call.
    want = lambda: f"{dtype_names(dtypes)} [{', '.join(str(s) for s in shape)}]"  # noqa: E731
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name}: expected a tensor {want()}, got {describe(t)}")
    if t.dtype not in dtypes or t.dim() != len(shape):
        raise ValueError(f"{name}: expected {want()}, got {describe(t)}")
    # Under Dynamo a symbolic size reads as an int, and a fake kernel sees SymInts: both take
    # size_matches, which keeps an unbacked size unguarded.
    plain = not torch.compiler.is_compiling()
    for size, expected in zip(t.shape, shape):
        if isinstance(expected, int) and plain and isinstance(size, int):  # eager: plain ints
            differs = size != expected
        elif isinstance(expected, (int, torch.SymInt)):
            differs = not size_matches(size, expected)
        else:
            continue
        if differs:
            raise ValueError(f"{name}: expected {want()}, got {describe(t)}")
    if device is not None and t.device != device:
        raise ValueError(f"{name}: expected a tensor on {device} (where {device_of} is), got {describe(t)}")
    return t


def size_matches(size, expected) -> bool:
    """Whether a size equals ``expected``. False only where they surely differ: sizes that stay
    undecided at trace time (unbacked, e.g. after ``mark_unbacked``) are asserted at run time
    instead, as two bounds (an equality would replace one size by the other, and Dynamo would
    guard on that replacement: a later call whose sizes differ would then fail inside Dynamo)."""
    # Dynamo shows a symbolic size to traced code as an int: under it, every size takes the
    # symbolic path (trace time only).
    if not (isinstance(size, torch.SymInt) or isinstance(expected, torch.SymInt) or torch.compiler.is_compiling()):
        return size == expected
    if guard_or_false(size != expected):
        return False
    # No message: torch 2.11's Dynamo breaks the graph on a message closure (2.13 takes one over
    # constants), and the run-time assert reports torch's own text (the two symbols) either way.
    torch._check(size <= expected)
    torch._check(size >= expected)
    return True


def size_below(size, minimum) -> bool:
    """Whether a size is below ``minimum``: True only where it surely is; a size undecided at
    trace time (unbacked) is asserted at run time to be at least ``minimum`` (torch's own message,
    as in ``size_matches``), with no guard."""
    if guard_or_false(size < minimum):
        return True
    torch._check(size >= minimum)
    return False


def check_size(name: str, t: torch.Tensor, dim: int, expected: int, what: str) -> None:
    """Check that ``t.shape[dim] == expected``; ``what`` says where ``expected`` comes from."""
    if not size_matches(t.shape[dim], expected):
        raise ValueError(f"{name}: expected {expected} along dim {dim} ({what}), got {describe(t)}")


def check_bool(name: str, value: object) -> bool:
    """A Python bool (not an int, not a tensor)."""
    if not isinstance(value, bool):
        raise TypeError(f"{name}: expected a bool, got {describe(value)}")
    return value


def check_positive_float(name: str, value: object) -> float:
    """A finite real number above 0 (a Python int or float, not a bool), as a float."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name}: expected a float, got {describe(value)}")
    try:
        number = float(value)
    except OverflowError:  # an int past the float range
        number = math.inf
    if not (math.isfinite(number) and number > 0):
        raise ValueError(f"{name}: expected a finite positive number, got {shown(value)}")
    return number


def fits_int64(value: int) -> bool:
    """Whether an int fits what an op's int argument holds. No guard on a symbolic value (Dynamo
    may trace a symbolic size through a check as an int)."""
    return not (guard_or_false(value >= 2**63) or guard_or_false(value < -(2**63)))


def check_int(name: str, value: object, *, minimum: int | None = None, below: int | None = None) -> int:
    """A Python int (not a tensor, not a bool) within ``[minimum, below)``.

    Under torch.compile an int argument may arrive as a SymInt (automatic dynamic shapes):
    its bounds are then checked where it becomes concrete, at run time of the op."""
    if isinstance(value, torch.SymInt):
        return value
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name}: expected a Python int, got {describe(value)}")
    if minimum is not None and value < minimum:
        raise ValueError(f"{name}: expected an int >= {minimum}, got {shown(value)}")
    if below is not None and value >= below:
        raise ValueError(f"{name}: expected an int < {below}, got {shown(value)}")
    if not fits_int64(value):
        raise ValueError(f"{name}: expected an int that fits int64, got {shown(value)}")
    return value
