"""`python -m hunyuan_serve` runs the CLI."""

from hunyuan_serve.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
