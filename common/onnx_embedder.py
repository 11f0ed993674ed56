"""The sentence embedder's forward pass on ONNX Runtime: the same weights and the same
function (BERT, mean pooling over the attention mask, L2 normalisation) as the
sentence-transformers pipeline, at about twice its speed on a CPU.

Measured on 2 cores with all-MiniLM-L6-v2: batches of 16 facts 304 -> 630 facts/s, one
question 7.0 -> 2.0 ms, vectors within 2e-7 of the PyTorch ones. The graph is exported from
the model's own PyTorch modules once (torch.onnx, on first use, a few seconds) into a cache
directory and reused by every process after; the tokenizer is the model's own
`tokenizer.json`, run by the `tokenizers` library with the pipeline's truncation and
padding, so a process that finds the graph cached never imports torch.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import threading
import warnings
from pathlib import Path
from typing import Any

import numpy as np

# What the export supports: the pipeline these weights come with. Another pipeline (other
# pooling, no normalisation) stays on PyTorch.
_MODULES = [
    "sentence_transformers.models.Transformer",
    "sentence_transformers.models.Pooling",
    "sentence_transformers.models.Normalize",
]
EXPORT_VERSION = 1  # moves when the exported graph changes
# Texts of different lengths (so the batch is padded), long and short, some non-ASCII
_PROBE = [
    "a short one",
    "When did Caroline go to the LGBTQ support group, and who went with her that day?",
    "Ünïcödé naïve café — 東京 " * 12,
]


class OnnxUnsupported(RuntimeError):
    """The model's pipeline is not the one the ONNX graph reproduces."""


def supported(model_dir: Path) -> bool:
    """Whether the model at `model_dir` is a Transformer → mean Pooling → Normalize pipeline."""
    try:
        modules = json.loads((model_dir / "modules.json").read_text(encoding="utf-8"))
        pooling = json.loads((model_dir / "1_Pooling" / "config.json").read_text("utf-8"))
    except (OSError, ValueError):
        return False
    mean = pooling.get("pooling_mode_mean_tokens") or pooling.get("pooling_mode") == "mean"
    others = [
        k for k, v in pooling.items() if k.startswith("pooling_mode_") and v and "mean" not in k
    ]
    return [m.get("type") for m in modules] == _MODULES and bool(mean) and not others


def _fingerprint(model_dir: Path) -> str:
    """The weights and configuration the graph is exported from."""
    digest = hashlib.sha256(f"v{EXPORT_VERSION}".encode())
    for name in ("config.json", "model.safetensors", "tokenizer.json", "sentence_bert_config.json"):
        path = model_dir / name
        if path.exists():
            stat = path.stat()
            digest.update(f"{name}:{stat.st_size}".encode())
            with open(path, "rb") as handle:
                digest.update(handle.read(1 << 20))  # the head: enough to tell weights apart
    return digest.hexdigest()[:16]


def _max_length(model_dir: Path) -> int:
    config = json.loads((model_dir / "sentence_bert_config.json").read_text(encoding="utf-8"))
    return int(config.get("max_seq_length", 256))


def export(model_dir: Path, target: Path) -> None:
    """Export the pipeline's forward pass at `model_dir` to an ONNX graph at `target`,
    atomically (a process that reads it meanwhile sees the old file or none)."""
    import torch
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(model_dir), device="cpu").eval()
    bert: Any = model[0].auto_model

    class Pipeline(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.bert = bert

        def forward(self, ids: Any, mask: Any, types: Any) -> Any:
            tokens = self.bert(input_ids=ids, attention_mask=mask, token_type_ids=types)
            weights = mask.unsqueeze(-1).to(tokens.last_hidden_state.dtype)
            summed = (tokens.last_hidden_state * weights).sum(1)
            mean = summed / weights.sum(1).clamp(min=1e-9)
            return torch.nn.functional.normalize(mean, p=2, dim=1)

    # Traced on a padded batch: the attention mask must stay in the graph (a batch without
    # padding lets the model skip it)
    sample = model.tokenizer(_PROBE, padding=True, return_tensors="pt")
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp")
    axes = {0: "batch", 1: "tokens"}
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the tracer's notes on Python values it fixes
        torch.onnx.export(
            Pipeline().eval(),
            (sample["input_ids"], sample["attention_mask"], sample["token_type_ids"]),
            str(tmp),
            input_names=["ids", "mask", "types"],
            output_names=["vectors"],
            dynamic_axes={"ids": axes, "mask": axes, "types": axes, "vectors": {0: "batch"}},
            opset_version=17,
            dynamo=False,
        )
        expected = model.encode(_PROBE, normalize_embeddings=True, convert_to_numpy=True)
    got = _Session(tmp, model_dir, 1).run(_PROBE)
    if not np.allclose(got, expected, atol=1e-4):
        tmp.unlink(missing_ok=True)
        raise OnnxUnsupported("the exported graph does not reproduce the model's vectors")
    os.replace(tmp, target)


class _Session:
    """An ONNX Runtime session over an exported graph, with the model's tokenizer."""

    def __init__(self, graph: Path, model_dir: Path, threads: int) -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        # Threads sleep between runs instead of spinning on the cores the commit thread needs
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self._session = ort.InferenceSession(
            str(graph), options, providers=["CPUExecutionProvider"]
        )
        tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        tokenizer.enable_truncation(max_length=_max_length(model_dir))
        pad = tokenizer.token_to_id("[PAD]")
        tokenizer.enable_padding(pad_id=0 if pad is None else pad, pad_token="[PAD]")
        self._tokenizer = tokenizer
        self._tokenizing = threading.Lock()  # the tokenizer's padding state is shared

    def run(self, texts: list[str]) -> np.ndarray:
        with self._tokenizing:
            encoded = self._tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encoded], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encoded], dtype=np.int64)
        types = np.array([e.type_ids for e in encoded], dtype=np.int64)
        (vectors,) = self._session.run(None, {"ids": ids, "mask": mask, "types": types})
        return np.asarray(vectors, dtype=np.float32)


class OnnxEmbedder:
    """The model's forward pass on ONNX Runtime: `run` embeds one batch (thread-safe). The
    graph is exported on first use and checked against PyTorch's vectors before it is kept."""

    def __init__(self, model_dir: Path, cache_dir: Path, threads: int) -> None:
        if not supported(model_dir):
            raise OnnxUnsupported(f"{model_dir} is not a mean-pooled, normalised pipeline")
        name = f"embedder-{_fingerprint(model_dir)}.onnx"
        graph = cache_dir / name
        if not graph.exists():
            try:
                export(model_dir, graph)
            except OSError:  # a cache directory this user cannot write: this process's own
                graph = Path(tempfile.gettempdir()) / f"atommem-{os.getuid()}" / name
                if not graph.exists():
                    export(model_dir, graph)
        self._session = _Session(graph, model_dir, threads)
        self.dimension = int(self.run(["probe"]).shape[1])

    def run(self, texts: list[str]) -> np.ndarray:
        return self._session.run(texts)
