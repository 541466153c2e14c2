"""Readers: one-text-per-line input and STSb, on fixtures made here."""

from __future__ import annotations

import gzip
import io
import json

import pytest

from sbert.data.corpus import read_corpus
from sbert.data.examples import LabeledPair, ScoredPair, Triplet
from sbert.data.lines import read_lines
from sbert.data.nli import LABELS, nli_to_triplets, read_nli
from sbert.data.paths import data_dir
from sbert.data.sts import read_semeval_sts, read_sick, read_stsb
from sbert.data.triplets import read_triplets
from sbert.errors import InputFileError


def test_read_lines_strips_line_ends_and_bom(tmp_path):
    path = tmp_path / "t.txt"
    path.write_bytes(b"\xef\xbb\xbfone\r\ntwo\nthree")
    assert read_lines(path) == ["one", "two", "three"]
    assert read_lines(io.BytesIO(b"a\nb\n")) == ["a", "b"]


def test_read_lines_errors_name_file_and_line(tmp_path):
    with pytest.raises(InputFileError, match=r"missing.txt: no such file"):
        read_lines(tmp_path / "missing.txt")
    path = tmp_path / "bad.txt"
    path.write_bytes(b"ok\nok\nb\xc3(d\n")
    with pytest.raises(InputFileError, match=r"bad.txt: line 3 is not valid UTF-8 \(byte 1"):
        read_lines(path)


def _write_gz(path, text):
    with gzip.open(path, "wt", encoding="utf-8") as handle:
        handle.write(text)


def test_stsb_reader_handles_extra_columns_and_quotes(tmp_path):
    path = tmp_path / "sts-test.csv.gz"
    _write_gz(path, 'g\tf\t2012\t1\t2.5\tHe said "hi.\tShe said hi.\ng\tf\t2012\t2\t5.000\tA\tB\tsrc1\tsrc2\n')
    pairs = list(read_stsb(tmp_path / "sts-test.csv"))  # the .gz is found by itself
    assert [(p.sentence1, p.score) for p in pairs] == [('He said "hi.', 2.5), ("A", 5.0)]


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("g\tf\t2012\t1\t2.5\tonly one sentence", "line 1 has 6 tab-separated columns; expected 7"),
        ("g\tf\t2012\t1\tfive\tA\tB", "line 1: score 'five' is not a number"),
        ("g\tf\t2012\t1\t7.5\tA\tB", "line 1: score 7.5 is outside 0-5"),
    ],
)
def test_stsb_reader_errors(tmp_path, line, message):
    path = tmp_path / "bad.csv"
    path.write_text(line + "\n")
    with pytest.raises(InputFileError, match=message):
        list(read_stsb(path))


def test_data_dir_option_and_env(tmp_path, monkeypatch):
    assert data_dir(tmp_path) == tmp_path
    monkeypatch.setenv("SBERT_DATA", str(tmp_path))
    assert data_dir() == tmp_path
    monkeypatch.setenv("SBERT_DATA", str(tmp_path / "nope"))
    with pytest.raises(InputFileError, match=r"nope: data folder not found \(from \$SBERT_DATA\)"):
        data_dir()


# -- SICK -------------------------------------------------------------------------------------------------


def test_sick_split_file_without_header(tmp_path):
    path = tmp_path / "SICK_train.txt"
    path.write_text("1\tA dog runs\tA dog is running\t4.5\tENTAILMENT\n2\tA cat\tNo cat\t1.2\tCONTRADICTION\n")
    assert list(read_sick(path)) == [
        ScoredPair("A dog runs", "A dog is running", 4.5),
        ScoredPair("A cat", "No cat", 1.2),
    ]
    labels = [p.label for p in read_sick(path, target="entailment")]
    assert [LABELS[i] for i in labels] == ["entailment", "contradiction"]


def test_sick_full_file_with_header_crlf_and_split(tmp_path):
    header = "pair_ID\tsentence_A\tsentence_B\tentailment_label\trelatedness_score\tSemEval_set"
    rows = ["1\tA\tB\tNEUTRAL\t3.0\tTRAIN", "2\tC\tD\tENTAILMENT\t4.0\tTEST"]
    (tmp_path / "SICK.txt").write_bytes("\r\n".join([header, *rows]).encode())  # no final newline
    assert list(read_sick(tmp_path / "SICK.txt")) == [ScoredPair("A", "B", 3.0), ScoredPair("C", "D", 4.0)]
    assert list(read_sick(tmp_path / "SICK.txt", split="test")) == [ScoredPair("C", "D", 4.0)]
    assert list(read_sick(tmp_path / "SICK.txt", target="entailment", split="TEST")) == [LabeledPair("C", "D", 1)]


