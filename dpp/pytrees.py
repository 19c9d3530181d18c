"""The one rule by which dpp's frozen dataclasses are pytrees (:func:`dataclass_pytree`).

Settings, poolings and sets alike: the fields named ``static`` go into the tree's structure
(a new value compiles a new program), every other field is a leaf that ``jit`` traces (a new
value reuses the compiled program). Networks are Equinox modules and results ``NamedTuple`` s,
JAX's own pytrees; nothing else registers one.
"""

from __future__ import annotations

import dataclasses
import numbers

import jax


def is_concrete(value) -> bool:
    """Whether ``value`` is a concrete Python or NumPy real number (not a tracer or array)."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def dataclass_pytree(*static: str):
    """Class decorator: registers a frozen dataclass as a pytree with ``static`` meta fields.

    The one rule of dpp's dataclass pytrees: the solvers' and the prior's settings, the
    poolings (:mod:`dpp.pooling`, ``kind`` static), the sets (:class:`~dpp.sets.RaggedSets`,
    ``num_sets`` static) and the sharded sets. The remaining fields are leaves: real numbers
    (converted to ``float`` by a class's ``__post_init__`` when concrete), arrays, ``None`` or
    nested pytrees. Unflattening bypasses ``__init__`` and ``__post_init__``, so the validation
    in ``__post_init__`` runs on construction by the user only, never on tracers
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
