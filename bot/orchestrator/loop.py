"""The tool-calling loop: one analyst question in, one grounded answer out.

Small typed steps in a bounded loop: call the model with the tools the registry offers; run the read
calls of a round concurrently; record the model's message with its tool calls before their results;
stop at a text answer, or after ``max_rounds`` (or when another round would take the turn's calls past
``max_turn_tokens``) make one last call without tools and say so. A write
tool (``needs_confirmation``) never runs: the write guard (a before-call hook) checks the analyst's own
words, and the confirmation desk turns the call into a proposal the analyst confirms on a card. Then
the answer's identifiers and claims are checked against the facts the conversation's queries returned, in a
worker thread off the event loop (mismatches marked in the text, risky ones withheld), and typed data (text,
artifacts, tool log, notices) goes back for the caller to render. Model failures become a friendly
reply; the conversation is never left with a half-written turn. A refusal is shown as the model's
refusal, an answer cut at the length limit says so, a context overflow first drops old turns, then
shortens this turn's tool results, then asks for a narrower question, and retry waits share one
budget per turn.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from bot.orchestrator import factcheck, offer, prompts
from bot.orchestrator.changes import Actor, ConfirmationDesk, Proposal, WriteGuard
from bot.orchestrator.conversation import Conversation
from bot.orchestrator.items import (
    Instruction,
    Item,
    Message,
    ModelMessage,
    Notice,
    ToolCall,
    ToolResult,
    UserMessage,
)
from bot.orchestrator.llm import ChatModel, Completion, LLMError, LLMErrorKind, TextSink, WaitBudget
from bot.orchestrator.local_time import LocalZone, time_context
from bot.orchestrator.memory import Memory, digest
from bot.sentinel.models import QueryResult
from bot.tools.compact import error_text
from bot.tools.tool import Tool
from bot.tools.toolbox import ToolBox, ToolRun, parse_arguments

log = logging.getLogger(__name__)
MAX_TOOL_CALLS_PER_ROUND = 8
MAX_USER_TEXT = 4000
DEFAULT_MAX_TURN_TOKENS = 60_000  # MAX_TURN_TOKENS: no tool round that would take a turn's model calls past it

Progress = Callable[[str], Awaitable[None]]


async def _no_progress(_: str) -> None:
    return None


@dataclass
class TurnResult:
    text: str
    runs: list[ToolRun] = field(default_factory=list)  # the tool log, in call order
    notices: list[str] = field(default_factory=list)  # trimming, unverified identifiers, round limit
    disclaimer: bool = False
    failed: bool = False  # the model could not answer; text says why
    failure: LLMErrorKind | None = None  # when failed: what kind of model failure
    rounds: int = 0  # model calls made
    hit_round_limit: bool = False  # the answer is the synthesis after max_rounds of tool calls
    proposals: list[Proposal] = field(default_factory=list)  # incident changes proposed (at most one)
    refused: bool = False  # the model declined; text is its refusal
    cut: bool = False  # the answer stopped at the model's length limit
    findings: list[factcheck.Finding] = field(default_factory=list)  # what the fact check caught (marked in text)
    tokens: int = 0  # prompt and completion tokens of this turn's model calls, as the model reported them
    # What the analyst's (and the conversation's) minute budgets are charged: the first model call's tokens (the
    # question, the conversation's words, the tools), less the earlier tool results its history carries. The rounds
    # after it are forced by what tools returned (attacker-written titles among it), so they count against this
    # turn's own bound (``max_turn_tokens``) instead, as do the carried results.
    charged_tokens: int = 0

    @property
    def artifacts(self) -> list[Any]:
        return [run.artifact for run in self.runs]


class Orchestrator:
    def __init__(self, model: ChatModel, tools: ToolBox, memory: Memory, *, max_rounds: int = 5,
                 max_turn_tokens: int = DEFAULT_MAX_TURN_TOKENS, demo: bool = False,
                 desk: ConfirmationDesk | None = None, guard: WriteGuard = WriteGuard(),
                 clock: Callable[[], datetime] = lambda: datetime.now(UTC)) -> None:
        self.model = model
        self.tools = tools
        self.memory = memory
        self.max_rounds = max_rounds
        self.max_turn_tokens = max_turn_tokens  # 0: no bound but the rounds
        self.demo = demo
        self.guard = guard
        self.clock = clock  # "now" for the fact check ("2 minutes ago") and when facts were seen
        # The write tools are offered only where changes can be proposed (Teams, writes enabled).
        self.desk = desk if desk is not None and desk.enabled else None
        self.offered: tuple[Tool, ...] = tools.registry.offered(writes=self.desk is not None)

    async def answer(self, conversation: Conversation, text: str, progress: Progress = _no_progress,
                     actor: Actor | None = None, stream: TextSink | None = None,
                     local: LocalZone | None = None) -> TurnResult:
        """Answer ``text``; ``actor`` (who asks, where) lets write tools propose changes for them. ``stream``: the
        answer's text is streamed to it as it is written, whole sentences only, fact-checked and marked; the
        TurnResult's text (with the summary on top) is the final word. ``local``: the analyst's time zone, for
        the times they give."""
        notices = self.memory.before_turn(conversation)
        user_text = text.strip()[:MAX_USER_TEXT]
        turn: list[Item] = [UserMessage(user_text)]
        wants_examples = prompts.asks_for_example_data(user_text)
        result = TurnResult(text="", notices=notices)
        asking = _Asking(user_text, actor, local, budget=self.model.wait_budget(),
                         live=_LiveAnswer(stream, conversation, self.clock) if stream is not None else None)
        try:
            completion = await self._run_rounds(conversation, turn, result, wants_examples, progress, asking)
        except LLMError as error:
            log.warning("model call failed: %s (%s)", error.kind, error.reason)
            log.debug("model call failure detail: %s", error.detail)
            result.text, result.failed, result.failure = error.message, True, error.kind
            # Keep the question (and any tool work already done) so the analyst can simply ask again.
            turn.append(Notice(f"(No answer: {error.message})"))
            self._finish(conversation, turn, result)
            return result
        answer, said_by_bot = self._answer_text(completion, result, wants_examples)
        if not said_by_bot:
            # Off the event loop: the turns' loop keeps serving other conversations while a long answer is read.
            result.findings, answer = await asyncio.to_thread(_checked, answer, conversation, self.clock())
        if result.findings:
            log.info("fact check: %d finding(s) in the answer (%s)", len(result.findings),
                     ", ".join(sorted({f.category for f in result.findings})))
            result.notices.append(factcheck.summary_notice(result.findings))
        turn.append(Notice(answer) if said_by_bot else ModelMessage(answer))
        claims_change = any(f.category == "change" for f in result.findings)
        if asking.write_calls or claims_change:
            # Whatever the text says (a model can be talked into "✅ applied"), only a Confirm click changes anything.
            result.notices.append(prompts.NOTHING_CHANGED_YET if not any(p.proposed for p in result.proposals)
                                  else prompts.CONFIRM_ON_THE_CARD)
        result.text = answer
        result.disclaimer = not said_by_bot and not result.refused and prompts.goes_beyond_records(answer)
        self._finish(conversation, turn, result)
        return result

    @staticmethod
    def _answer_text(completion: Completion, result: TurnResult, wants_examples: bool) -> tuple[str, bool]:
        """The answer to show, and whether the bot (not the model) said it; notes a refusal or a cut answer."""
        answer = (completion.text or "").strip()
        result.refused = not answer and bool(completion.refusal)
        result.cut = completion.cut
        said_by_bot = False
        if result.refused:
            # The model's own refusal, shown as one: "please rephrase" would hide why there is no answer.
            answer = (completion.refusal or "").strip()
            result.notices.append(prompts.REFUSED_NOTICE)
        elif result.cut and not answer:
            answer, said_by_bot = prompts.CUT_BEFORE_ANSWER, True
        elif result.cut:
            result.notices.append(prompts.CUT_NOTICE)
        if not result.refused:
            if result.hit_round_limit:
                answer = f"{prompts.ROUNDS_EXHAUSTED_PREFIX}\n\n{answer}".strip()
            if wants_examples and not answer.startswith(prompts.EXAMPLE_DATA_REFUSAL):
                answer = f"{prompts.EXAMPLE_DATA_REFUSAL}\n\n{answer}".strip()
        if not answer:
            answer = "I could not put an answer together from these results. Please rephrase the question."
        return answer, said_by_bot

    def remember(self, conversation: Conversation, result: QueryResult) -> None:
        """A read's rows enter the conversation: their [n] references, and the facts the fact check reads, seen now
        by this orchestrator's clock. The model's reads and those run without it (a command, a card button) alike."""
        conversation.remember(result, self.clock())

    async def summarise_and_clear(self, conversation: Conversation) -> str:
        """/clear: keep preferences and a short model-written summary of the discussion."""
        summary = None
        if conversation.history:
            messages = [*self._system(), *conversation.history, *self._context(conversation),
                        Instruction(prompts.SUMMARY_INSTRUCTION)]
            try:
                summary = (await self.model.complete(messages, tools=None)).text
            except LLMError as error:
                log.warning("summary before /clear failed: %s", error.kind)
        conversation.clear((summary or "").strip()[:2000] or conversation.summary)
        if summary:
            return "Conversation cleared. I kept your preferences and a short summary of what we discussed."
        return "Conversation cleared. Your preferences are kept."

    async def _run_rounds(self, conversation: Conversation, turn: list[Item], result: TurnResult,
                          wants_examples: bool, progress: Progress, asking: _Asking) -> Completion:
        dropped_history = shrunk_results = False
        last = 0  # the last call's tokens: the next one, carrying all it carried and more, costs at least as much
        while True:
            tools = self._tools(asking.text, [*conversation.history, *turn]) \
                if result.rounds < self.max_rounds and not self._spent(result, last) else None
            messages = self._messages(conversation, turn, wants_examples, synthesis=tools is None, local=asking.local)
            try:
                completion = await self.model.complete(messages, tools, round_number=result.rounds + 1,
                                                       budget=asking.budget, on_text=asking.live)
            except LLMError as error:
                if error.kind is not LLMErrorKind.CONTEXT_LENGTH:
                    raise
                if not dropped_history and conversation.history:
                    dropped_history = True
                    dropped = self.memory.drop_half(conversation)
                    log.info("context length exceeded; dropped %d old turn(s) and retrying", dropped)
                    result.notices.append("The conversation was too long for the model, so older messages were "
                                          "trimmed.")
                    continue
                if not shrunk_results and _shrink_results(turn):
                    # A first turn has no history to drop: its own tool results are what is too long.
                    shrunk_results = True
                    log.info("context length exceeded; shortened this turn's tool results and retrying")
                    result.notices.append(prompts.RESULTS_SHORTENED_NOTICE)
                    continue
                raise LLMError(LLMErrorKind.CONTEXT_LENGTH, prompts.NARROWER_QUESTION, detail=error.detail,
                               reason=error.reason) from error
            result.rounds += 1
            last = completion.prompt_tokens + completion.completion_tokens
            result.tokens += last
            if result.rounds == 1:
                # Less what earlier queries returned, carried in the history: data (attackers write some), not asking.
                result.charged_tokens = max(0, last - self.memory.result_tokens(conversation))
            result.hit_round_limit = tools is None
            if tools is None or not completion.tool_calls:
                return completion
            await self._run_tools(conversation, completion, turn, result, progress, asking)

    def _tools(self, text: str, history: list[Item]) -> tuple[Tool, ...]:
        """The tools this model call offers: widened where a hunt is likely (``offer.hunt_likely``)."""
        if not offer.hunt_likely(text, history):
            return self.offered
        return self.tools.registry.offered(writes=self.desk is not None, widened=True)

    def _spent(self, result: TurnResult, last: int) -> bool:
        """Another tool round would take the turn past its own token bound: no more tools, only the answer from
        what was found (one call, which the bound does not stop)."""
        return bool(self.max_turn_tokens) and result.tokens + last >= self.max_turn_tokens

    async def _run_tools(self, conversation: Conversation, completion: Completion, turn: list[Item],
                         result: TurnResult, progress: Progress, asking: _Asking) -> None:
        calls = completion.tool_calls[:MAX_TOOL_CALLS_PER_ROUND]
        dropped = completion.tool_calls[MAX_TOOL_CALLS_PER_ROUND:]
        # Every tool call id needs an answer, or the next request is rejected: dropped calls are answered too.
        turn.append(ModelMessage(completion.text or None, tuple(calls + dropped)))
        for status in dict.fromkeys(self.tools.registry.status_text(c.name) for c in calls):
            await progress(status)
        tools = {call.id: self.tools.registry.get(call.name) for call in calls}
        reads = [call for call in calls if not _proposes(tools[call.id])]
        runs = await asyncio.gather(*(self.tools.run(call.name, call.arguments, call.id) for call in reads))
        for run in runs:
            if isinstance(run.artifact, QueryResult):
                self.remember(conversation, run.artifact)
            content = self.tools.registry.text(run.artifact, conversation.references.ref_for, run.arguments)
            turn.append(ToolResult(run.call_id, run.tool, content))
            result.runs.append(run)
        for call in calls:
            tool = tools[call.id]
            if tool is not None and _proposes(tool):
                # One at a time, after the reads: each may replace the conversation's pending action.
                content = await self._propose(conversation, call, tool, result, asking)
                turn.append(ToolResult(call.id, call.name, content))
        turn += [ToolResult(c.id, c.name, f"Not run: at most {MAX_TOOL_CALLS_PER_ROUND} tool calls per round.")
                 for c in dropped]

    async def _propose(self, conversation: Conversation, call: ToolCall, tool: Tool, result: TurnResult,
                       asking: _Asking) -> str:
        """A write tool call: a proposal the analyst must confirm, never a change. Its tool result text."""
        asking.write_calls += 1
        if self.desk is None or asking.actor is None:
            return "Not proposed: changing incidents is not available here. Tell the analyst to use the portal."
        if result.proposals:
            return ("Not proposed: this turn already proposed a change, and only one can wait for confirmation. "
                    "Tell the analyst to confirm or cancel it first, then ask for the next one.")
        arguments, problem = parse_arguments(call.name, call.arguments, tool)
        if problem is not None:
            return error_text(problem, arguments)
        refusal = self.guard.check(tool, arguments, asking.text, conversation)
        if refusal is not None:
            return self.desk.refuse(asking.actor, tool.name, refusal).message
        proposal = await self.desk.propose(conversation, asking.actor, tool.name, arguments, source="model")
        if proposal.proposed:
            result.proposals.append(proposal)
            return (f"{proposal.message} Tell the analyst to check the confirmation card. Do not say the change "
                    "was made.")
        return proposal.message

    def _system(self) -> list[Message]:
        """The stable prefix of every request (providers cache it): role, rules, demo note."""
        text = prompts.system_prompt(writes=self.desk is not None) + (f"\n\n{prompts.DEMO_NOTE}" if self.demo else "")
        return [Instruction(text)]

    def _context(self, conversation: Conversation, local: LocalZone | None = None) -> list[Message]:
        """What changes from turn to turn (the time, preferences, summary, references), placed after the history
        so the prefix stays cacheable."""
        parts = [time_context(self.clock(), local)]
        if conversation.preferences:
            parts.append(prompts.preferences_context(conversation.preferences))
        if conversation.summary:
            parts.append(prompts.summary_context(conversation.summary))
        listing = conversation.references.context()
        if listing:
            parts.append(prompts.references_context(listing))
        return [Instruction("\n\n".join(parts))]

    def _messages(self, conversation: Conversation, turn: list[Item], wants_examples: bool,
                  synthesis: bool, local: LocalZone | None = None) -> list[Message]:
        # The context goes just before this turn's question, and reflects references made during the turn.
        messages = [*self._system(), *conversation.history, *self._context(conversation, local), *turn]
        if wants_examples:
            messages.append(Instruction(prompts.EXAMPLE_DATA_INSTRUCTION))
        if synthesis:
            messages.append(Instruction(prompts.SYNTHESIS_INSTRUCTION))
        return messages

    def _finish(self, conversation: Conversation, turn: list[Item], result: TurnResult) -> None:
        self.memory.append(conversation, turn)
        conversation.turns += 1
        result.notices += self.memory.after_turn(conversation)


@dataclass
class _Asking:
    """The analyst's own words this turn, and who they are (write proposals are checked against both), and
    what the turn may still wait for model retries."""

    text: str
    actor: Actor | None
    local: LocalZone | None = None  # the analyst's time zone
    write_calls: int = 0  # the model's write tool calls this turn, proposed or not
    budget: WaitBudget = field(default_factory=WaitBudget)  # the turn's model retry waits left
    live: _LiveAnswer | None = None  # where the answer streams to, if anywhere




class _LiveAnswer:
    """The answer as it streams: sent on only up to its last finished sentence, checked and marked like the final
    answer, so nothing reaches the analyst before the fact check has seen it."""

    def __init__(self, sink: TextSink, conversation: Conversation, clock: Callable[[], datetime]) -> None:
        self.sink, self.conversation, self.clock = sink, conversation, clock
        self.check: factcheck.StreamCheck | None = None

    async def __call__(self, so_far: str) -> None:
        if self.check is None or len(so_far) < self.check.done:  # a new answer (after a retried model call)
            self.check = factcheck.StreamCheck(self.conversation.facts, self.conversation.references, self.clock())
        # Checks only the sentences finished since the last call, off the event loop like the final answer's check.
        shown = await asyncio.to_thread(self.check.advance, so_far)
        if shown is not None:
            await self.sink(shown)


def _checked(answer: str, conversation: Conversation, now: datetime) -> tuple[list[factcheck.Finding], str]:
    """The fact check's findings and the answer marked with them: what the analyst reads and the model sees next
    turn. Run in a worker thread (the conversation's turns run one at a time, so nothing changes its facts
    meanwhile)."""
    findings = factcheck.check(answer, conversation.facts, conversation.references, now)
    return findings, factcheck.annotate(answer, findings) if findings else answer


def _shrink_results(turn: list[Item]) -> bool:
    """Replace this turn's tool results by digests (in place, so the stored turn is what the model read).
    False when none could be shortened."""
    shortened = False
    for i, item in enumerate(turn):
        if isinstance(item, ToolResult) and (short := digest(item, "result")) is not item:
            turn[i] = short
            shortened = True
    return shortened


def _proposes(tool: Tool | None) -> bool:
    return tool is not None and tool.needs_confirmation
