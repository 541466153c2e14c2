"""The benchmarks' guard against a partial re-run dropping the rows of a committed table (benchmarks/lib/),
the committed records rebuilding the committed tables, and benchmarks/results/README.md naming each table's
command."""

import contextlib
import json
import re
import sys
from pathlib import Path

import pytest

from benchmarks.lib import row_names, rows_lost

BEGIN, END = "<!-- b -->", "<!-- e -->"
TABLE = ["## scifact", "", "| model | NDCG |", "|---|---|", "| default | 64.51 |", "| adapt title | 65.84 |", ""]


def test_row_names_by_section_without_headers_or_separators():
    lines = [*TABLE, "## openoffice", "", "| model | MRR |", "|:--|--:|", "| default | 61.17 |"]
    assert row_names(lines) == {"scifact|default", "scifact|adapt title", "openoffice|default"}


def test_rows_lost_names_what_a_partial_run_would_drop(tmp_path):
    doc = tmp_path / "doc.md"
    doc.write_text("intro\n" + BEGIN + "\n" + "\n".join(TABLE) + "\n" + END + "\nafter\n", encoding="utf-8")
    assert rows_lost(doc, BEGIN, END, TABLE) == []
    partial = [line for line in TABLE if "title" not in line] + ["| adapt crop | 65.40 |"]
    assert rows_lost(doc, BEGIN, END, partial) == ["scifact|adapt title"]
    assert rows_lost(doc, "<!-- none -->", END, partial) == []  # no block yet: nothing to lose


def test_keep_rows_replaces_a_row_in_place_adds_new_ones_and_drops_none(tmp_path, monkeypatch):
    from benchmarks import adapt

    monkeypatch.setattr(adapt, "RECORDS", tmp_path)
    first = [adapt.Row("default model, dense", {"ndcg@10": 64.51}), adapt.Row("adapt title, dense", {"ndcg@10": 65.8})]
    adapt.keep_rows("scifact", first, "run one")
    record = tmp_path / "adapt" / "scifact.json"
    record.write_text(record.read_text().replace('"runs"', '"note": "kept", "runs"'))  # a note survives a run
    again = [adapt.Row("adapt title, dense", {"ndcg@10": 66.0}), adapt.Row("adapt crop, dense", {"ndcg@10": 65.4})]
    rows, runs = adapt.keep_rows("scifact", again, "run two")
    assert [(r.name, r.metrics["ndcg@10"]) for r in rows] == [
        ("default model, dense", 64.51),
        ("adapt title, dense", 66.0),
        ("adapt crop, dense", 65.4),
    ]
    assert runs == ["run one", "run two"]
    assert adapt.read_record("scifact") == (rows, runs)
    assert '"note": "kept"' in record.read_text()
    assert adapt.read_record("nowhere") == ([], [])


def test_cost_only_puts_a_fresh_cost_on_one_variants_rows_and_keeps_every_score(tmp_path, monkeypatch):
    from benchmarks import adapters

    monkeypatch.setattr(adapters, "RECORDS", tmp_path)
    old, new = {"seconds": 200.0, "peak_rss_gib": 3.2}, {"seconds": 180.0, "peak_rss_gib": 2.4}
    rows = [
        {
            "name": f"adapt {v}, {search}",
            "method": f"adapt {v}",
            "search": search,
            "metrics": {"ndcg@10": score},
            "adapt": old,
        }
        for v, score in (("full", 71.0), ("lora16", 70.5))
        for search in ("dense", "auto")
    ]
    adapters.write_record(adapters.record_path("scifact"), {"runs": ["first"], "rows": rows})
    monkeypatch.setattr(adapters, "adapted", lambda name, variant, args: (tmp_path, new))
    adapters.cost_only("scifact", "lora16", None)
    kept = adapters.load_record(adapters.record_path("scifact"))
    assert [(r["name"], r["metrics"], r["adapt"]) for r in kept["rows"]] == [
        (r["name"], r["metrics"], new if "lora16" in r["name"] else old) for r in rows
    ]
    with pytest.raises(SystemExit, match="no kept rows of adapt lora8"):
        adapters.cost_only("scifact", "lora8", None)
    with pytest.raises(SystemExit, match="no kept rows of train lora16"):
        adapters.cost_only("scifact", "lora16", None, "train")


