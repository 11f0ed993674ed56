"""A tiny causal LM built here, with no download: a byte-level BPE tokenizer trained on the
test's own texts, wrapped with a ChatML template, and a randomly initialised two-layer Qwen2
of hidden size 32, saved as a local model directory the trainer loads like any other."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
SPECIAL = ["<pad>", "<|im_start|>", "<|im_end|>"]


def build(out: Path, texts: Iterable[str], vocab: int = 512) -> Path:
    """The model directory `out`: tokenizer files, config and random weights."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

    core = Tokenizer(models.BPE())
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab,
        special_tokens=SPECIAL,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    core.train_from_iterator(texts, trainer)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=core, pad_token="<pad>", eos_token="<|im_end|>", bos_token=None
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    torch.manual_seed(0)
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=2048,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        tie_word_embeddings=True,
        # Wide enough that the frozen, tied output layer can give peaked logits: at the
        # default 0.02 every logit lies within about 0.6 of the others whatever LoRA learns.
        initializer_range=0.3,
    )
    Qwen2ForCausalLM(config).save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out
