"""Turning an instruction and a text into decoder token ids around the Contextual-token slot.

Every input becomes ``head + [C] * n + tail`` where, with the default placement,

    head = BOS? + prefix + instruction        tail = text + suffix + EOS

and with ``placement="before_instruction"`` the instruction moves to the start of ``tail``. In-context
examples (:class:`~c2v_rag.core.instructions.InContextPrompt`, Causal2Vec "w/ ICL") always sit in ``head``,
between the prefix and the instruction: ``prefix + examples + instruction + [C] + text``. C stays
right before the text it encodes and after the instruction, as the paper places it (Table 14). With
``echo=True`` the text appears twice in ``tail``, inside the Echo template. Each input records
the span of ``tail`` that pooled representations average over: the text (its second copy under
Echo), never the instruction or the template.
The slot is filled by position with the projector output; no text placeholder is tokenized,
so no tokenizer can split or merge it. Only the text is truncated to fit ``max_length``: never the
examples or the instruction; examples that leave no room for text are an error naming the task.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from c2v_rag.core.config import DEFAULT_EXAMPLE_TEMPLATE, Placement, PromptFormat
from c2v_rag.core.instructions import InContextPrompt, Instruction

EXAMPLE_CACHE_SIZE = 1024
"""How many example sets' token ids a prompt builder keeps (least recently used dropped first)."""

# Instruction templates of common backbone families (paper, Appendix A.1: [INST] for Llama-2 and
# Mistral, <|im_start|>user ... <|im_end|> for Qwen2.5). Matched on the tokenizer's chat template.
_KNOWN_FORMATS: list[tuple[str, PromptFormat]] = [
    ("<|im_start|>", PromptFormat(name="chatml", prefix="<|im_start|>user\n", suffix="<|im_end|>")),
    ("<start_of_turn>", PromptFormat(name="gemma", prefix="<start_of_turn>user\n", suffix="<end_of_turn>")),
    (
        "<|start_header_id|>",
        PromptFormat(name="llama3", prefix="<|start_header_id|>user<|end_header_id|>\n\n", suffix="<|eot_id|>"),
    ),
    ("[INST]", PromptFormat(name="inst", prefix="[INST] ", suffix=" [/INST]")),
]


def detect_prompt_format(tokenizer) -> PromptFormat:
    """The instruction template of ``tokenizer``'s chat template, or none for base models."""
    template = getattr(tokenizer, "chat_template", None) or ""
    if isinstance(template, dict):
        template = " ".join(str(t) for t in template.values())
    for marker, fmt in _KNOWN_FORMATS:
        if marker in template:
            return fmt
    return PromptFormat()


def tokenizer_adds_bos(tokenizer) -> bool:
    """Whether the tokenizer prepends BOS on its own (Llama, Gemma do; GPT-2, Qwen do not)."""
    bos = tokenizer.bos_token_id
    if bos is None:
        return False
    with_special = tokenizer("a", add_special_tokens=True)["input_ids"]
    without = tokenizer("a", add_special_tokens=False)["input_ids"]
    return len(with_special) > len(without) and with_special[0] == bos


@dataclass
class DecoderPieces:
    """One input's decoder tokens, split around the Contextual-token slot."""

    head: list[int]
    tail: list[int]
    truncated: bool
    text_span: tuple[int, int] = (0, 0)
    """[start, end) of the text tokens inside ``tail``: what ``mean``/``weighted_mean`` pool over."""

    def length(self, num_contextual_tokens: int) -> int:
        return len(self.head) + num_contextual_tokens + len(self.tail)