def test_cost_only_of_a_fine_tuning_reprices_its_train_rows_and_leaves_the_adapt_rows(tmp_path, monkeypatch):
    from benchmarks import adapters

    monkeypatch.setattr(adapters, "RECORDS", tmp_path)
    old, new = {"seconds": 2200.0, "peak_rss_gib": 15.8}, {"seconds": 1700.0, "peak_rss_gib": 11.0}
    rows = [
        {"name": f"{kind} lora16, dense", "method": f"{kind} lora16", "search": "dense", "metrics": {}, "adapt": old}
        for kind in ("adapt", "train")
    ]
    adapters.write_record(adapters.record_path("openoffice-dups"), {"runs": ["first"], "rows": rows})
    monkeypatch.setattr(adapters, "adapted", lambda name, variant, args: pytest.fail("adapt ran"))
    monkeypatch.setattr(adapters, "trained", lambda name, variant, args: (tmp_path, new))
    adapters.cost_only("openoffice-dups", "lora16", None, "train")
    kept = adapters.load_record(adapters.record_path("openoffice-dups"))
    assert [r["adapt"] for r in kept["rows"]] == [old, new]


def test_the_committed_records_rebuild_the_committed_adapt_tables_row_for_row():
    from benchmarks import adapt

    results, runs = {}, {}
    for name in adapt.COLLECTIONS:
        results[name], runs[name] = adapt.read_record(name)
    built = [line for line in adapt.document_lines(results, runs, "test", 100) if line.startswith("|")]
    text = adapt.DOC.read_text(encoding="utf-8")
    committed = text.split(adapt.BEGIN, 1)[1].split(adapt.END, 1)[0].splitlines()
    assert built == [line for line in committed if line.startswith("|")]


def test_the_committed_static_matryoshka_record_holds_the_committed_table():
    from benchmarks import static

    record = json.loads((static.RECORDS / "static" / "matryoshka.json").read_text(encoding="utf-8"))
    text = static.DOC.read_text(encoding="utf-8")
    committed = text.split(static.MRL_BEGIN, 1)[1].split(static.MRL_END, 1)[0].splitlines()
    table = [line for line in record["lines"] if line.startswith("|")]
    assert len(table) == 2 + len(static.MRL_ROWS) * len(static.MRL_DIMS)  # header, separator, rows
    assert table == [line for line in committed if line.startswith("|")]
    assert record["facts"]["Matryoshka-trained|128"]["stsb"] == pytest.approx(83.50, abs=0.005)


def test_transfer_choice_takes_a_method_at_several_seeds_by_its_mean():
    from benchmarks import adapt

    def row(method: str, ndcg: float, mrr: float, labels: bool = False) -> "adapt.Row":
        return adapt.Row(
            method or "default", {"ndcg@10": ndcg, "mrr@10": mrr, "recall@100": 0.0}, method, "dense", labels=labels
        )

    results = {
        # on SciFact, title's two seeds average 66 (64 and 68): below crop's 67, though one seed is above it
        "scifact": [row("", 60, 0), row("title", 64, 0), row("title (seed 43)", 68, 0), row("crop", 67, 0)],
        # on openoffice-dups title's mean (50 + 54) / 2 = 52 beats crop's 51; a labelled row never counts
        "openoffice-dups": [
            row("", 0, 40),
            row("title", 0, 50),
            row("title (seed 43)", 0, 54),
            row("crop", 0, 51),
            row("labels", 0, 99, labels=True),
        ],
    }
    assert adapt.transfer_lines(results) == [
        "- dense: chosen on openoffice-dups (mrr@10): `title`; on scifact it scores ndcg@10 66.00 (+6.00 over the "
        "default model searched the same way, mean of 2 seeds)",
        "- dense: chosen on scifact (ndcg@10): `crop`; on openoffice-dups it scores mrr@10 51.00 (+11.00 over the "
        "default model searched the same way)",
    ]


