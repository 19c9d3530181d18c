"""Lists the functions of ``dpp/`` longer than a limit (issue 19: none over 80 lines).

A function's length is its lines from ``def`` to its last statement, less its docstring: the
house style documents every argument, shape, unit and error, and a full docstring should never
be the reason to split a function. ``--with-docstrings`` counts them too.

Usage: ``python scripts/long_functions.py [--limit 80] [--with-docstrings]``; exits 1 when one
is found, naming each with its file, line and length. The fused numerics are exempt
(``EXEMPT``).
"""

from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "dpp"
#: Functions whose length is the fused numerics' (one traced program), by ``file:function``.
EXEMPT = {
    # one jax.lax.while_loop over rounds: its closures are the traced program
    "dpp/solvers/coordinate_ascent.py:_ascend",
}


def _docstring_lines(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    first = node.body[0]
    value = getattr(first, "value", None)
    is_doc = isinstance(first, ast.Expr) and isinstance(value, ast.Constant)
    return first.end_lineno - first.lineno + 1 if is_doc and isinstance(value.value, str) else 0


def long_functions(limit: int, docstrings: bool = False) -> list[tuple[str, int, str, int]]:
    """``(file, line, name, length)`` of every function in ``dpp/`` over ``limit`` lines."""
    found = []
    for path in sorted(ROOT.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = node.end_lineno - node.lineno + 1
                length -= 0 if docstrings else _docstring_lines(node)
                file = str(path.relative_to(ROOT.parent))
                if length > limit and f"{file}:{node.name}" not in EXEMPT:
                    found.append((file, node.lineno, node.name, length))
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=80)
    parser.add_argument("--with-docstrings", action="store_true")
    args = parser.parse_args()
    found = long_functions(args.limit, args.with_docstrings)
    for file, line, name, length in found:
        print(f"{file}:{line} {name}: {length} lines")
    print(f"{len(found)} function(s) over {args.limit} lines")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
