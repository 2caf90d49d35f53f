"""The bench's named questions: what each asks, its target, and the run that answers it."""

from __future__ import annotations

from dataclasses import dataclass

# Every run of `bench.run` but one question's leaves out the rows that have questions of their own.
_APART = ("--skip", "ensemble", "--skip", "layer", "--skip", "fairness", "--skip", "likeforlike")
# The hosts' question measures the gateway alone: none of the single-host setups.
_STACK_SETUPS = ("--skip", "stack", "--skip", "stack1", "--skip", "vllm", "--skip", "serial")


@dataclass(frozen=True)
class Question:
    """One question: `python -m bench NAME` runs `python -m MODULE ARGS` with {out} a fresh folder,
    and keeps its report (or its printed output) as bench/results/NAME/latest.md and .json."""

    name: str
    asks: str
    target: str
    argv: tuple[str, ...]
    report: str | None = None  # the Markdown the run writes under {out}; None: what it prints
    figures: str | None = None  # the JSON of figures it writes under {out}, if any
    headline: str = ""  # words that pick the headline among the report's bullets or printed lines
    artifacts: tuple[str, ...] = ()  # globs under {out} kept beside latest.md (plots the report shows)
    in_all: bool = True  # False: only when named (the soak takes an hour)


QUESTIONS: tuple[Question, ...] = (
    Question(
        "serving",
        "Does the stack hold a WebUI's localization under load, against one process answering one "
        "request at a time and vLLM's own server?",
        "p95 under 5 s at 100 users (the ramp's threshold); 0 failed with a replica killed",
        ("bench.run", "--out", "{out}", "--skip", "hosts", *_APART),
        report="report-full.md",
        headline="Stack vs one-at-a-time",
        artifacts=("*.png", "summaries-full/*.json"),
    ),
    Question(
        "overload",
        "At ten times its capacity, does the edge refuse fast and keep the accepted requests moving?",
        "refusals p99 under 50 ms; 0 failed",
        ("bench.run", "--only", "overload", "--out", "{out}"),
        report="report-full-overload.md",
        headline="Overload at",
        artifacts=("*.png",),
    ),
    Question(
        "likeforlike",
        "On equal cores, how close are the stack and `translate` to vLLM alone?",
        "job >= 0.9x the offline engines; one replica >= 1x `vllm serve`; the stack >= 1x assembled",
        ("bench.run", "--only", "likeforlike", "--out", "{out}"),
        report="report-likeforlike.md",
        headline="Job vs engine limit",
    ),
    Question(
        "people-first",
        "Does a person in the page stay fast while a bulk job runs, and do two keys' jobs share?",
        "person p50/p95 <= 1.5x idle; job >= 0.6x alone beside a person, >= 0.9x width off; each key >= 40%",
        ("bench.fairness", "--out", "{out}/report-fairness.md"),
        report="report-fairness.md",
        figures="report-fairness.json",
        headline="interactive p50, during the job / idle",
    ),
    Question(
        "burst",
        "Is a burst sent all at once, with no retries, answered as vLLM's own server answers it?",
        "every one of 600 and 2,000 at once answered 200; wall time within 1.1x vLLM's",
        ("bench.burst", "--out", "{out}/report-burst.md"),
        report="report-burst.md",
        figures="report-burst.json",
        headline="stack wall time / vLLM's",
    ),
    Question(
        "people-frontier",
        "Which bulk width, held while a person is active, meets the people-first targets on this machine?",
        "a width with person p50/p95 <= 1.5x idle and job >= 0.6x alone",
        ("bench.fairness_frontier", "--out", "{out}/report-frontier.md"),
        report="report-frontier.md",
        figures="report-frontier.json",
        headline="Widths meeting both",
    ),
    Question(
        "layer",
        "What does the serving layer (Nginx, replica API, no engine) cost per string?",
        "none set: the layer's CPU per string, to compare before and after a change",
        ("bench.layer", "--json", "{out}/figures.json"),
        figures="figures.json",
        headline="batch of",
    ),
    Question(
        "ensemble",
        "What does an ensemble request (N candidates, then the Chimera's fusion) cost against a single one?",
        "none set: the figure is what N candidates and a fusion cost",
        ("bench.ensemble", "--out", "{out}/report-ensemble.md"),
        report="report-ensemble.md",
        figures="report-ensemble.json",
        headline="ensemble",
    ),
    Question(
        "hosts",
        "Do two hosts behind the gateway serve about twice what one does?",
        "two hosts above one host's req/s (near 2x where hosts do not share cores); 0 failed",
        ("bench.run", "--out", "{out}", *_STACK_SETUPS, *_APART),
        report="report-full.md",
        headline="Two hosts",
    ),
    Question(
        "soak",
        "Over an hour of steady load with a replica killed every ten minutes, does anything leak or fail?",
        "0 failed; memory and open files flat",
        ("bench.run", "--soak", "--out", "{out}"),
        report="soak/soak.md",
        in_all=False,
        headline="requests,",
        artifacts=("soak/*.png",),
    ),
    Question(
        "documents",
        "How much faster is a long document batched and fanned out than sent a sentence at a time?",
        "none set: batched and fanned out against one at a time",
        ("bench.documents", "--up", "--out", "{out}/row.json"),
        figures="row.json",
        headline="pages",
    ),
    Question(
        "long-texts",
        "Does a 100,000-character document sent as one text come back whole and in time, replicas healthy?",
        "200 within the request timeout; as many paragraphs out as in; /health 200 throughout",
        ("bench.long_texts", "--up", "--out", "{out}/row.json"),
        figures="row.json",
        headline="Long text:",
    ),
    Question(
        "qa-planted",
        "Do the answer checks flag an echo of the source and an answer cut short, and spare human "
        "translations?",
        "echo and cut answers flagged >= 95% on the Django pairs; human pairs flagged <= 1%",
        ("bench.qa_planted", "--out", "{out}/report-qa-planted.md"),
        report="report-qa-planted.md",
        figures="report-qa-planted.json",
        headline="Django zh_Hans",
    ),
    Question(
        "qa-retry",
        "Does `qa: retry` answer within the deadline wherever `qa: flag` does, its retry cut short when "
        "it cannot finish?",
        "qa: retry never answers 504 where qa: flag answers 200 (50 texts of each on the tiny model)",
        ("bench.qa_retry", "--up", "--out", "{out}/row.json"),
        figures="row.json",
        headline="qa: retry vs qa: flag",
    ),
    Question(
        "frontend",
        "How much CPU per string does the replica's own process spend around the vLLM engine?",
        "none set: CPU per string, to compare before and after a change",
        ("bench.frontend",),
        headline="median this checkout",
    ),
    Question(
        "memory",
        "With half the WebUI's human translations in a translation memory, how many strings does the "
        "memory answer, how many engine calls does it save, and what does the job take against none?",
        "all imported: every string from the memory, 0 engine calls, output identical to the human file; "
        "100,000 TMX units imported within 30 s; exact lookup p99 under 1 ms",
        ("bench.memory", "--out", "{out}/report-memory.md"),
        report="report-memory.md",
        figures="report-memory.json",
        headline="memory, whole set imported",
    ),
    Question(
        "route-cost",
        "What does routing by the body's model (njs) add at the edge per request?",
        "none set: what njs adds per request",
        ("bench.route_overhead",),
        headline="njs adds",
    ),
)
BY_NAME = {q.name: q for q in QUESTIONS}


