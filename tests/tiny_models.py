"""Tiny tokenizers and decoder configurations built offline: the pieces of the suite's tiny backbones.

A module of its own, not conftest.py: tests and helpers import these names, and with more than one conftest.py
in the tree the module called ``conftest`` is whichever pytest loaded last.
"""

from __future__ import annotations

from tiny_corpus import CORPUS

DECODER_SPECIALS = ["<unk>", "<pad>", "<s>", "</s>", "<|im_start|>", "<|im_end|>"]
CHATML_TEMPLATE = "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"


def build_decoder_tokenizer(*, add_bos: bool, chatml: bool):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400, special_tokens=DECODER_SPECIALS, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tok.train_from_iterator(CORPUS, trainer)
    if add_bos:
        bos = tok.token_to_id("<s>")
        tok.post_processor = processors.TemplateProcessing(
            single="<s> $A", pair="<s> $A <s> $B", special_tokens=[("<s>", bos)]
        )
    wrapped = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<s>",
        eos_token="</s>",
        pad_token="<pad>",
        unk_token="<unk>",
        padding_side="right",
    )
    if chatml:
        wrapped.eos_token = "<|im_end|>"
        wrapped.chat_template = CHATML_TEMPLATE
    return wrapped


ENCODER_SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def encoder_vocab(normalizer, pre_tokenizer, size: int = 300) -> dict[str, int]:
    """A WordPiece vocabulary of the corpus, the same in every process: the specials, every ASCII letter, digit and
    punctuation mark alone and as a continuation, the corpus's words, then its most frequent word endings.

    Not ``WordPieceTrainer``: it breaks ties between equally frequent merges in hash order, so each process drew
    another vocabulary (291 or 292 tokens, other ids), hence another tiny encoder, and tests that need a random
    model to rank in some order passed or failed by the draw."""
    import string
    from collections import Counter

    words = Counter(
        word for text in CORPUS for word, _ in pre_tokenizer.pre_tokenize_str(normalizer.normalize_str(text))
    )
    characters = sorted(string.ascii_lowercase + string.digits + string.punctuation)
    endings = Counter("##" + word[start:] for word in words for start in range(max(1, len(word) - 4), len(word) - 1))
    tokens = [*ENCODER_SPECIALS, *characters, *("##" + c for c in characters)]
    tokens += sorted(words, key=lambda word: (-words[word], word))
    tokens += sorted(endings, key=lambda piece: (-endings[piece], piece))
    unique = list(dict.fromkeys(tokens))[:size]
    return {token: index for index, token in enumerate(unique)}


def build_encoder_tokenizer():
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    normalizer = normalizers.BertNormalizer(lowercase=True)
    pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok = Tokenizer(models.WordPiece(encoder_vocab(normalizer, pre_tokenizer), unk_token="[UNK]"))
    tok.normalizer = normalizer
    tok.pre_tokenizer = pre_tokenizer
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B [SEP]",
        special_tokens=[("[CLS]", tok.token_to_id("[CLS]")), ("[SEP]", tok.token_to_id("[SEP]"))],
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        unk_token="[UNK]",
        pad_token="[PAD]",
        cls_token="[CLS]",
        sep_token="[SEP]",
        mask_token="[MASK]",
        padding_side="right",
        model_max_length=64,
    )


def decoder_config(family: str, vocab: int, tokenizer):
    from transformers import (
        Gemma3TextConfig,
        GemmaConfig,
        GPT2Config,
        LlamaConfig,
        MistralConfig,
        Qwen2Config,
        Qwen3Config,
    )

    ids = dict(
        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id
    )
    common = dict(
        vocab_size=vocab,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=256,
        **ids,
    )
    if family == "llama":
        return LlamaConfig(**common)
    if family == "mistral":
        return MistralConfig(**common, sliding_window=None)
    if family == "qwen2":
        return Qwen2Config(**common)
    if family == "qwen3":
        return Qwen3Config(**common, head_dim=8)
    if family == "gemma":
        return GemmaConfig(**common, head_dim=8)
    if family == "gemma3":
        return Gemma3TextConfig(**common, head_dim=8, sliding_window=64)
    if family == "gpt2":
        return GPT2Config(vocab_size=vocab, n_embd=32, n_layer=2, n_head=4, n_positions=256, **ids)
    raise ValueError(family)


FAMILIES = {
    "llama": dict(add_bos=True, chatml=False),
    "mistral": dict(add_bos=True, chatml=False),
    "qwen2": dict(add_bos=False, chatml=True),
    "qwen3": dict(add_bos=False, chatml=True),
    "gemma": dict(add_bos=True, chatml=False),
    "gemma3": dict(add_bos=True, chatml=False),
    "gpt2": dict(add_bos=False, chatml=False),
}


def with_lora(
    model, role: str = "decoder", targets: tuple[str, ...] | None = None, *, alpha: int = 8, std: float = 0.5
):
    """``model`` with a rank-4 LoRA adapter on its ``role`` backbone whose B factors are random (peft starts them at
    zero, where the adapter changes nothing), so that the adapter really moves the vectors. ``targets``: the
    modules it wraps (default: the attention's query and value projections of that backbone)."""
    import torch
    from peft import LoraConfig, get_peft_model

    targets = targets or (("q_proj", "v_proj") if role == "decoder" else ("query", "value"))
    wrapped = get_peft_model(getattr(model, role), LoraConfig(r=4, lora_alpha=alpha, target_modules=list(targets)))
    with torch.no_grad():
        for name, param in wrapped.named_parameters():
            if "lora_B" in name:
                param.normal_(std=std)
    setattr(model, role, wrapped)
    return model