def test_where_the_collections_choose_apart_the_average_gain_over_both_ranks_the_methods():
    from benchmarks import adapt

    def row(method: str, ndcg: float, mrr: float) -> "adapt.Row":
        return adapt.Row(method or "default", {"ndcg@10": ndcg, "mrr@10": mrr, "recall@100": 0.0}, method, "dense")

    results = {
        # SciFact prefers crop (+3 against title's +1: seeds 60 and 62 average 61); ict ran here only
        "scifact": [
            *(row("", 60, 0), row("title", 60, 0), row("title (seed 43)", 62, 0)),
            *(row("crop", 63, 0), row("ict", 70, 0)),
        ],
        # openoffice-dups prefers title (+6 against crop's +1), and on average title leads: (1 + 6) / 2 = 3.5
        # against (3 + 1) / 2 = 2
        "openoffice-dups": [row("", 0, 40), row("title", 0, 46), row("crop", 0, 41)],
    }
    assert adapt.average_lines(results) == [
        "- dense, best on average over the collections: `title` +3.50 (scifact +1.00 (2 seeds), openoffice-dups "
        "+6.00 (1 seed)); `crop` +2.00 (scifact +3.00 (1 seed), openoffice-dups +1.00 (1 seed))"
    ]
    assert adapt.average_lines({"scifact": results["scifact"]}) == []  # one collection: no average to take


def test_guided_rows_are_not_chosen_as_methods_but_set_beside_their_own_unguided_seeds():
    from benchmarks import adapt

    def row(method: str, mrr: float, device: str = "cpu", dropped: int = 0) -> "adapt.Row":
        cost = {"device": device} | ({"guide_dropped": {"candidates": 1000, "dropped": dropped}} if dropped else {})
        return adapt.Row(
            method or "default", {"ndcg@10": mrr, "mrr@10": mrr, "recall@100": 0.0}, method, "dense", adapt=cost
        )

    guide = " (guide all-mpnet-base-v2)"
    rows = [row("", 40), row("title", 50, "NVIDIA H100"), row("title (seed 43)", 54), row("crop", 51)]
    rows += [row("title" + guide, 53, dropped=14), row("title (seed 43)" + guide, 54.5, dropped=12)]
    rows += [row("crop (seed 45)" + guide, 60, dropped=9)]  # no unguided seed 45: beside nothing, left out
    results = {"openoffice-dups": rows, "scifact": [row("", 40), row("title", 45), row("crop", 44)]}
    # the guided mean (53.75) is above title's (52), yet only methods are chosen: title, by its mean
    chosen = [line.split("`")[1] for line in adapt.transfer_lines(results) if "chosen on openoffice-dups" in line]
    assert chosen == ["title"]
    assert adapt.guide_lines(results) == [
        "- openoffice-dups, dense, mrr@10, `title` with the guide all-mpnet-base-v2 against without it, seed by seed: "
        "seed 42: 53.00 against 50.00 (CPU / a GPU; the guide dropped 1.40% of in-batch candidates); "
        "seed 43: 54.50 against 54.00 (CPU / CPU; the guide dropped 1.20% of in-batch candidates); "
        "mean +1.75 over 2 seed(s)"
    ]


def test_a_kl_run_at_another_temperature_is_kept_and_passed_apart():
    from argparse import Namespace

    from benchmarks import adapt

    default = Namespace(teacher="/m/all-mpnet-base-v2", seed=42, hold_out=0, steps=100, temperature=0.05)
    warm = Namespace(**{**vars(default), "temperature": 1.0})
    assert adapt.adapt_key("distill-kl", default) == "distill-kl-100-all-mpnet-base-v2"  # the first run's key
    assert adapt.adapt_key("distill-kl", warm) == "distill-kl-100-all-mpnet-base-v2-T1"
    assert adapt.adapt_key("distill-margin", warm) == "distill-margin-100-all-mpnet-base-v2"  # no temperature
    assert adapt.adapt_key("title", warm) == "title-100"
    # sbert adapt's default changed from 0.05 to 1: the unnamed rows stay 0.05's, and the runs say which
    from sbert.adapt.recipe import AdaptSettings

    assert AdaptSettings.temperature == 1.0 and adapt.KL_TEMPERATURE == 0.05
    assert adapt.run_options(Namespace(**vars(warm), methods="distill-kl")) == (
        "--methods distill-kl --steps 100 --teacher /m/all-mpnet-base-v2 --temperature 1"
    )
    assert adapt.run_options(Namespace(**{**vars(default), "teacher": adapt.TEACHER}, methods="title")) == (
        "--methods title --steps 100"
    )