def test_sick_errors(tmp_path):
    path = tmp_path / "bad.txt"
    path.write_text("1\tA\tB\t0.5\tNEUTRAL\n")
    with pytest.raises(InputFileError, match=r"bad.txt: line 1: score 0.5 is outside 1-5"):
        list(read_sick(path))
    path.write_text("1\tA\tB\t3\tMAYBE\n")
    with pytest.raises(InputFileError, match=r"line 1: label 'MAYBE'"):
        list(read_sick(path, target="entailment"))


# -- SemEval STS 2012-2016 ----------------------------------------------------------------------------------
def test_semeval_sts_raw_tokenised_and_2016_forms(tmp_path):
    (tmp_path / "STS.input.MSRvid.txt").write_text("A man runs.\tA man is running.\nA b\tc d\nx\ty\n")
    (tmp_path / "STS.gs.MSRvid.txt").write_text("4.2\n\n0\n")  # the empty line: an unscored pair
    (tmp_path / "STS2016.input.headlines.txt").write_text("s1\ts2\tsrc1\tsrc2\n")
    (tmp_path / "STS2016.gs.headlines.txt").write_text("3.5\n")
    _write_gz(tmp_path / "STS.input.OnWN.txt.gz", "p\tq\n")
    _write_gz(tmp_path / "STS.gs.OnWN.txt.gz", "1.0\n")
    (tmp_path / "STS.gs.SMT.txt").write_text("2.0\n")  # gold without input (withheld): left out
    subsets = read_semeval_sts(tmp_path)
    assert subsets == {
        "MSRvid": [ScoredPair("A man runs.", "A man is running.", 4.2), ScoredPair("x", "y", 0.0)],
        "OnWN": [ScoredPair("p", "q", 1.0)],
        "headlines": [ScoredPair("s1", "s2", 3.5)],
    }


def test_semeval_sts_errors_name_the_folder_and_file(tmp_path):
    with pytest.raises(InputFileError, match=r"STS15: STS folder not found"):
        read_semeval_sts(tmp_path / "STS15")
    (tmp_path / "STS.input.a.txt").write_text("x\ty\nz\tw\n")
    (tmp_path / "STS.gs.a.txt").write_text("1\n")
    with pytest.raises(InputFileError, match=r"STS.input.a.txt: 2 lines, but STS.gs.a.txt has 1"):
        read_semeval_sts(tmp_path)


# -- NLI and triplets -------------------------------------------------------------------------------------
def test_nli_senteval_folder_split_jsonl_and_tsv(tmp_path):
    for split, labels in (("dev", "entailment\n-\n"), ("test", "contradiction\nneutral\n")):
        (tmp_path / f"s1.{split}").write_text("P1\nP2\n")
        (tmp_path / f"s2.{split}").write_text("H1\nH2\n")
        _write_gz(tmp_path / f"labels.{split}.gz", labels)
    assert [p.label for p in read_nli(tmp_path)] == [1, 0, 2]  # '-' dropped; dev then test
    assert list(read_nli(tmp_path / "dev")) == [LabeledPair("P1", "H1", 1)]
    jsonl = tmp_path / "x.jsonl"
    jsonl.write_text(
        '{"sentence1": "a", "sentence2": "b", "gold_label": "neutral"}\n'
        '{"sentence1": "c", "sentence2": "d", "gold_label": "-"}\n'
    )
    assert list(read_nli(jsonl)) == [LabeledPair("a", "b", 2)]
    tsv = tmp_path / "x.tsv"
    tsv.write_text("gold_label\tsentence1\tsentence2\tpairID\ncontradiction\ta\tb\t7\n")
    assert list(read_nli(tsv)) == [LabeledPair("a", "b", 0)]


