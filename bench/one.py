"""Run one k6 script alone against a running server, with the settings bench/run.py would pass it."""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

if __package__ in (None, ""):  # `python bench/one.py` as well as `python -m bench.one`
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.k6run import K6_DIR, run_k6
from bench.session import Plan, base_env
from bench.targets import model_sampling
from hunyuan_serve.families import DEFAULT_HUB_MODEL


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("script", choices=sorted(p.name for p in K6_DIR.glob("*.js") if p.name != "lib.js"))
    parser.add_argument("--base-url", default="http://127.0.0.1:8080", help="Where the server answers.")
    parser.add_argument(
        "--model",
        default=DEFAULT_HUB_MODEL,
        help="The served checkpoint (path or hub id): its family's sampling is sent (default %(default)s).",
    )
    parser.add_argument("--quick", action="store_true", help="The QUICK=1 plan's thresholds and tokens.")
    parser.add_argument("--out", type=Path, help="Where k6's summary and samples go (default: a temp dir).")
    parser.add_argument(
        "-e", dest="extra", action="append", default=[], metavar="KEY=VALUE", help="More k6 -e."
    )
    args = parser.parse_args(argv)
    env = base_env(Plan.quick() if args.quick else Plan(), model_sampling(args.model))
    env["BASE_URL"] = args.base_url
    for item in args.extra:
        key, sep, value = item.partition("=")
        if not sep:
            parser.error(f"-e takes KEY=VALUE, got {item!r}")
        env[key] = value
    out = args.out or Path(tempfile.mkdtemp(prefix="bench-one-"))
    result = run_k6(args.script, Path(args.script).stem, out, env)
    print(f"[bench] summary: {result.summary_path}", flush=True)
    return 0 if result.returncode in (0, 99) else result.returncode


if __name__ == "__main__":
    sys.exit(main())