def test_a_guided_adapt_run_is_kept_apart_and_guides_only_its_in_batch_methods():
    from argparse import Namespace

    from benchmarks import adapt

    plain = Namespace(teacher=adapt.TEACHER, seed=42, hold_out=0, steps=100, temperature=0.05, guide=None)
    guided = Namespace(**{**vars(plain), "guide": "/m/all-mpnet-base-v2", "guide_margin": 0.0})
    assert adapt.adapt_key("title", plain) == "title-100"  # the unguided rows keep their keys
    assert adapt.adapt_key("title", guided) == "title-100-guide-all-mpnet-base-v2"
    assert adapt.adapt_key("crop", Namespace(**{**vars(guided), "guide_margin": -0.1, "seed": 43})) == (
        "crop-100-guide-all-mpnet-base-v2-m-0.1-seed43"
    )
    assert adapt.adapt_key("tsdae", guided) == "tsdae-100"  # no in-batch negatives: no guide (adapt refuses one)
    assert adapt.adapt_key("distill-kl", guided) == "distill-kl-100-all-mpnet-base-v2"
    assert adapt.run_options(Namespace(**vars(guided), methods="title@43")) == (
        "--methods title@43 --steps 100 --guide /m/all-mpnet-base-v2"
    )


def test_an_interrupted_adapt_run_adds_its_parts_wall_time_and_a_crash_adds_nothing(tmp_path, monkeypatch):
    import subprocess
    from types import SimpleNamespace

    from benchmarks import adapt

    outcomes = iter([subprocess.CalledProcessError(143, "sbert"), 2.5, subprocess.CalledProcessError(1, "sbert")])

    def run(command):
        outcome = next(outcomes)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    clock = iter([0.0, 10.0, 100.0, 130.0, 200.0, 201.0])
    monkeypatch.setattr(adapt, "run_sbert", run)
    monkeypatch.setattr(adapt.time, "perf_counter", lambda: next(clock))
    args, record = SimpleNamespace(steps=100, device="cpu"), tmp_path / "title.json"
    partial = tmp_path / "title.json.partial"
    with pytest.raises(subprocess.CalledProcessError):  # SIGTERM: 10 s spent, kept for the resume
        adapt.timed_run(["adapt"], record, args, load=0.5)
    assert json.loads(partial.read_text()) == {"load_before": 0.5, "seconds": 10.0, "peak_rss_gib": 0.0, "parts": 1}
    cost = adapt.timed_run(["adapt", "--resume"], record, args, load=1.5)
    assert (cost["seconds"], cost["peak_rss_gib"], cost["parts"], cost["load_before"]) == (40.0, 2.5, 2, 0.5)
    assert json.loads(record.read_text()) == cost and not partial.exists()
    with pytest.raises(subprocess.CalledProcessError):  # a crash: no part kept, nothing to add to a later run
        adapt.timed_run(["adapt"], tmp_path / "crop.json", args, load=0.5)
    assert not (tmp_path / "crop.json.partial").exists()
    row = adapt.Row("adapt title, dense", dict.fromkeys(adapt.METRICS, 1.0), adapt=cost)
    assert "2 parts: interrupted, resumed" in adapt.table([row])[-1]


def test_run_sbert_gives_the_childs_own_peak_memory_and_raises_on_failure():
    import subprocess

    from benchmarks import adapt

    assert 0.01 < adapt.run_sbert(["--help"]) < 4  # GiB: python with sbert's imports, not this test process
    with pytest.raises(subprocess.CalledProcessError) as failed:
        adapt.run_sbert(["no-such-command"])
    assert failed.value.returncode == 2


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the parent-death signal is Linux's")
def test_a_benchmarks_child_ends_when_the_benchmark_is_killed(tmp_path):
    import os
    import signal
    import subprocess
    import time

    script = (
        "import subprocess, sys, time\n"
        "from benchmarks.lib.children import ends_with_parent\n"
        "child = subprocess.Popen(['sleep', '60'], preexec_fn=ends_with_parent())\n"
        "print(child.pid, flush=True)\n"
        "time.sleep(60)\n"
    )
    root = Path(__file__).resolve().parents[2]
    parent = subprocess.Popen([sys.executable, "-c", script], cwd=root, stdout=subprocess.PIPE, text=True)
    child = int(parent.stdout.readline())
    os.kill(child, 0)  # running
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            break
        with contextlib.suppress(ChildProcessError):
            os.waitpid(child, os.WNOHANG)
        time.sleep(0.05)
    else:
        os.kill(child, signal.SIGKILL)
        pytest.fail("the child outlived its parent")