def test_nli_errors(tmp_path):
    bad = tmp_path / "x.jsonl"
    bad.write_text('{"sentence1": "a", "sentence2": "b", "gold_label": "neutral"}\n{"premise": "a"}\n')
    with pytest.raises(InputFileError, match=r"x.jsonl: line 2: expected a JSON object with sentence1"):
        list(read_nli(bad))
    tsv = tmp_path / "x.tsv"
    tsv.write_text("label\ttext\n")
    with pytest.raises(InputFileError, match=r"x.tsv: line 1: header lacks sentence1, sentence2"):
        list(read_nli(tsv))
    tsv.write_text("gold_label\tsentence1\tsentence2\nyes\ta\tb\n")
    with pytest.raises(InputFileError, match=r"line 2: label 'yes' is not one of"):
        list(read_nli(tsv))
    (tmp_path / "s1.dev").write_text("a\nb\n")
    (tmp_path / "s2.dev").write_text("a\n")
    (tmp_path / "labels.dev").write_text("neutral\nneutral\n")
    with pytest.raises(InputFileError, match=r"split 'dev' has 2 / 1 / 2 lines"):
        list(read_nli(tmp_path))


def test_nli_to_triplets_pairs_entailments_with_contradictions_of_the_same_premise():
    pairs = [
        LabeledPair("P", "E1", 1),
        LabeledPair("P", "C1", 0),
        LabeledPair("P", "E2", 1),
        LabeledPair("P", "N", 2),
        LabeledPair("Q", "E", 1),
    ]  # Q has no contradiction: no triplet
    triplets = nli_to_triplets(pairs)
    assert triplets == [Triplet("P", "E1", "C1"), Triplet("P", "E2", "C1")]


def test_triplet_files(tmp_path):
    tsv = tmp_path / "t.tsv"
    tsv.write_text('anchor\tpositive\tnegative\na "q"\tb\tc\n')
    assert list(read_triplets(tsv)) == [Triplet('a "q"', "b", "c")]
    csv_path = tmp_path / "t.csv"
    csv_path.write_text('"a, with comma",b,c\n')
    assert list(read_triplets(csv_path)) == [Triplet("a, with comma", "b", "c")]
    tsv.write_text("a\tb\n")
    with pytest.raises(InputFileError, match=r"t.tsv: line 1: expected 3 non-empty tab-separated columns"):
        list(read_triplets(tsv))


# -- text that is not UTF-8: every reader names the file, the line and the byte -------------------------------
BAD_LINE = 250  # past the first 8 KB, so a position within the decoder's chunk would be wrong


def _sst2(folder):
    from sbert.data.transfer import read_sst2

    for split in ("dev", "test"):
        (folder / "SST" / "binary" / f"sentiment-{split}").write_text("fine\t1\n")
    return read_sst2(folder)


def _mrpc(folder):
    from sbert.data.transfer import read_mrpc

    (folder / "MRPC" / "msr_paraphrase_test.txt").write_text("Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n")
    return read_mrpc(folder)


def _semeval_gold(folder):
    (folder / "STS.input.x.txt").write_text("".join(f"a {n}\tb\n" for n in range(1, 301)))
    return read_semeval_sts(folder)


def _semeval_input(folder):
    (folder / "STS.gs.x.txt").write_text("3.0\n" * 300)
    return read_semeval_sts(folder)


def _nli_senteval(folder):
    (folder / "s1.dev").write_text("".join(f"premise {n}\n" for n in range(1, 301)))
    (folder / "labels.dev").write_text("neutral\n" * 300)
    return list(read_nli(folder))


def _run_file(path):
    from sbert.training.spec import load_run_file

    return load_run_file(path)