class PromptBuilder:
    """Builds :class:`DecoderPieces` for a decoder tokenizer and a prompt configuration."""

    def __init__(
        self,
        tokenizer,
        prompt_format: PromptFormat,
        *,
        instruction_template: str,
        placement: Placement,
        num_contextual_tokens: int,
        max_length: int,
        echo_template: str | None = None,
        keep_text: bool = True,
        example_template: str = DEFAULT_EXAMPLE_TEMPLATE,
        example_separator: str = "\n\n",
    ) -> None:
        if tokenizer.eos_token_id is None:
            raise ValueError("the decoder tokenizer has no eos_token; set tokenizer.eos_token first")
        self.tokenizer = tokenizer
        self.format = prompt_format
        self.instruction_template = instruction_template
        self.placement = placement
        self.num_contextual_tokens = num_contextual_tokens
        self.max_length = max_length
        # False when the embedding is read at the Contextual token: under causal attention nothing after
        # C changes h_C, so the text tokens would cost decoder compute and change no output.
        self.keep_text = keep_text
        self.eos_id = int(tokenizer.eos_token_id)
        bos = [int(tokenizer.bos_token_id)] if tokenizer_adds_bos(tokenizer) else []
        self._prefix = bos + self._ids(prompt_format.prefix)
        self._suffix = self._ids(prompt_format.suffix)
        # A chat suffix may already end in EOS (SmolLM2's <|im_end|>): never append it twice.
        self._closing = self._suffix if self._suffix[-1:] == [self.eos_id] else self._suffix + [self.eos_id]
        self.example_template = example_template
        self.example_separator = example_separator
        self._instruction_cache: dict[str, list[int]] = {}
        # Least recently used first. Bounded: training draws a new example set for nearly every query.
        self._examples_cache: OrderedDict[Instruction, list[int]] = OrderedDict()
        # Echo: the template's pieces around the two copies, tokenized once, like the instruction.
        self._echo = [self._ids(part) for part in echo_template.split("{text}")] if echo_template else None

    def _ids(self, text: str) -> list[int]:
        return self.tokenizer(text, add_special_tokens=False)["input_ids"] if text else []

    def instruction_ids(self, instruction: Instruction) -> list[int]:
        """The tokens of the instruction (through ``instruction_template``), examples excluded."""
        text = instruction.instruction if isinstance(instruction, InContextPrompt) else instruction
        text = self.instruction_template.format(instruction=text) if text else ""
        if text not in self._instruction_cache:  # keyed by text: every example set shares its instruction's ids
            self._instruction_cache[text] = self._ids(text)
        return self._instruction_cache[text]

    def example_text(self, instruction: Instruction) -> str:
        """The in-context examples as the decoder reads them, ending in the separator; "" without examples."""
        if not isinstance(instruction, InContextPrompt):
            return ""
        blocks = [
            self.example_template.format(instruction=instruction.instruction, query=q, response=r)
            for q, r in instruction.examples
        ]
        return self.example_separator.join(blocks) + self.example_separator

    def example_ids(self, instruction: Instruction) -> list[int]:
        """The tokens of :meth:`example_text`, tokenized once per prompt (like the instruction)."""
        cache = self._examples_cache
        if instruction in cache:
            cache.move_to_end(instruction)
            return cache[instruction]
        ids = cache[instruction] = self._ids(self.example_text(instruction))
        if len(cache) > EXAMPLE_CACHE_SIZE:
            cache.popitem(last=False)
        return ids

    def text_budget(self, instruction: Instruction, max_length: int | None = None) -> int:
        """How many text tokens fit once the examples, the instruction, the slot and the closing tokens are in,
        within ``max_length`` decoder tokens (None: :attr:`max_length`)."""
        max_length = self.max_length if max_length is None else max_length
        examples = self.example_ids(instruction)
        fixed = len(self._prefix) + len(examples) + len(self.instruction_ids(instruction)) + self.num_contextual_tokens
        budget = max_length - fixed - len(self._closing)
        if self._echo is not None:
            # Both copies must fit, with the template around them.
            budget = (budget - sum(len(p) for p in self._echo)) // 2
        if isinstance(instruction, InContextPrompt) and examples and budget < 1:
            # Examples are never cut (a cut example teaches a wrong pattern); the text would be lost instead.
            owner = f"task {instruction.task!r}" if instruction.task else "the instruction"
            raise ValueError(
                f"the {len(instruction.examples)} in-context example(s) of {owner} take {len(examples)} tokens, "
                f"which with the instruction and the template ({fixed + len(self._closing)} tokens in all) leave no "
                f"room for the text within max_length={max_length}: pass fewer or shorter examples "
                f"(examples=...), or raise max_length"
            )
        if budget < 0:
            what = f"the instruction {instruction!r} and the template take" if instruction else "the template takes"
            raise ValueError(
                f"max_length={max_length} leaves no room for the text: {what} "
                f"{fixed + len(self._closing)} tokens. Raise max_length"
                + (" or shorten the instruction." if instruction else ".")
            )
        return budget

    def build(
        self,
        texts: list[str],
        instruction: Instruction,
        *,
        keep_text: bool | None = None,
        max_length: int | None = None,
    ) -> list[DecoderPieces]:
        """Tokenize ``texts`` (in one fast batch call) and lay them out around the slot.

        ``keep_text=False`` leaves the text out (only what comes before the slot is read); None follows
        :attr:`keep_text`. ``max_length`` bounds each input's decoder tokens for this call only (None:
        :attr:`max_length`), so one builder serves callers that truncate at different lengths.
        """
        keep_text = self.keep_text if keep_text is None else keep_text
        instr = self.instruction_ids(instruction)
        examples = self.example_ids(instruction)
        budget = self.text_budget(instruction, max_length)
        encoded = (
            self.tokenizer(texts, add_special_tokens=False)["input_ids"] if texts and keep_text else [[] for _ in texts]
        )
        pieces = []
        for ids in encoded:
            truncated = keep_text and len(ids) > budget
            ids = ids[:budget] if keep_text else []
            body, start = ids, 0
            if self._echo is not None:
                before, middle, after = self._echo
                body = before + ids + middle + ids + after
                start = len(before) + len(ids) + len(middle)
            if self.placement == "after_instruction":
                head, lead = self._prefix + examples + instr, []
            else:
                head, lead = self._prefix + examples, instr
            start += len(lead)
            pieces.append(DecoderPieces(head, lead + body + self._closing, truncated, (start, start + len(ids))))
        return pieces