def _batch_row(variant: str, seed: int, dense: float, margin: float | None = None, device: str = "cpu") -> dict:
    row = {"variant": variant, "seed": seed, "device": device, "steps": 101, "train_seconds": 10.0, "moved": 98}
    row |= {"load": [1.0, 1.0], "dense": {"mrr@10": dense, "ndcg@10": 0.0}, "default": {"mrr@10": 0, "ndcg@10": 0}}
    return row if margin is None else row | {"guide_margin": margin, "margin_strategy": "absolute"}


def test_the_dev_sweep_chooses_the_margin_of_the_best_mean_only_once_whole_on_that_device():
    from benchmarks import batches

    assert batches.DEV_MARGINS == (0, -0.05, -0.1) and batches.DEV_SEEDS == (42, 43, 44)
    dense = {0: (67.0, 66.0, 68.0), -0.05: (67.5, 66.5, 67.5), -0.1: (66.0, 66.0, 66.0)}  # means 67, 67.17, 66
    whole = [_batch_row("sampler", s, 67.6 + s / 100) for s in (42, 43, 44)]  # mean 68.03
    whole += [_batch_row("guide", s, dense[m][i], m) for m in dense for i, s in enumerate((42, 43, 44))]
    partial = [_batch_row("sampler", 42, 66.0, device="H100"), _batch_row("guide", 42, 70.0, 0, "H100")]
    partial += [_batch_row("guide", 43, 70.0, 0.1, "H100")]  # a margin outside the sweep does not count
    partial += [_batch_row("guide", 43, 70.0, 0, "H100") | {"margin_strategy": "relative"}]  # nor a relative one
    lines = batches.choice_lines(whole + partial)
    assert lines[1] == (
        "Chosen on these dev queries (cpu): margin -0.05, mean MRR@10 dense over seeds 42, 43, 44 by margin "
        "0: 67.00, -0.05: 67.17, -0.1: 66.00; the sampler 68.03. The test split runs it with `--guide-margins -0.05`."
    )
    assert lines[2].startswith("Not chosen yet on H100: 2 of the sweep's 12 rows kept")
    assert batches.choice_lines(whole[:-1])[1].startswith("Not chosen yet on cpu: 11 of the sweep's 12 rows kept")


def test_batch_rows_name_every_guides_margin_and_list_margins_from_gistembeds_down(tmp_path):
    from benchmarks import batches

    for name, row in {
        "guide-absolute-0.1-seed42-cpu": _batch_row("guide", 42, 1.0, -0.1),
        "guide": _batch_row("guide", 42, 1.0, 0.0),
        "sampler": _batch_row("sampler", 42, 1.0),
        "guide-absolute-0.05-seed42-cpu": _batch_row("guide", 42, 1.0, -0.05),
        "guide-relative0.1-seed42-cpu": _batch_row("guide", 42, 1.0, 0.1) | {"margin_strategy": "relative"},
    }.items():
        (tmp_path / f"{name}.json").write_text(json.dumps({k: v for k, v in row.items() if k != "variant"}))
    labels = [batches.label(r) for r in batches.kept_rows(tmp_path)]
    assert labels == [
        "sampler",
        "guide, margin 0.1 (relative)",
        "guide, margin 0",
        "guide, margin -0.05",
        "guide, margin -0.1",
    ]


