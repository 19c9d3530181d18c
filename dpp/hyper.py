"""Settings objects whose continuous numbers are traced and whose structure is static.

A settings dataclass registered with :func:`dpp.pytrees.dataclass_pytree` is a pytree: the
fields named ``static`` (shapes, iteration caps, solver kinds, flags) go into the tree's
structure, so a new value compiles a new program; every other field (``lambda``, tolerances,
prior parameters, step limits, learning rates) is a leaf, traced by ``jit``, so a new value
reuses the compiled program.
A cross-validation over ``lambda`` therefore compiles once per shape, not once per grid point.

Leaves are stored as Python floats (ints and NumPy scalars are converted at construction), so
``l2=0`` and ``l2=0.5`` trace to the same weakly typed scalar and share one compiled program.
"""

from __future__ import annotations

from dpp.params import check_table
from dpp.pytrees import is_concrete


def check_concrete(settings, rules: dict) -> None:
    """Checks the fields of ``settings`` named in ``rules`` (:mod:`dpp.params`) that are concrete.

    A traced field (a tracer while a fit is being compiled) is left alone.

    Raises:
        ValueError: naming the field, the rule and the value.
    """
    values = {name: getattr(settings, name) for name in rules}
    concrete = [n for n, v in values.items() if is_concrete(v) or isinstance(v, bool | str)]
    check_table(values, {name: rules[name] for name in concrete})