def command(question: Question, out: str, extra: tuple[str, ...] = ()) -> list[str]:
    """The module's argv for one run, its outputs under out."""
    return [arg.replace("{out}", out) for arg in question.argv] + list(extra)


def headline_of(question: Question, text: str) -> str:
    """The one line a reader of the results' index sees: the report's Headline bullet that holds the
    question's words, else any line or table row that does, else its first bullet or last line."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    bullets = [line[2:] for line in _headline_section(lines) if line.startswith("- ")]
    prose = [_plain(line) for line in lines if not line.startswith(("#", "```", "|---"))]
    words = question.headline
    for pool in (bullets, prose):
        picked = [line for line in pool if words and words in line]
        if picked:
            return picked[0]
    if bullets:
        return bullets[0]
    return prose[-1] if prose else ""


def _plain(line: str) -> str:
    """A bullet without its dash, a table row as its cells joined."""
    if line.startswith("|"):
        return " · ".join(cell.strip() for cell in line.strip("|").split("|") if cell.strip())
    return line[2:] if line.startswith("- ") else line


def _headline_section(lines: list[str]) -> list[str]:
    if "## Headline" not in lines:
        return []
    start = lines.index("## Headline") + 1
    rest = lines[start:]
    end = next((i for i, line in enumerate(rest) if line.startswith("#")), len(rest))
    return rest[:end]