def test_a_cpu_row_names_its_processor_and_a_sweep_over_two_says_how_many_rows_each_ran():
    from benchmarks import batches

    intel, amd = {"cpu": "Intel(R) Xeon(R) Processor"}, {"cpu": "AMD EPYC 7763 64-Core Processor"}
    assert batches.ran_on(_batch_row("sampler", 42, 1.0) | intel) == "cpu (Intel Xeon)"
    assert batches.ran_on(_batch_row("sampler", 42, 1.0) | amd) == "cpu (AMD EPYC 7763 64-Core)"
    assert batches.ran_on(_batch_row("sampler", 42, 1.0) | {"cpu": "Intel(R) Core(TM) i7-8700 CPU @ 3.20GHz"}) == (
        "cpu (Intel Core i7-8700)"
    )
    assert batches.ran_on(_batch_row("sampler", 42, 1.0)) == "cpu"  # a record without it
    assert batches.ran_on(_batch_row("sampler", 42, 1.0, device="H100") | intel) == "H100"  # a GPU row: the GPU
    rows = [_batch_row("sampler", s, 67.0) | amd for s in (42, 43, 44)]
    rows += [_batch_row("guide", s, 67.0, m) | amd for m in (0, -0.05, -0.1) for s in (42, 43)]
    assert "9 of the sweep's 12 rows kept (the sampler" in batches.choice_lines(rows)[1]  # one processor: not named
    assert (
        "10 of the sweep's 12 rows kept, 9 on AMD EPYC 7763 64-Core, 1 on Intel Xeon (the sampler"
        in (batches.choice_lines([*rows, _batch_row("guide", 44, 67.0, 0) | intel])[1])
    )
    rows += [_batch_row("guide", 44, 67.0 - m, m) | intel for m in (0, -0.05, -0.1)]
    assert batches.choice_lines(rows)[1].endswith(
        "`--guide-margins -0.1`. Its rows: 9 on AMD EPYC 7763 64-Core, 3 on Intel Xeon."
    )
    assert batches.choice_lines([r | amd for r in rows])[1].endswith("`--guide-margins -0.1`.")  # one processor


@pytest.mark.parametrize("dev", [False, True], ids=["test split", "dev split"])
def test_the_committed_batch_records_rebuild_the_committed_batch_tables_row_for_row(dev):
    from benchmarks import batches

    part, begin, end = (
        ("batches-dev", batches.DEV_BEGIN, batches.DEV_END) if dev else ("batches", batches.BEGIN, batches.END)
    )
    built = batches.table(batches.kept_rows(batches.RECORDS / part))
    text = batches.DOC.read_text(encoding="utf-8")
    committed = text.split(begin, 1)[1].split(end, 1)[0].splitlines()
    assert len(built) > 2 and built == [line for line in committed if line.startswith("|")]


def test_a_batches_row_stopped_by_a_signal_says_where_it_goes_on_and_exits_143(monkeypatch, capsys, tmp_path):
    import signal
    import types

    import sbert.training
    import sbert.training.recipe
    from benchmarks import batches
    from sbert.training import TrainingInterrupted

    class Stopped:  # a Trainer whose run the first SIGTERM stopped after step 7 of 100
        def __init__(self, encoder, objectives, config, out):
            self.run_dir = Path(out)

        def train(self, resume):
            raise TrainingInterrupted(signal.SIGTERM, 7, 100, self.run_dir / "checkpoint.pt")

    monkeypatch.setattr(sbert.training, "Trainer", Stopped)
    monkeypatch.setattr(sbert.training, "Objective", lambda *parts: parts)
    monkeypatch.setattr(sbert.training.recipe, "build_encoder", lambda *a, **k: None)
    args = types.SimpleNamespace(train_steps=100, seed=43, device="cpu")
    with pytest.raises(SystemExit) as stop:
        batches.train_variant("sampler", [], args, tmp_path / "row")
    assert stop.value.code == 143
    said = capsys.readouterr().err
    assert said.strip() == (
        f"sampler: stopped by SIGTERM after step 7 of 100; checkpoint {tmp_path / 'row' / 'checkpoint.pt'}; "
        "the same command goes on from there"
    )


BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
RESULTS = BENCHMARKS / "results"
_COMMAND = re.compile(r"`(?:flock \S+ )?python -m benchmarks\.([a-z0-9_]+)")


def _index_rows() -> list[tuple[str, str]]:
    """(linked file, command cell) of each table row of benchmarks/results/README.md."""
    rows = []
    for line in (RESULTS / "README.md").read_text(encoding="utf-8").splitlines():
        if line.startswith("| ["):
            cells = [cell.strip() for cell in line.strip("|").split(" | ")]
            rows.append((re.search(r"\]\(([^)#]+)", cells[0]).group(1), cells[1]))
    return rows


def test_the_results_index_lists_every_table_with_the_command_that_writes_it():
    rows = _index_rows()
    assert {p.name for p in RESULTS.glob("*.md")} - {"README.md"} <= {link for link, _ in rows}
    for link, command in rows:
        assert (RESULTS / link).is_file(), link
        if command != "as stated per note":
            scripts = _COMMAND.findall(command)
            assert scripts and all((BENCHMARKS / f"{s}.py").is_file() for s in scripts), (link, command)