# (file written, its physical line n with WORD where the bad byte goes, how it is read)
NOT_UTF8_CASES = {
    "lines": ("t.txt", lambda n: f"sentence WORD {n}", read_lines),
    "corpus-jsonl": ("c.jsonl", lambda n: json.dumps({"id": n, "text": f"WORD {n}"}), read_corpus),
    "stsb": ("sts.csv", lambda n: f"g\tf\t2012\t{n}\t2.5\tWORD {n}\tother {n}", lambda p: list(read_stsb(p))),
    "stsb-gz": ("sts.csv.gz", lambda n: f"g\tf\t2012\t{n}\t2.5\tWORD {n}\to", lambda p: list(read_stsb(p))),
    "sick": ("SICK_train.txt", lambda n: f"{n}\tWORD {n}\tother\t3.0\tNEUTRAL", lambda p: list(read_sick(p))),
    "semeval-input": ("STS.input.x.txt", lambda n: f"WORD {n}\tother", lambda p: _semeval_input(p.parent)),
    "semeval-gold": ("STS.gs.x.txt", lambda n: "3.0 WORD", lambda p: _semeval_gold(p.parent)),
    "nli-senteval": ("s2.dev", lambda n: f"WORD {n}", lambda p: _nli_senteval(p.parent)),
    "nli-jsonl": (
        "nli.jsonl",
        lambda n: json.dumps({"sentence1": f"WORD {n}", "sentence2": "b", "gold_label": "neutral"}),
        lambda p: list(read_nli(p)),
    ),
    "nli-tsv": (
        "nli.tsv",
        lambda n: "gold_label\tsentence1\tsentence2" if n == 1 else f"neutral\tWORD {n}\tb",
        lambda p: list(read_nli(p)),
    ),
    "triplets-tsv": ("t.tsv", lambda n: f"WORD {n}\tp\tn", lambda p: list(read_triplets(p))),
    "triplets-csv": ("t.csv", lambda n: f'"WORD, {n}",p,n', lambda p: list(read_triplets(p))),
    "sst2": ("SST/binary/sentiment-train", lambda n: f"WORD {n}\t1", lambda p: _sst2(p.parents[2])),
    "mrpc": (
        "MRPC/msr_paraphrase_train.txt",
        lambda n: "\ufeffQuality\t#1 ID\t#2 ID\t#1 String\t#2 String" if n == 1 else f"1\t{n}\t{n}\tWORD {n}\tb",
        lambda p: _mrpc(p.parents[1]),
    ),
    "run-toml": ("run.toml", lambda n: 'out = "m"' if n == 300 else f"# WORD {n}", _run_file),
    "run-yaml": ("run.yaml", lambda n: "out: m" if n == 300 else f"# WORD {n}", _run_file),
}


@pytest.mark.parametrize("case", list(NOT_UTF8_CASES))
def test_a_file_that_is_not_utf8_is_named_with_its_line_and_byte(tmp_path, case):
    name, line, read = NOT_UTF8_CASES[case]
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [line(n).encode() for n in range(1, 301)]
    lines[BAD_LINE - 1] = lines[BAD_LINE - 1].replace(b"WORD", b"caf\xe9")  # latin-1, as an old editor writes
    data = b"\n".join(lines) + b"\n"
    path.write_bytes(gzip.compress(data) if name.endswith(".gz") else data)
    byte = lines[BAD_LINE - 1].index(b"\xe9")
    with pytest.raises(InputFileError) as caught:
        read(path)
    message = str(caught.value)
    assert message.startswith(f"{path}: line {BAD_LINE} is not valid UTF-8 (byte {byte} of the line"), message
    assert "can't decode" not in message


def test_a_damaged_gzip_file_is_named(tmp_path):
    path = tmp_path / "sts.csv.gz"
    path.write_bytes(gzip.compress(b"g\tf\t2012\t1\t2.5\tA\tB\n" * 2000)[:-40])  # truncated
    with pytest.raises(InputFileError, match=r"sts.csv.gz: damaged or truncated gzip file"):
        list(read_stsb(path))


# -- the formats table, and run specifications filled from TOML, YAML or options -------------------------
SICK_ROWS = "1\tA man eats.\tA man is eating.\t4.5\tENTAILMENT\n2\tA dog runs.\tA cat sleeps.\t1.5\tCONTRADICTION\n"


def test_each_format_reads_the_kinds_of_example_its_entry_names(tmp_path):
    from sbert.data.formats import FORMATS, formats_giving, read_examples

    (tmp_path / "SICK_train.txt").write_text(SICK_ROWS)
    assert read_examples("sick", tmp_path / "SICK_train.txt", ScoredPair)[0] == ScoredPair(
        "A man eats.", "A man is eating.", 4.5
    )
    assert [p.label for p in read_examples("sick", tmp_path / "SICK_train.txt", LabeledPair)] == [1, 0]
    assert FORMATS["nli"].kind_for([Triplet, ScoredPair, LabeledPair]) is Triplet  # NLI pairs become triplets
    assert FORMATS["sick"].kind_for([Triplet, ScoredPair, LabeledPair]) is ScoredPair
    assert formats_giving([LabeledPair]) == ["sick", "nli"]
    with pytest.raises(ValueError, match=r"format 'sick' gives ScoredPair or LabeledPair examples, not Triplet"):
        read_examples("sick", tmp_path / "SICK_train.txt", Triplet)
    (tmp_path / "empty.tsv").write_text("anchor\tpositive\tnegative\n")
    with pytest.raises(InputFileError, match=r"empty.tsv: no triplets examples found"):
        read_examples("triplets", tmp_path / "empty.tsv", Triplet)


