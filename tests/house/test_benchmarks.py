"""The benchmarks still run: each ``bench/bench_*.py --smoke`` exits 0 and prints its figures.

``--smoke`` runs every part of a benchmark at tiny sizes, so a change that breaks a benchmark (a renamed seam,
a changed signature) fails here instead of in the next ``./run bench``. The figures themselves are not checked:
smoke sizes say nothing about performance; only that each table and goal line is printed.

The smoke runs start in the background with the session's first test and these tests run last (tests/conftest.py,
tests/support/bench_smoke.py): each then checks its own run's output.
"""

from __future__ import annotations

import re

import pytest

from tests.support.bench_smoke import SharedSmokeRuns, SmokeRuns, benchmarks

NUMBER = r"\d+(?:\.\d+)?"
VERDICT = r"(?:met|NOT met)"
# Lines each benchmark must print (regular expressions, searched in its stdout).
EXPECTED = {
    "bench_demo_queries.py": [
        r"Demo workspace \(seed \d+\): \d+ incidents in \d+ incident rows, \d+ alerts in \d+ alert rows",
        r"query +arguments +rows +median ms +p90 ms +CPU ms",  # CPU beside wall: the machine may be shared
        *(rf"(?m)^{tool} .* \d+ +{NUMBER} +{NUMBER} +{NUMBER}$"
          for tool in ("query_incidents", "get_incident_detail", "query_alerts", "get_alert_trend",
                       "get_top_entities")),
        rf"Slowest median {NUMBER} ms; goal every query under 50 ms median: {VERDICT}",
        r"the database holds \d+\.\d+ GB; peak memory so far \d+\.\d+ GB",
    ],
    "bench_hunt.py": [
        r"1x: \d+ activity rows, generated and loaded in",
        r"hunt +1x rows +1x ms +1x CPU",
        *(rf"(?m)^{label} +\d+ +{NUMBER} +{NUMBER}$" for label in ("term has_any 30d", "baseline 14d",
                                                                  "join sign-ins x TI", "join mail x clicks")),
        rf"1x: slowest median CPU {NUMBER} ms",
        r"Benchmark took",
    ],
    "bench_investigation.py": [
        r"== Tool definitions sent on every model call \(o200k_base tokens\)",
        r"without investigate_entity: \d+; with it: \d+ \(\+\d+\)",
        r"== Investigation wall time",
        rf"(?m)^ +1x account .* {NUMBER} +{NUMBER}$",
        rf"(?m)^evidence_signins +{NUMBER}",
        rf"Slowest investigation median at 1x: {NUMBER} ms; goal under 100 ms: {VERDICT}",
        r"Benchmark took",
    ],
    "bench_summary.py": [
        r"== Incident summary: at most \d+ entities investigated, \d+ at once",
        rf"(?m)^ +1x planted #\d+ +20 +8 +\d+ +\d+ +\d+ +{NUMBER} +{NUMBER}$",
        r"(?m)^similar_incidents +1$",
        r"Log Analytics queries per summary: \d+ \(peak \d+ at once\)",
        rf"Summary median at 1x: {NUMBER} ms; goal under 1000 ms: {VERDICT}",
        r"Benchmark took",
    ],
    "bench_extension.py": [
        r"== 1\. Message extension answers",
        *(rf"(?m)^ +1x {call} +\d+ +{NUMBER} +{NUMBER}$" for call in ("initial run", "high", "mine high", "words",
                                                                     "number", r"page 4 \(skip 75\)",
                                                                     "unfurl a link")),
        rf"1x: all calls p50 {NUMBER} ms, p99 {NUMBER} ms; goal p99 under 1000 ms: {VERDICT}",
        r"== 2\. Watch post -> its card updated with the triage",
        rf"Post -> triage update: median {NUMBER} s, max {NUMBER} s over \d+ incident\(s\); goal under 5 s: {VERDICT}",
        r"Benchmark took",
    ],
    "bench_fact_check.py": [
        r"== 1\. Fabrications caught, correct answers flagged",
        r"(?m)^severity +\d+ +\d+ +\d+ +\d+$",
        rf"Caught \d+ of \d+ fabrications; \d+ of \d+ correct answers flagged; goal all caught, none flagged: "
        rf"{VERDICT}",
        r"== 2\. Cost per answer \(CPU ms\)",
        rf"(?m)^fact check \(check \+ annotate\) +{NUMBER} +{NUMBER}$",
        rf"(?m)^whole turn .* +{NUMBER} +{NUMBER}$",
        rf"Fact check median is {NUMBER}% of the turn's median CPU",
    ],
    "bench_row_facts.py": [
        r"== 1\. Lies marked and correct answers marked, per record type",
        r"Record types: \d+ \(.*dns lookup.*\); rows recorded: \d+",
        r"(?m)^sign-in +value +\d+ +\d+ +\d+ +\d+ +\d+$",
        r"(?m)^dns lookup +count +\d+ +\d+ +\d+ +\d+ +\d+$",
        r"Tuning: \d+ of \d+ lies marked at the claim",
        rf"Held out: \d+ of \d+ lies marked at the claim \({NUMBER}%\); \d+ of \d+ correct answers marked",
        rf"Held-out goal >= 90% of lies at the claim, <= 3% of correct answers marked: {VERDICT}",
        r"== 2\. Cost per answer \(CPU ms\)",
        rf"(?m)^check \+ annotate +\d+ +{NUMBER} +{NUMBER}$",
        rf"Per answer p99 {NUMBER} ms; goal under 5 ms: {VERDICT}",
        rf"Streamed answer of \d+ characters, checked as written: {NUMBER} ms CPU, \d+% of the investigation turn",
        r"hostile: 5,000-row table",
        rf"Hostile answers: 0 raised; goal none: {VERDICT}",
        r"Benchmark took",
    ],
    "bench_orchestrator.py": [
        r"== 1\. Turn time: 2-round turn with 3 parallel tools",
        r"median/path +p90/path +goal",
        rf"(?m)^LogsQueryClient +{NUMBER} .* {NUMBER} +{NUMBER} +{VERDICT}$",
        rf"overhead {NUMBER} = before 1st model call {NUMBER}",
        r"Goal median/path <= 1\.10 met in \d of 2 rows",
        r"== 2\. Prompt tokens of a 10-turn investigation",
        rf"(?m)^ +10 Thanks\. What should I hand over .* \d+ +\d+ +{NUMBER}$",
        rf"Total prompt tokens over \d+ model calls: \(a\) \d+, \(b\) \d+; a/b = {NUMBER}; goal <= 0\.33: {VERDICT}",
        rf"tool results alone: a/b = {NUMBER}",
        r"== 2b\. Prompt tokens of the 10-turn list-and-detail conversation",
        r"(?m)^ +3 Is the account in that incident compromised\? +2 investigate_entity ",
        r"(?m)^ +4 Who else signed in from its IP .* +2 hunt ",
        r"without write tools: system prompt \d+, tool definitions \d+",
        r"per tool: query_incidents \d+, .*hunt \d+, investigate_entity \d+",
        r"== 3\. Time spent counting tokens per turn",
        rf"Counting: total {NUMBER} ms over 10 turns",
    ],
    "bench_durable.py": [
        r"== Durable turns on Azure Storage \(Azurite\), separate worker processes \(python -m bot worker\): 2 "
        r"instances, \d+ conversations x \d+ activities \(a third presses\), \d+ of \d+ deliveries repeated",
        r"== Durable turns on the local queue \(SQLite\), a worker process started by each web process: 2 web "
        r"processes, \d+ conversations x \d+ activities \(a third presses\)",
        r"lost 0, answered twice 0, out of order 0; goal all 0: met",
        rf"Recovery: every turn sent before the kill answered {NUMBER} s after it",
        rf"Acknowledgement through the proxy: median {NUMBER} ms, p99 {NUMBER} ms",
        r"== The web front alone on Azure Storage \(Azurite\): enqueues only, turns in a separate python -m bot worker",
        r"== The web front alone on the local queue \(SQLite\): enqueues only",
        rf"burst of \d+ conversations it has not seen +ack p50 +{NUMBER} ms +p99 +{NUMBER} ms +{VERDICT}",
        rf"(?m)^ +5 +5 +{NUMBER} +{NUMBER} +{NUMBER}$",
        rf"the front's CPU per activity {NUMBER} ms",
    ],
    "bench_scheduler.py": [
        r"== Log Analytics limits under load: \d+ analysts investigating at once, a watch burst",
        *(rf"(?m)^{setting} +\d+ +\d+ +\d+ +\d+ +\d+ \| +{NUMBER} s +{NUMBER} \| +{NUMBER} s +{NUMBER} \| +{NUMBER} s "
          rf"+{NUMBER}$" for setting in ("no budget, 429 with Retry-After", "no budget, 429 without one",
                                          r"scheduler \(5 at once, the window\)")),
        rf"With the scheduler: \d+ failures from throttling, \d+ 429s, at most \d+ at once at the fake .* goals 0 "
        rf"failures from throttling: {VERDICT}; at most 5 at once at the fake: {VERDICT}; interactive p50 below the "
        rf"watch's and the bulk work's: {VERDICT}",
        r"== 429 storm: every query answered 429 without Retry-After",
        rf"requests per query {NUMBER} \(1 try \+ 2 retries\); the analyst told after {NUMBER} s: Log Analytics is "
        r"throttling",
        r"Benchmark took",
    ],
    "bench_streaming.py": [
        r"== Streamed answers in a 1:1 chat: seconds from the request",
        rf"(?m)^ +{NUMBER} +{NUMBER} \| +{NUMBER} +{NUMBER} +{NUMBER} +{NUMBER} \| +-?{NUMBER}$",
        rf"The final message came at most -?{NUMBER} s after the model finished",
        r"Benchmark took",
    ],
    "bench_escalation.py": [
        r"== Escalations: Confirm to the posted mention and to the outcome",
        *(rf"(?m)^{case} +{NUMBER} +{NUMBER} +{NUMBER} +[\d/]+ +[\d/]+$" for case in ("member", "not member",
                                                                                     "owner", "assign")),
        r"escalate_incident's declaration: \d+ tokens",
        rf"Slowest median to the posted mention {NUMBER} ms; goal under 100 ms: {VERDICT}",
        r"Benchmark took",
    ],
    "bench_wordings.py": [
        r"== 1\. Lies marked and correct answers marked, per record type and category \(independent corpus\)",
        r"(?m)^sign-in +correct +\d+ +0 +0 +0 +\d+$",
        r"(?m)^email +correct +\d+ +0 +0 +0 +\d+$",
        r"(?m)^narrative +\d+ +\d+ +\d+ +\d+$",
        rf"Tuning: \d+ of \d+ lies marked at the claim \({NUMBER}%\); \d+ of \d+ correct answers marked",
        rf"Held-out wordings: \d+ of \d+ lies marked at the claim \({NUMBER}%\)",
        rf"Held-out types: \d+ of \d+ lies marked at the claim \({NUMBER}%\)",
        rf"Held out: \d+ of \d+ lies marked at the claim \({NUMBER}%\); \d+ of \d+ correct answers marked",
        rf"Held-out goal >= 90% of lies at the claim, <= 3% of correct answers marked: {VERDICT}",
        r"== Most common misses \(record type, lie, family\)",
        r"== Most common false marks on correct answers",
        rf"answers \d+ +p50 {NUMBER} +p99 {NUMBER} +max {NUMBER}",
        rf"Corpus answers that made the check raise: \d+; goal none: {VERDICT}",
        r"Benchmark took",
    ],
    "bench_watches.py": [
        r"== Watch polls: Log Analytics queries and time per poll",
        *(rf"(?m)^ +\d+ {poll} +1 +\d+ +\d+ +{NUMBER}$" for poll in (r"quiet \(median\)", "one new", "burst of 8",
                                                                       "changed")),
        rf"Most Log Analytics queries in one poll: 1 with 1 and \d+ watches; goal 1 whatever the number of watches: "
        rf"{VERDICT}",
        r"Benchmark took",
    ],
    "bench_teams.py": [
        r"Bot process pid \d+ .* started in",
        r"== 1\. HTTP acknowledgement .* 2\. request -> first feedback",
        r"== 1q\. HTTP acknowledgement .* durable turns on this machine",
        *(rf"(?m)^{run} .* \| +\d+/\d+ +{NUMBER}$" for run in ("A", "B", "C")),
        (rf"1\. Ack \(client side, POST sent -> response\): p50 {NUMBER} ms, p99 {NUMBER} ms, max {NUMBER} ms; "
         rf"goal p99 < 50 ms: {VERDICT}"),
        rf"2\. First feedback .* goal p99 < 300 ms: {VERDICT}",
        r"== 3\. CPU per turn in the bot's own process vs the minimal botbuilder echo bot",
        rf"(?m)^echo bot \(tests/support/echo_bot\.py\) +{NUMBER} +1\.00 ",
        rf"(?m)^bot, command \"incidents 24h\" +{NUMBER} +{NUMBER} +{NUMBER} +{VERDICT}$",
        rf"(?m)^bot, model question .* +{NUMBER} +{NUMBER} +{NUMBER} +{VERDICT}$",
        r"== 4\. Stored state of one conversation after",
        r"(?m)^ +\d+ +\d+ +\d+\.\d +\d+ +[1-9]\d* +conversation\.",  # a row with user turns kept: the format is read
        rf"After \d+ turns: \d+ bytes \({NUMBER} KB\); goal <= 64 KB: {VERDICT}\. 0 error answers",
        r"Benchmark took",
    ],
}


def test_every_benchmark_has_expected_figures() -> None:
    assert benchmarks() == sorted(EXPECTED), "add the new benchmark's figure lines to EXPECTED"


@pytest.mark.slow
@pytest.mark.parametrize("name", benchmarks())
def test_benchmark_smoke_run(name: str, benchmark_smoke_runs: SmokeRuns | SharedSmokeRuns) -> None:
    done = benchmark_smoke_runs.outcome(name)
    if isinstance(done, str):
        pytest.fail(done)
    report = f"{name} --smoke exited {done.returncode}\n--- stdout\n{done.stdout[-6000:]}\n--- stderr\n" \
             f"{done.stderr[-6000:]}"
    assert done.returncode == 0, report
    assert "SMOKE RUN" in done.stdout, report
    missing = [pattern for pattern in EXPECTED.get(name, []) if not re.search(pattern, done.stdout)]
    assert not missing, f"lines not printed: {missing}\n{report}"
    # Every turn a benchmark sends must be answered; an error answer means the bot broke under it.
    assert not re.search(r"(?<!\b0 )error answers", done.stdout), report
