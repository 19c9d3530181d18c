"""Lists the functions of ``dpp/`` longer than a limit (issue 19: none over 80 lines).

Usage: ``python scripts/long_functions.py [--limit 80]``; exits 1 when one is found, naming
each with its file, line and length. The fused numerics are exempt (``EXEMPT``).
"""

from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "dpp"
#: Functions whose length is the fused numerics' (one traced program), by ``file:function``.
EXEMPT: set[str] = set()


def long_functions(limit: int) -> list[tuple[str, int, str, int]]:
    """``(file, line, name, length)`` of every function in ``dpp/`` over ``limit`` lines."""
    found = []
    for path in sorted(ROOT.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = node.end_lineno - node.lineno + 1
                name = f"{path.relative_to(ROOT.parent)}:{node.name}"
                if length > limit and name not in EXEMPT:
                    found.append((str(path.relative_to(ROOT.parent)), node.lineno, node.name, length))
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=80)
    args = parser.parse_args()
    found = long_functions(args.limit)
    for file, line, name, length in found:
        print(f"{file}:{line} {name}: {length} lines")
    print(f"{len(found)} function(s) over {args.limit} lines")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
