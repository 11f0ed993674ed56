"""Stage 4 of the Fact Executor's SFT: LoRA on a local causal LM with PEFT and the
transformers Trainer, on the exported chat records.

The loss covers the answer only (the prompt's tokens are masked), as the executor is asked
to write the answer and never the prompt. Defaults are the paper's: LoRA rank 128, learning
rate 5e-5, an effective batch of 8 (1 x 8 accumulation steps), 3 epochs. Checkpoints go to
`out/checkpoint-N` and a run resumes from the last one; the adapter ends in `out/adapter`
(`adapter_config.json` + safetensors, with the tokenizer), which vLLM loads as a
`LoRARequest` and `vllm serve --enable-lora --lora-modules` serves.

torch, transformers and peft (the `executor` extra) are imported when a run starts.
"""

from __future__ import annotations

import contextlib
import json
import sys
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from common.errors import InvalidInput
from common.executor.dataset import ChatRecord, read_split

INSTALL_HINT = "pip install 'atommem[executor]'"
ADAPTER = "adapter"
REPORT = "atommem_executor.json"
IGNORE = -100  # label of a token the loss skips (the prompt, the padding)


class TrainConfig(BaseModel):
    model: str = Field(description="a local model directory with a chat template")
    data: Path = Field(description="`atommem executor export`'s directory")
    out: Path
    rank: int = Field(default=128, ge=1)
    alpha: int = Field(default=256, ge=1)
    dropout: float = Field(default=0.05, ge=0.0, lt=1.0)
    learning_rate: float = Field(default=5e-5, gt=0.0)
    batch_size: int = Field(default=1, ge=1)
    grad_accum: int = Field(default=8, ge=1)
    epochs: float = Field(default=3.0, gt=0.0)
    max_length: int = Field(default=4096, ge=16)
    save_steps: int = Field(default=100, ge=1)
    gradient_checkpointing: bool = False
    seed: int = 42


class TrainResult(BaseModel):
    adapter: Path
    base_model: str
    examples: dict[str, int]
    truncated: int
    steps: int
    losses: list[float] = Field(description="the training loss at every logged update")
    eval_loss: float | None
    resumed_from: str | None


def _require() -> None:
    try:
        import peft  # noqa: F401
        import transformers  # noqa: F401
    except ImportError as exc:
        raise InvalidInput(f"training needs peft and transformers: {INSTALL_HINT}") from exc


def tokenize(record: ChatRecord, tokenizer: Any) -> dict[str, list[int]]:
    """Input ids with the prompt masked out of the labels: the chat template rendered up to
    the assistant's turn, then the answer's tokens."""
    prompt = tokenizer.apply_chat_template(
        record.messages[:-1], tokenize=False, add_generation_prompt=True
    )
    full = tokenizer.apply_chat_template(record.messages, tokenize=False)
    if not full.startswith(prompt):
        raise InvalidInput("the model's chat template renders the prompt unlike the whole chat")
    head = tokenizer(prompt, add_special_tokens=False)["input_ids"]
    tail = tokenizer(full[len(prompt) :], add_special_tokens=False)["input_ids"]
    ids = head + tail
    return {
        "input_ids": ids,
        "attention_mask": [1] * len(ids),
        "labels": [IGNORE] * len(head) + tail,
    }


def _examples(
    config: TrainConfig, tokenizer: Any
) -> tuple[dict[str, list[dict[str, list[int]]]], int]:
    """Tokenised train and validation examples, and how many were cut at max_length (those
    whose answer was cut away whole are left out)."""
    out: dict[str, list[dict[str, list[int]]]] = {}
    truncated = 0
    for split in ("train", "validation"):
        path = config.data / f"{split}.jsonl"
        records = read_split(path) if split == "train" or path.exists() else []
        out[split] = []
        for record in records:
            whole = tokenize(record, tokenizer)
            truncated += len(whole["input_ids"]) > config.max_length
            example = {key: values[: config.max_length] for key, values in whole.items()}
            if any(label != IGNORE for label in example["labels"]):
                out[split].append(example)
    if not out["train"]:
        raise InvalidInput(f"{config.data}: no training example (export reviewed samples first)")
    return out, truncated