RUN_TOML = """
out = "m"
dev = "dev.csv"
dev_format = "stsb"
[train]
batch_size = 8
lr = 1e-4
[[objectives]]
objective = "triplet"
format = "nli"
train = "nli.jsonl"
margin = 2
"""
RUN_YAML = """
out: m
dev: dev.csv
dev_format: stsb
train: {batch_size: 8, lr: 1.0e-4}
objectives:
  - {objective: triplet, format: nli, train: [nli.jsonl], margin: 2.0}
"""


def test_toml_yaml_and_options_fill_the_same_run_spec(tmp_path):
    from sbert.training.spec import load_run_file, run_spec, values_from_options

    (tmp_path / "run.toml").write_text(RUN_TOML)
    (tmp_path / "run.yaml").write_text(RUN_YAML)
    options = {"out": "m", "dev": "dev.csv", "dev_format": "stsb", "batch_size": 8, "lr": 1e-4, "epochs": None}
    options |= {"objective": "triplet", "format": "nli", "margin": 2.0, "concat": None, "model": None}
    from_options = run_spec(values_from_options(options, ["nli.jsonl"]))
    assert load_run_file(tmp_path / "run.toml") == load_run_file(tmp_path / "run.yaml") == from_options
    objective = from_options.objectives[0]
    assert objective.settings == {"margin": 2.0, "distance": "euclidean"} and objective.kind is Triplet
    assert (from_options.config.batch_size, from_options.config.epochs, from_options.model) == (8, 1, "default")
    overridden = load_run_file(tmp_path / "run.toml", values_from_options({"epochs": 3, "out": "elsewhere"}))
    assert (overridden.out, overridden.config.epochs, overridden.config.batch_size) == ("elsewhere", 3, 8)


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"out": "m", "train": {"batch_size": "16"}}, r"train.batch_size: expected an integer, got '16'"),
        ({"out": "m", "train": {"lr": "2e-5"}}, r"train.lr: expected a number, got '2e-5' \(YAML reads 2e-5 as text"),
        ({"out": "m", "train": {"learning_rate": 1}}, r"train.learning_rate: unknown key; training settings are"),
        ({"out": "m", "normalize": "yes"}, r"normalize: expected true or false or nothing, got 'yes'"),
        ({"out": 3}, r"out: expected a string, got 3"),
        ({"objectives": []}, r"out: missing"),
        ({"out": "m", "objectives": []}, r"objectives: none given"),
        ({"out": "m", "objectives": [{"objective": "triplet", "format": "nli"}]}, r"objectives\[0\].train: missing"),
        (
            {"out": "m", "objectives": [{"objective": "triplet", "format": "nli", "train": "x", "margin": "big"}]},
            r"objectives\[0\].margin: expected a number, got 'big'",
        ),
        (
            {"out": "m", "objectives": [{"objective": "triplet", "format": "nli", "train": "x", "margn": 1}]},
            r"objectives\[0\].margn: unknown key; objective keys are concat, (\w+, )*distance",
        ),
        (
            {"out": "m", "objectives": [{"objective": "classification", "format": "stsb", "train": "x"}]},
            r"objectives\[0\]: objective 'classification' needs LabeledPair examples, but format 'stsb' gives",
        ),
        (
            {
                "out": "m",
                "cross_encoder": True,
                "dev": "d",
                "dev_format": "nli",
                "objectives": [{"objective": "regression", "format": "stsb", "train": "x"}],
            },
            r"a cross-encoder's dev data must be scored pairs: dev format 'nli': expected one of stsb, sick, sts",
        ),
    ],
)
def test_a_bad_run_value_is_refused_with_its_key(values, message):
    from sbert.training.spec import run_spec

    with pytest.raises(ValueError, match=message):
        run_spec(values)
