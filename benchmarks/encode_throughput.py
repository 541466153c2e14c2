"""Encoding throughput: sbert against sentence-transformers, same model, batch size and threads.

Both run in one process on the STSb test sentences, in alternating rounds, with and without smart
batching (sorting by length). "Without" means batches in input order, each padded to its own longest
text: sbert's ``sort_by_length=False``, and for sentence-transformers one ``encode`` call per batch
(it always sorts within a call). Throughput is the median over rounds, in sentences per second.

    python -m benchmarks.encode_throughput [--rounds 5] [--batch-size 32] [--threads N] [--data DIR]
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Callable

import numpy as np
import torch

import sbert
from benchmarks.lib import WORK, environment_lines, markdown_table, timings, write_result
from benchmarks.lib.sentences import stsb_test_sentences
from sbert.batching import padding_ratio
from sbert.data.paths import data_dir


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="default")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--data", default=None, help="data folder (default: $SBERT_DATA or ../shared/data)")
    parser.add_argument("--out", default="encode_throughput.md")
    parser.add_argument("--no-backends", action="store_true", help="skip the CPU backends section")
    parser.add_argument(
        "--st-onnx-python",
        default=str(WORK / "venv-st-onnx" / "bin" / "python"),
        help="Python of an environment with sentence-transformers + optimum-onnx (see st_backends.py)",
    )
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    from sentence_transformers import SentenceTransformer

    texts = stsb_test_sentences(data_dir(args.data))
    ours = sbert.load(args.model, device="cpu")
    theirs = SentenceTransformer(str(ours.path), device="cpu")
    bs = args.batch_size

    def st_unsorted() -> np.ndarray:
        chunks = [texts[i : i + bs] for i in range(0, len(texts), bs)]
        return np.concatenate([theirs.encode(chunk, batch_size=bs) for chunk in chunks])

    variants: dict[str, Callable[[], np.ndarray]] = {
        "sbert, smart batching": lambda: ours.encode(texts, batch_size=bs),
        "sentence-transformers, smart batching": lambda: theirs.encode(texts, batch_size=bs),
        "sbert, input order": lambda: ours.encode(texts, batch_size=bs, sort_by_length=False),
        "sentence-transformers, input order": st_unsorted,
    }
    outputs = {name: run() for name, run in variants.items()}  # warm-up, and the outputs to compare
    times = timings(variants, args.rounds)
    rate = {name: len(texts) / statistics.median(t) for name, t in times.items()}
    lengths = ours.tokenize(texts).lengths
    # Padding share per variant: sbert sorts by token count, sentence-transformers by character count.
    by_chars = np.argsort([-len(t) for t in texts], kind="stable")
    pad = {
        "sbert, smart batching": padding_ratio(lengths, bs),
        "sentence-transformers, smart batching": padding_ratio(np.asarray(lengths)[by_chars], bs, False),
        "sbert, input order": padding_ratio(lengths, bs, sort_by_length=False),
        "sentence-transformers, input order": padding_ratio(lengths, bs, sort_by_length=False),
    }
    rows = []
    for name in variants:
        smart = "smart" in name
        ref = rate["sentence-transformers, " + ("smart batching" if smart else "input order")]
        diff = np.abs(outputs[name] - outputs["sentence-transformers, smart batching"]).max()
        rows.append(
            [
                name,
                f"{rate[name]:,.0f}",
                f"{rate[name] / ref:.2f}x",
                f"{min(times[name]):.2f} / {statistics.median(times[name]):.2f}",
                f"{pad[name]:.1%}",
                f"{diff:.1e}",
            ]
        )
    smart_ratio = rate["sbert, smart batching"] / rate["sentence-transformers, smart batching"]
    lines = [
        "# Encoding throughput: sbert vs sentence-transformers",
        "",
        f"STSb test sentences: {len(texts):,} texts, {np.mean(lengths):.1f} tokens on average "
        f"(min {min(lengths)}, max {max(lengths)}), model `{args.model}` "
        f"({' -> '.join(ours.describe()['modules'])}), batch size {bs}, CPU, float32, "
        f"{args.rounds} alternating rounds after one warm-up round.",
        "",
        *markdown_table(
            [
                "variant",
                "sentences/s (median)",
                "vs sentence-transformers, same batching",
                "best / median s",
                "padding",
                "max abs diff vs ST smart",
            ],
            rows,
        ),
        "",
        f"**sbert / sentence-transformers with smart batching: {smart_ratio:.2f}x.** "
        f"Smart batching speeds sbert up {rate['sbert, smart batching'] / rate['sbert, input order']:.2f}x "
        "over input order here.",
        "",
        "'padding' is the share of token slots that are padding. sbert sorts by token count after "
        "tokenising everything once; sentence-transformers sorts by character length and tokenises "
        "per batch.",
        "",
    ]
    if not args.no_backends:
        from benchmarks.cpu_backends import backends_section

        lines += backends_section(args, texts, ours, theirs)
    lines += environment_lines(
        args.threads, ("sbert", "torch", "transformers", "tokenizers", "sentence-transformers", "onnxruntime")
    )
    write_result(args.out, lines)


if __name__ == "__main__":
    main()
