"""The names the bench's runner and report join on: setups, scenarios, steps, the stack's languages."""

from __future__ import annotations

# Scenarios: keys of Bench.results, one section of the report each.
RAMP = "ramp"
RATE = "rate"
REPEAT = "repeat"
UNEQUAL = "unequal"
CHAOS = "chaos"
OVERLOAD = "overload"
HOSTS = "hosts"  # bench/multihost.py: the gateway in front of one host, then two
# The like-for-like rows (bench/likeforlike.py), each its own `--only`; LIKEFORLIKE runs all three.
JOB = "job"  # the localization job through `translate` against offline engines on the same cores
SINGLE = "single"  # one replica against one `vllm serve` on the same core
ASSEMBLED = "assembled"  # the stack against N `vllm serve` behind a hand-written Nginx
LIKEFORLIKE = "likeforlike"

# Setups: the first column of every table.
STACK = "stack"
STACK_1 = "stack, 1 replica"
SERIAL = "one-at-a-time"
VLLM = "vLLM server (1 engine, unpinned)"
FIRST_PASS = "stack, first pass"
SECOND_PASS = "stack, second pass"
LEAST_CONN = "stack, least_conn"
ROUND_ROBIN = "stack, round robin"
KILLED = "stack, replica killed"
OVERLOADED = "stack, overloaded"
GATEWAY_1 = "gateway, 1 host"
GATEWAY_2 = "gateway, 2 hosts"
OFFLINE = "offline engines"  # vllm.LLM(...).generate, one per core, the prompts split between them
TRANSLATE_JOB = "translate against the stack"
VLLM_PINNED = "vLLM server, same core"
ASSEMBLED_VLLM = "vLLM servers + hand-written Nginx"
# The baselines every ramp of the stack is compared with, in the report's column order.
BASELINES = (SERIAL, VLLM)
# The baselines a ratio is taken to: equal resources only (the vLLM server runs one engine on every
# core against the stack's pinned replicas; the like-for-like rows compare the servers).
RATIO_BASELINES = (SERIAL,)

# Steps: what starts one server and measures it (the keys of `--skip`), in the order they run.
# The stacks first: waiting their turn, they probe their replicas (a little CPU); the baselines
# wait idle. Any bias of the order goes against the stack, and the report says how much.
STEP_STACK = "stack"
STEP_STACK_1 = "stack1"
STEP_VLLM = "vllm"
STEP_SERIAL = "serial"
STEPS = (STEP_STACK, STEP_STACK_1, STEP_VLLM, STEP_SERIAL)
# After those, on its own (it needs every core): bench/multihost.py, in network namespaces.
STEP_HOSTS = "hosts"
# And bench/ensemble.py: its own stack of two pools (a translation model and a Chimera), also alone.
STEP_ENSEMBLE = "ensemble"
# And bench/fairness.py: interactive work during a bulk job, two keys' jobs, its own stack.
STEP_FAIRNESS = "fairness"
FAIRNESS = "fairness"  # also an `--only` value: that row alone
# And bench/layer.py: the serving layer alone on the engine stand-in, k6 on its own core.
STEP_LAYER = "layer"
# And the like-for-like rows, last: each alone on the cores.
STEP_LIKEFORLIKE = "likeforlike"
# The steps that run apart from the setups above, each its own question too (bench/questions.py).
STEPS_APART = (STEP_HOSTS, STEP_ENSEMBLE, STEP_LAYER, STEP_FAIRNESS, STEP_LIKEFORLIKE)

# Target languages of the runs against the stack, in order: see Bench.env.
STACK_TARGETS = ("zh", "ja", "ko", "fr", "de", "es", "ru", "ar")

# The model name the vLLM server baseline serves under, and k6 asks it for (API=openai).
SERVED_NAME = "model"