def train(config: TrainConfig, resume: bool = True, quiet: bool = False) -> TrainResult:
    """LoRA SFT; resumes from the last checkpoint in `config.out` unless `resume` is off."""
    _require()
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import (
        AutoModelForCausalLM,
        AutoTokenizer,
        DataCollatorForSeq2Seq,
        Trainer,
        TrainingArguments,
    )
    from transformers.trainer_utils import get_last_checkpoint

    try:
        tokenizer = AutoTokenizer.from_pretrained(config.model)
    except OSError as exc:
        raise InvalidInput(f"cannot load a tokenizer from {config.model!r}: {exc}") from exc
    if not tokenizer.chat_template:
        raise InvalidInput(f"{config.model!r} has no chat template: train an instruct model")
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    examples, truncated = _examples(config, tokenizer)
    cuda = torch.cuda.is_available()
    bf16 = cuda and torch.cuda.is_bf16_supported()
    base = AutoModelForCausalLM.from_pretrained(
        config.model, dtype=torch.bfloat16 if bf16 else torch.float32
    )
    lora = LoraConfig(
        r=config.rank,
        lora_alpha=config.alpha,
        lora_dropout=config.dropout,
        target_modules="all-linear",
        task_type="CAUSAL_LM",
    )
    model = get_peft_model(base, lora)
    validate = bool(examples["validation"])
    args = TrainingArguments(
        output_dir=str(config.out),
        per_device_train_batch_size=config.batch_size,
        per_device_eval_batch_size=config.batch_size,
        gradient_accumulation_steps=config.grad_accum,
        learning_rate=config.learning_rate,
        num_train_epochs=config.epochs,
        save_strategy="steps",
        save_steps=config.save_steps,
        save_total_limit=2,
        eval_strategy="epoch" if validate else "no",
        logging_steps=1,
        report_to=[],
        seed=config.seed,
        bf16=bf16,
        use_cpu=not cuda,
        gradient_checkpointing=config.gradient_checkpointing,
        disable_tqdm=quiet,
        remove_unused_columns=False,
    )
    trainer = Trainer(
        model=model,
        args=args,
        train_dataset=examples["train"],
        eval_dataset=examples["validation"] if validate else None,
        data_collator=DataCollatorForSeq2Seq(tokenizer, padding=True, label_pad_token_id=IGNORE),
    )
    last: str | None = None
    if resume and config.out.is_dir():
        last = get_last_checkpoint(str(config.out))  # type: ignore[no-untyped-call]
    with contextlib.redirect_stdout(sys.stderr):  # the Trainer prints its logs; stdout is ours
        trainer.train(resume_from_checkpoint=last)
    adapter = config.out / ADAPTER
    trainer.save_model(str(adapter))
    tokenizer.save_pretrained(str(adapter))
    history = trainer.state.log_history
    evals = [h["eval_loss"] for h in history if "eval_loss" in h]
    result = TrainResult(
        adapter=adapter,
        base_model=config.model,
        examples={split: len(items) for split, items in examples.items()},
        truncated=truncated,
        steps=trainer.state.global_step,
        losses=[float(h["loss"]) for h in history if "loss" in h],
        eval_loss=float(evals[-1]) if evals else None,
        resumed_from=last,
    )
    report = {"config": config.model_dump(mode="json"), **result.model_dump(mode="json")}
    (adapter / REPORT).write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    return result


def generate(base: str, adapter: Path, messages: list[dict[str, str]], max_new_tokens: int) -> str:
    """The adapted model's greedy answer to a chat: a check that an adapter loads and runs
    without vLLM."""
    _require()
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(adapter))
    model = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(base), str(adapter))
    model.eval()
    text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    inputs = tokenizer(text, add_special_tokens=False, return_tensors="pt")
    with torch.no_grad():
        out = model.generate(  # type: ignore[no-untyped-call]
            **inputs,
            max_new_tokens=max_new_tokens,
            do_sample=False,
            pad_token_id=tokenizer.pad_token_id,
        )
    return str(tokenizer.decode(out[0][inputs["input_ids"].shape[1] :], skip_special_tokens=True))
