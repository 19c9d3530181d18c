"""Settings objects whose continuous numbers are traced and whose structure is static.

A settings dataclass registered with :func:`settings_pytree` is a pytree: the fields named
``static`` (shapes, iteration caps, solver kinds, flags) go into the tree's structure, so a new
value compiles a new program; every other field (``lambda``, tolerances, prior parameters, step
limits, learning rates) is a leaf, traced by ``jit``, so a new value reuses the compiled program.
A cross-validation over ``lambda`` therefore compiles once per shape, not once per grid point.

Leaves are stored as Python floats (ints and NumPy scalars are converted at construction), so
``l2=0`` and ``l2=0.5`` trace to the same weakly typed scalar and share one compiled program.
"""

from __future__ import annotations

import dataclasses
import numbers

import jax

from dpp.params import check_table


def is_concrete(value) -> bool:
    """Whether ``value`` is a concrete Python or NumPy real number (not a tracer or array)."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def check_concrete(settings, rules: dict) -> None:
    """Checks the fields of ``settings`` named in ``rules`` (:mod:`dpp.params`) that are concrete.

    A traced field (a tracer while a fit is being compiled) is left alone.

    Raises:
        ValueError: naming the field, the rule and the value.
    """
    values = {name: getattr(settings, name) for name in rules}
    concrete = [n for n, v in values.items() if is_concrete(v) or isinstance(v, bool | str)]
    check_table(values, {name: rules[name] for name in concrete})


def settings_pytree(*static: str):
    """Class decorator: registers a frozen dataclass as a pytree with ``static`` meta fields.

    The remaining fields are leaves: real numbers (converted to ``float`` when concrete) or
    nested settings pytrees. Unflattening bypasses ``__init__`` and ``__post_init__``, so the
    validation in ``__post_init__`` runs on construction by the user only, never on tracers
    (``jax.tree_util.register_dataclass`` rebuilds through ``__init__``, which would validate
    tracers and placeholder leaves).

    Args:
        *static: names of the fields that are static (part of the tree structure; hashable).

    Returns:
        The decorator.
    """

    def register(cls):
        names = [f.name for f in dataclasses.fields(cls)]
        unknown = set(static) - set(names)
        if unknown:
            raise ValueError(f"{cls.__name__} has no field {sorted(unknown)}")
        meta = tuple(n for n in names if n in static)
        data = tuple(n for n in names if n not in static)
        original_post_init = getattr(cls, "__post_init__", None)

        def post_init(self):
            for name in data:
                value = getattr(self, name)
                if is_concrete(value):
                    object.__setattr__(self, name, float(value))
            if original_post_init is not None:
                original_post_init(self)

        def flatten(obj):
            return tuple(getattr(obj, n) for n in data), tuple(getattr(obj, n) for n in meta)

        def unflatten(aux, children):
            obj = object.__new__(cls)
            for name, value in zip(meta, aux, strict=True):
                object.__setattr__(obj, name, value)
            for name, value in zip(data, children, strict=True):
                object.__setattr__(obj, name, value)
            return obj

        cls.__post_init__ = post_init
        cls.static_fields = meta
        jax.tree_util.register_pytree_node(cls, flatten, unflatten)
        return cls

    return register