def test_every_written_table_states_its_command_and_every_script_writes_or_serves_one():
    """A table a script writes whole names the script (``- command: `python -m benchmarks.NAME ...```); a
    script is the command of a listed table, or a part another script imports or runs."""
    for path in RESULTS.glob("*.md"):
        if path.name != "README.md" and not path.name.endswith("-evidence.md"):
            found = _COMMAND.findall(path.read_text(encoding="utf-8"))
            assert found and all((BENCHMARKS / f"{s}.py").is_file() for s in found), path.name
    listed = {s for _, command in _index_rows() for s in _COMMAND.findall(command)}
    texts = {p.stem: p.read_text(encoding="utf-8") for p in BENCHMARKS.glob("*.py") if p.stem != "__init__"}
    used = {s for s in texts for other, text in texts.items() if other != s and f"benchmarks.{s}" in text}
    assert set(texts) - listed - used == set(), "scripts whose table is not in benchmarks/results/README.md"


def test_adapter_variants_give_their_options_and_a_bad_one_is_refused_naming_it():
    from benchmarks import adapters

    assert adapters.variant_options("full") == []
    assert adapters.variant_options("lora8") == ["--lora", "--lora-rank", "8"]
    assert adapters.variant_options("lora16@1e-4") == ["--lora", "--lora-rank", "16", "--lr", "1e-4"]
    assert adapters.variant_options("full@5e-5") == ["--lr", "5e-5"]
    with pytest.raises(SystemExit, match="'lora' is not full or loraR"):
        adapters.variant_options("lora")


def test_adapter_rows_are_set_against_the_whole_model_searched_the_same_way_and_the_rank_chosen_by_auto():
    from benchmarks import adapters

    def row(method: str, search: str, mrr: float, cost: dict | None = None) -> dict:
        name = f"{method or 'default model'}, {search}"
        return {"name": name, "method": method, "search": search, "choice": search, "adapt": cost or {},
                "metrics": {"ndcg@10": mrr + 1, "mrr@10": mrr}}  # fmt: skip

    rows = [
        row("", "dense", 61.0),
        row("adapt full", "dense", 62.0, {"seconds": 300.4, "peak_rss_gib": 3.12, "folder_mb": 90.9}),
        row("adapt full", "auto", 64.0),
        row("adapt lora8", "dense", 61.5, {"seconds": 250, "peak_rss_gib": 2.0, "folder_mb": 1.2}),
        row("adapt lora8", "auto", 64.25),
        row("adapt lora16", "auto", 63.5),
        row("train full", "dense", 66.0),
        row("train lora8", "dense", 65.0),
    ]
    table = {line.split(" | ")[0][2:]: line.split(" | ") for line in adapters.quality_table("openoffice-dups", rows)}
    assert table["adapt lora8, dense"][4:8] == ["-0.50", "250", "2.0", "1.2"]
    assert table["adapt lora8, auto"][4] == "+0.25"
    assert table["adapt lora16, auto"][4] == "-0.50"
    assert table["train lora8, dense"][4] == "-1.00"  # against the model trained whole, not adapted whole
    assert table["adapt full, dense"][4:8] == ["+0.00", "300", "3.1", "90.9"]
    assert table["default model, dense"][4] == "-"
    assert adapters.chosen_variant(rows, "openoffice-dups") == "lora8"
    assert adapters.chosen_variant(rows[:3], "openoffice-dups") is None


def test_serving_rows_are_shares_of_the_plain_server_in_the_same_run():
    from benchmarks import adapters

    def setup(rate: float, peak: str) -> dict:
        return {"sentences_per_s": rate, "p50_ms": 40.2, "p99_ms": 90, "errors": 0, "requests": 1000,
                "peak": peak, "load": 1.5}  # fmt: skip

    kept = {"plain model": setup(400, "1,000 MB"), "4 adapters": setup(340, "1,032 MB")}
    lines = adapters.serving_table(kept)
    assert "| 4 adapters | 1,000 | 0 | 340 (85%) | 40 / 90 | 1,032 MB (+32 MB) | 1.5 |" in lines
    assert adapters.serving_table({}) == []
