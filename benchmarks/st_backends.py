"""sentence-transformers' own ONNX backends, timed in their own virtual environment.

sentence-transformers' backend="onnx" needs optimum-onnx, which pins transformers 4.x; sbert's
environment has transformers 5, so encode_throughput.py runs this script with the Python of
benchmarks/.work/venv-st-onnx (see --st-onnx-python) and reads its JSON from stdout. It imports nothing
of sbert's or of benchmarks.lib: that environment has neither.

    benchmarks/.work/venv-st-onnx/bin/python -m benchmarks.st_backends MODEL_FOLDER TEXTS.json --rounds 5
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("model")
    parser.add_argument("texts")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--latency-texts", type=int, default=200)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    import torch

    torch.set_num_threads(args.threads)
    import sentence_transformers
    from sentence_transformers import SentenceTransformer, export_dynamic_quantized_onnx_model

    texts = json.loads(Path(args.texts).read_text())
    folder = Path(tempfile.mkdtemp()) / "model"
    shutil.copytree(args.model, folder, ignore=shutil.ignore_patterns("onnx"))
    onnx = SentenceTransformer(str(folder), device="cpu", backend="onnx")  # exports with optimum, locally
    onnx.save_pretrained(str(folder))  # keeps onnx/model.onnx for the quantiser
    export_dynamic_quantized_onnx_model(onnx, "avx512_vnni", str(folder))
    quantized = SentenceTransformer(
        str(folder), device="cpu", backend="onnx", model_kwargs={"file_name": "onnx/model_qint8_avx512_vnni.onnx"}
    )
    import optimum.version
    import transformers

    results = {
        "versions": {
            "sentence-transformers": sentence_transformers.__version__,
            "transformers": transformers.__version__,
            "optimum": optimum.version.__version__,
        }
    }
    for name, model in (("st-onnx", onnx), ("st-onnx-int8", quantized)):
        emb = model.encode(texts, batch_size=args.batch_size)  # warm-up
        times = []
        for _ in range(args.rounds):
            began = time.perf_counter()
            model.encode(texts, batch_size=args.batch_size)
            times.append(time.perf_counter() - began)
        lat = []
        for text in texts[: args.latency_texts]:
            began = time.perf_counter()
            model.encode([text])
            lat.append((time.perf_counter() - began) * 1e3)
        results[name] = {
            "rate": len(texts) / statistics.median(times),
            "p50": float(np.percentile(lat, 50)),
            "p99": float(np.percentile(lat, 99)),
            "embeddings": np.asarray(emb).tolist(),
        }
        print(f"{name}: {results[name]['rate']:.0f}/s", file=sys.stderr)
    print(json.dumps(results))


if __name__ == "__main__":
    main()
