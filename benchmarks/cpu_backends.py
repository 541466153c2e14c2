"""The CPU backends section of encode_throughput.py: sbert's torch / bf16 / compile / ONNX / int8
against sentence-transformers' torch and its own ONNX backends, on the same texts and threads."""

from __future__ import annotations

import json
import subprocess
import tempfile
from pathlib import Path

import numpy as np
import torch

import sbert
from benchmarks.lib import ROOT, latency_ms, markdown_table, throughput
from benchmarks.lib.sentences import stsb_spearman


def st_onnx(python: str, model: Path, texts: list[str], args) -> tuple[dict, str]:
    if not Path(python).is_file():
        return {}, f"not run: {python} missing (create it as st_backends.py says)"
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as handle:
        json.dump(texts, handle)
    command = [python, "-m", "benchmarks.st_backends", str(model), handle.name, "--rounds", str(args.rounds)]
    command += ["--batch-size", str(args.batch_size), "--threads", str(args.threads)]
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT)
    if done.returncode:
        return {}, "failed: " + done.stderr.strip().splitlines()[-1]
    return json.loads(done.stdout.strip().splitlines()[-1]), ""


def backends_section(args, texts: list[str], ours, theirs) -> list[str]:
    from sbert.data.paths import data_dir
    from sbert.data.sts import read_stsb

    gold = [p.score for p in read_stsb(data_dir(args.data) / "stsbenchmark" / "sts-test.csv")]
    bs = args.batch_size
    models = {
        "sbert torch fp32": ours,
        "sbert torch bf16 (autocast)": sbert.load(ours.path, device="cpu", precision="bf16"),
        "sbert onnx fp32": sbert.load(ours.path, device="cpu", backend="onnx"),
        "sbert onnx int8": sbert.load(ours.path, device="cpu", backend="onnx", precision="int8"),
    }
    notes = []
    try:
        compiled = sbert.load(ours.path, device="cpu")
        compiled.transformer.model = torch.compile(compiled.transformer.model, dynamic=True)
        compiled.encode(texts[:64], batch_size=bs)  # compile now, not inside the timing
        models["sbert torch.compile (dynamic)"] = compiled
    except Exception as err:
        notes.append(f"torch.compile failed here: {type(err).__name__}: {str(err).splitlines()[0][:200]}")
    variants = {name: (lambda m=m: m.encode(texts, batch_size=bs)) for name, m in models.items()}
    variants["sentence-transformers torch"] = lambda: theirs.encode(texts, batch_size=bs)
    outputs = {name: run() for name, run in variants.items()}
    rates = throughput(variants, len(texts), args.rounds)
    lat_texts = texts[:200]
    lat = {name: latency_ms(lambda t, m=m: m.encode([t]), lat_texts) for name, m in models.items()}
    lat["sentence-transformers torch"] = latency_ms(lambda t: theirs.encode([t]), lat_texts)
    st_extra, why = st_onnx(args.st_onnx_python, ours.path, texts, args)
    for name, key in (
        ("sentence-transformers onnx", "st-onnx"),
        ("sentence-transformers onnx int8 (avx512_vnni)", "st-onnx-int8"),
    ):
        if key in st_extra:
            rates[name] = st_extra[key]["rate"]
            lat[name] = (st_extra[key]["p50"], st_extra[key]["p99"])
            outputs[name] = np.asarray(st_extra[key]["embeddings"], dtype=np.float32)
    if why:
        notes.append(f"sentence-transformers' ONNX backends: {why}")
    reference = outputs["sbert torch fp32"]
    st_rate = rates["sentence-transformers torch"]  # measured in this section's rounds
    rows = [
        [
            name,
            f"{rates[name]:,.0f}",
            f"{rates[name] / st_rate:.2f}x",
            f"{lat[name][0]:.1f} / {lat[name][1]:.1f}",
            f"{np.abs(outputs[name] - reference).max():.1e}",
            f"{stsb_spearman(outputs[name], gold):.2f}",
        ]
        for name in rates
    ]
    best_ours = max((n for n in rates if n.startswith("sbert")), key=rates.get)
    best_st = max((n for n in rates if n.startswith("sentence")), key=rates.get)
    return [
        "## CPU backends",
        "",
        f"Same {len(texts):,} sentences, batch {bs}, {args.threads} threads, smart batching everywhere; "
        f"median of {args.rounds} alternating rounds. Latency: one sentence per call, "
        f"{len(lat_texts)} calls. 'STSb' is Spearman x 100 of cosine on STSb test from these very embeddings.",
        "",
        *markdown_table(
            ["variant", "sentences/s", "vs ST torch", "batch-1 p50 / p99 ms", "max abs diff vs torch", "STSb"], rows
        ),
        "",
        f"**Best sbert: {best_ours}, {rates[best_ours] / st_rate:.2f}x sentence-transformers' torch and "
        f"{rates[best_ours] / rates[best_st]:.2f}x sentence-transformers' best ({best_st}).**",
        "",
        *[f"- {note}" for note in notes],
        "- sentence-transformers' ONNX rows run in their own environment (optimum-onnx needs transformers 4.x; "
        f"there: {', '.join(f'{k} {v}' for k, v in st_extra.get('versions', {}).items())}): see st_backends.py."
        if st_extra
        else "",
        "",
    ]
