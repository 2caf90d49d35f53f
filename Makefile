# hunyuan-serve: `make up` runs the service, `make test` runs every check, `make bench` measures it.
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
ARGS ?=

.PHONY: install up test lint typecheck unit bench clean image image-base image-test settings-doc

install: $(STAMP)

$(STAMP): pyproject.toml deploy/install.sh
	VENV=$(VENV) bash deploy/install.sh
	touch $(STAMP)

up: install
	$(BIN)/hunyuan-serve up $(ARGS)

lint: install
	$(BIN)/ruff check hunyuan_serve tests bench
	$(BIN)/ruff format --check hunyuan_serve tests bench

typecheck: install
	$(BIN)/mypy

# pytest as LANES sessions side by side (tests/support/lanes.py): much of a lane's time is spent
# waiting on engines, deadlines and subprocesses, so two fill two cores. LANES=1 runs one session.
LANES ?= 2
PYTEST := $(BIN)/python -m tests.support.lane_runner --lanes $(LANES)

# Everything but the tests that start the vLLM engine, the demo model or a real `up` (a minute or two).
unit: install
	$(PYTEST) -q -m "not engine and not demo and not e2e"

# ruff and mypy run beside the lanes, niced: they need a core for about a minute and a half, which the
# lanes leave idle much of the time while they wait on engines; run before the lanes they added that
# much to the suite. Their output is printed when the lanes end, and either failing fails the target.
test: install
	@checks=$$(mktemp); \
	nice -n 10 $(MAKE) --no-print-directory -k lint typecheck >"$$checks" 2>&1 & pid=$$!; \
	$(PYTEST) -q -rs; lanes=$$?; \
	wait $$pid; status=$$?; \
	echo "--- make lint typecheck (beside the lanes): exit $$status"; cat "$$checks"; rm -f "$$checks"; \
	[ $$lanes -eq 0 ] && [ $$status -eq 0 ]

# Every named question of the bench in turn (bench/questions.py), each answer stamped in
# bench/results/NAME/latest.md and .json; one question: make bench Q=overload (the soak only so).
# ARGS go to the module that answers the question, e.g. make bench Q=likeforlike ARGS="--rounds 5".
Q ?= all
bench: install
	$(BIN)/python -m bench $(Q) $(ARGS)

# The service image (FLAVOUR=cpu or gpu) and the front image, with podman or else docker
# (deploy/container/); IMAGE_ARGS go to each build. Their Debian base is BASE=IMAGE, or else the one
# `make image-base` prints: the registry's debian:bookworm-slim, or where no registry can be reached, a
# minbase made once from Debian's mirror (DEBIAN_MIRROR=URL) with mmdebstrap (deploy/container/base.sh).
FLAVOUR ?= cpu
IMAGE_ARGS ?=
BASE ?=
image:
	FLAVOUR=$(FLAVOUR) BASE="$(BASE)" bash deploy/container/build.sh $(IMAGE_ARGS)

image-base:
	bash deploy/container/base.sh

# The image test (tests/container/, marker `container`, not in `make test`): builds the CPU image as
# `make image` does (where no registry answers, on base.sh's mmdebstrap base) and runs it as a user would.
# Measured on 2 cores: 2 min 36 s with the image's layers cached (14 tests), about 7 min from a cold
# cache (the base made once, 22 s; the image build 4 min); .ci/run calls it after `make test`.
image-test: install
	bash tests/container/setup.sh
	$(BIN)/python -m pytest -q -rs -m container tests/container -p no:cacheprovider

# docs/settings.md from the config's Field descriptions (tests/config/test_reference_doc.py checks it):
# run it after adding or changing a config field, and commit the page with the field (it needs the
# venv of `make install`, and installs nothing itself).
settings-doc:
	$(BIN)/python -m hunyuan_serve.config.reference > docs/settings.md.tmp
	mv docs/settings.md.tmp docs/settings.md

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
