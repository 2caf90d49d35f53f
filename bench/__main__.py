"""`python -m bench [QUESTION|all] [ARGS]`: answer the bench's named questions (bench/questions.py)."""

from __future__ import annotations

import sys

from bench.ask import RESULTS, ask
from bench.questions import BY_NAME, QUESTIONS
from bench.summary import write_index


def usage() -> str:
    rows = [f"  {q.name:<13} {q.asks}" for q in QUESTIONS]
    return "\n".join(
        [
            "usage: python -m bench QUESTION [ARGS...] | all | index",
            "  QUESTION's ARGS go to the module that answers it (see bench/README.md);",
            "  all: every question in turn but those that run only when named (soak: an hour);",
            "  index: rewrite bench/results/README.md only.",
            "",
            *rows,
        ]
    )


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(usage())
        return 0 if argv else 2
    name, extra = argv[0], tuple(argv[1:])
    if name == "index":
        print(write_index(RESULTS))
        return 0
    if name != "all" and name not in BY_NAME:
        print(f"unknown question {name!r}\n\n{usage()}", file=sys.stderr)
        return 2
    chosen = tuple(q for q in QUESTIONS if q.in_all) if name == "all" else (BY_NAME[name],)
    failed = [q.name for q in chosen if ask(q, extra) != 0]
    write_index(RESULTS)
    if failed:
        print(f"[bench] failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
