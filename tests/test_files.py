"""Files in and out: memory budgets, special files, links, errors naming the file, estimate archives checked before inflating."""

from __future__ import annotations

import gzip
import io
import json
import math
import os
import re
import stat
import threading
import zipfile
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

import specinit
from specinit.corpus import (
    Corpus,
    from_matrix,
    from_text_files,
    load_ldac,
    load_uci_bow,
    read_ldac_blocks,
    read_npz_shards,
    read_uci_blocks,
    read_vocabulary,
    save_ldac,
    save_npz_shards,
    save_uci_bow,
    write_vocabulary,
)
from specinit.estimate import MAX_META_DEPTH, ModelFacts, SpectralEstimate
from specinit.models import lda, single_topic
from tests.conftest import random_instance

KIB = 1024



@pytest.fixture(autouse=True)
def four_gib_budget():
    """The default budget is half of this machine's RAM; the tests fix it at 4 GiB."""
    specinit.set_memory_limit(4 * KIB**3)
    yield
    specinit.set_memory_limit(None)

def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def estimate(seed: int = 4):
    beta, weights = random_instance(3, 20, seed)
    return single_topic.spectral_from_moments(single_topic.population_moments(beta, weights), 3)


def rewrite_archive(source: Path, target: Path, replace: dict) -> None:
    """Copy an estimate archive member by member, replacing the raw bytes of the members named in ``replace``."""
    with zipfile.ZipFile(source) as old, zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as new:
        for info in old.infolist():
            new.writestr(info.filename, replace.get(info.filename, old.read(info.filename)))


def npy_bytes(array) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array)
    return buffer.getvalue()


# ----------------------------------------------------------------------------- memory budgets


def test_a_gzip_bomb_of_one_long_line_is_refused_at_the_line_bound(tmp_path):
    bomb = tmp_path / "docword.txt.gz"
    with gzip.open(bomb, "wb") as handle:  # 4 MB of digits, one line, compressed to a few KiB
        handle.write(b"7" * (4 * KIB * KIB))
    assert bomb.stat().st_size < 64 * KIB
    with pytest.raises(ValueError, match=re.escape(str(bomb)) + r", line 1: longer than 16384 bytes.*"
                                         r"max_bytes=262144.*pass a larger max_bytes to load_uci_bow"):
        load_uci_bow(bomb, max_bytes=256 * KIB)


def test_decompressed_text_beyond_the_budget_is_refused_even_in_short_lines(tmp_path):
    path = tmp_path / "docword.txt.gz"
    with gzip.open(path, "wt") as handle:  # one entry, then 200 KB of blank lines (a 1 KB file)
        handle.write("1\n1\n1\n1 1 1\n" + " \n" * 100_000)
    assert load_uci_bow(path).counts.nnz == 1
    with pytest.raises(ValueError, match=r"docword\.txt\.gz, line 32767: more than max_bytes=65536 bytes of text"):
        load_uci_bow(path, max_bytes=64 * KIB)
    vocab = tmp_path / "vocab.txt.gz"
    with gzip.open(vocab, "wt") as handle:
        handle.writelines(f"w{i}\n" for i in range(2_000))
    assert len(read_vocabulary(vocab)) == 2_000
    with pytest.raises(ValueError, match=r"vocab\.txt\.gz: reading it needs about 64\.1 KiB \(1025 words\)"):
        read_vocabulary(vocab, max_bytes=64 * KIB)


def test_a_uci_header_is_checked_against_the_budget_before_allocation(tmp_path):
    path = write(tmp_path / "d.txt", "1000000\n2000000\n100000000\n1 1 1\n")
    needs = r"d\.txt: reading it needs about 6\.09 GiB \(D=1000000, W=2000000 and NNZ=100000000 in its header\)"
    with pytest.raises(ValueError, match=needs + r".*max_bytes=1048576 \(1 MiB\)"):
        load_uci_bow(path, max_bytes=KIB * KIB)
    # 1e8 entries and 2e6 words at 64 bytes, 1e6 documents at 16: above the default budget (4 GiB here)
    with pytest.raises(ValueError, match=needs + r".*max_bytes=4294967296 \(4 GiB\).*specinit.set_memory_limit"):
        load_uci_bow(path)
    small = write(tmp_path / "small.txt", "2\n3\n2\n1 1 2\n2 3 1\n")
    assert load_uci_bow(small, max_bytes=KIB).counts.nnz == 2
    with pytest.raises(ValueError, match=r"small\.txt: reading it needs about 352 bytes .*max_bytes=300"):
        load_uci_bow(small, max_bytes=300)


def test_an_ldac_term_id_of_1e8_is_refused_without_a_vocabulary(tmp_path):
    path = write(tmp_path / "c.ldac", "1 100000000:1\n2 0:1 5:2\n")  # the 51-byte file of the issue, in spirit
    with pytest.raises(ValueError, match=r"c\.ldac: reading it needs about 5\.96 GiB \(1 entries up to line 1 and a "
                                         r"vocabulary of 100000001 words .*pass a larger max_bytes to load_ldac"):
        load_ldac(path)
    vocab = write(tmp_path / "v.txt", "".join(f"w{i}\n" for i in range(6)))
    with pytest.raises(ValueError, match=r"c\.ldac, line 1: term id 100000000 is outside the vocabulary of 6 words"):
        load_ldac(path, vocab_path=vocab)
    corpus = load_ldac(path, max_bytes=8 * 2**30)  # a budget that allows it: V = 1e8 + 1, nothing dense built
    assert corpus.counts.shape == (2, 100_000_001) and corpus.counts.nnz == 3


def test_block_readers_check_each_block_against_the_budget(tmp_path):
    counts = from_matrix(np.arange(1, 41).reshape(10, 4) % 3)
    save_uci_bow(counts, tmp_path / "d.txt")
    save_ldac(counts, tmp_path / "c.ldac")
    assert read_uci_blocks(tmp_path / "d.txt", rows_per_block=5, max_bytes=2 * KIB).shape == (10, 4)
    with pytest.raises(ValueError, match=r"d\.txt: reading it needs about .*a block of 5 documents"):
        read_uci_blocks(tmp_path / "d.txt", rows_per_block=5, max_bytes=900)
    with pytest.raises(ValueError, match=r"c\.ldac: reading it needs about .*over 100000000 words"):
        read_ldac_blocks(tmp_path / "c.ldac", vocab_size=10**8)
    save_npz_shards(counts.counts, tmp_path / "shards", rows_per_shard=5)
    assert read_npz_shards(tmp_path / "shards", max_bytes=4 * KIB).shape == (10, 4)
    with pytest.raises(ValueError, match=r"shard_00000\.npz: reading it needs about .*the arrays its members declare"):
        read_npz_shards(tmp_path / "shards", max_bytes=100)


def test_counts_beyond_2_53_name_the_line(tmp_path):
    big = 2**53 + 2
    write(tmp_path / "d.txt", f"1\n2\n2\n1 1 1\n1 2 {big}\n")
    write(tmp_path / "c.ldac", f"1 0:1\n1 1:{big}\n")
    with pytest.raises(ValueError, match=r"d\.txt, line 5: count must be at most 2\*\*53"):
        load_uci_bow(tmp_path / "d.txt")
    with pytest.raises(ValueError, match=r"c\.ldac, line 2: counts must be at most 2\*\*53"):
        load_ldac(tmp_path / "c.ldac")
    with pytest.raises(ValueError, match=r"d\.txt, line 5: expected 'docID wordID count'.*at most 2\*\*53"):
        read_uci_blocks(tmp_path / "d.txt")
    with pytest.raises(ValueError, match=r"c\.ldac, line 2: expected 'M term:count \.\.\.'.*at most 2\*\*53"):
        read_ldac_blocks(tmp_path / "c.ldac", vocab_size=2)


# ----------------------------------------------------------------------------- errors name the file


def test_damaged_gzip_and_undecodable_text_name_the_file_and_line(tmp_path):
    good = tmp_path / "v.txt.gz"
    with gzip.open(good, "wt") as handle:
        handle.writelines(f"w{i}\n" for i in range(5000))
    data = good.read_bytes()
    truncated = tmp_path / "truncated.txt.gz"
    truncated.write_bytes(data[: len(data) // 2])
    with pytest.raises(ValueError, match=r"truncated\.txt\.gz, line \d+: not a readable gzip file.*EOFError"):
        read_vocabulary(truncated)
    corrupt = tmp_path / "corrupt.txt.gz"
    corrupt.write_bytes(data[:-8] + bytes(8))  # wrong CRC and length
    with pytest.raises(ValueError, match=r"corrupt\.txt\.gz, line \d+: not a readable gzip file.*BadGzipFile"):
        read_vocabulary(corrupt)
    garbage = tmp_path / "garbage.ldac.gz"
    garbage.write_bytes(data[:10] + bytes(range(256)) * 4)
    with pytest.raises(ValueError, match=r"garbage\.ldac\.gz, line 1: not a readable gzip file.*error"):
        load_ldac(garbage)
    latin = tmp_path / "latin.ldac"
    latin.write_bytes(b"1 0:1\n1 1:1 \xe9\n")
    with pytest.raises(ValueError, match=r"latin\.ldac, line 2: cannot be decoded as utf-8"):
        load_ldac(latin)
    latin_uci = tmp_path / "latin.txt"
    latin_uci.write_bytes(b"1\n2\n2\n1 1 1\n1 2 \xe9\n")
    with pytest.raises(ValueError, match=r"latin\.txt, line 5: cannot be decoded as utf-8"):
        load_uci_bow(latin_uci)


@pytest.mark.parametrize("reader", [
    lambda p: load_uci_bow(p), lambda p: load_ldac(p), lambda p: read_vocabulary(p),
    lambda p: read_uci_blocks(p), lambda p: read_ldac_blocks(p, vocab_size=3), lambda p: SpectralEstimate.load(p),
])
def test_a_directory_given_as_a_file_is_refused_naming_it(tmp_path, reader):
    with pytest.raises(ValueError, match=r"must be a regular file .*got the directory " + re.escape(repr(str(tmp_path)))):
        reader(tmp_path)


# ----------------------------------------------------------------------------- special files never block or get replaced


def _returns_promptly(call, fifo: Path):
    """The exception ``call`` raises, failing the test if it blocks (the FIFO is then opened to release it)."""
    outcome = {}

    def run():
        try:
            call()
        except BaseException as exc:  # the outcome is asserted by the caller
            outcome["error"] = exc
        else:
            outcome["error"] = None

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(timeout=10)
    if thread.is_alive():
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        thread.join(timeout=5)
        pytest.fail(f"the call blocked on the FIFO {fifo}")
    return outcome["error"]


@pytest.mark.parametrize("reader", [
    lambda p: load_uci_bow(p), lambda p: load_ldac(p), lambda p: read_vocabulary(p),
    lambda p: read_uci_blocks(p), lambda p: read_ldac_blocks(p, vocab_size=3), lambda p: SpectralEstimate.load(p),
    lambda p: from_text_files(p.parent, pattern="*.npz"), lambda p: read_npz_shards(p.parent),
])
def test_a_fifo_is_refused_before_it_is_opened(tmp_path, reader):
    fifo = tmp_path / "data.npz"
    os.mkfifo(fifo)
    error = _returns_promptly(lambda: reader(fifo), fifo)
    assert isinstance(error, ValueError), error
    assert "FIFO (named pipe)" in str(error) and str(fifo) in str(error)


@pytest.mark.parametrize("writer", [
    lambda c, p: save_uci_bow(c, p), lambda c, p: save_ldac(c, p), lambda c, p: write_vocabulary(c, p),
    lambda c, p: estimate().save(p),
])
def test_a_save_onto_a_fifo_or_a_link_to_dev_null_is_refused_and_the_node_kept(tmp_path, writer):
    corpus = from_matrix([[1, 2]], vocabulary=["a", "b"])
    fifo = tmp_path / "out.fifo"
    os.mkfifo(fifo)
    error = _returns_promptly(lambda: writer(corpus, fifo), fifo)
    assert isinstance(error, ValueError) and "got the FIFO (named pipe)" in str(error), error
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    link = tmp_path / "null.npz"
    link.symlink_to("/dev/null")
    with pytest.raises(ValueError, match=r"must be a regular file or a new name .*got the character device"):
        writer(corpus, link)
    assert os.readlink(link) == "/dev/null" and stat.S_ISCHR(os.stat("/dev/null").st_mode)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["null.npz", "out.fifo"]  # no temporary file left


def test_save_through_a_link_to_a_regular_file_replaces_the_file_and_keeps_the_link(tmp_path):
    first, second = estimate(4), estimate(5)
    real = first.save(tmp_path / "real.npz")
    link = tmp_path / "link.npz"
    link.symlink_to(real.name)
    assert second.save(link) == link
    assert link.is_symlink() and os.readlink(link) == "real.npz"
    np.testing.assert_array_equal(SpectralEstimate.load(real).params["beta"], second.params["beta"])


def test_npz_shards_refuse_a_special_target(tmp_path):
    os.makedirs(tmp_path / "shards")
    (tmp_path / "shards" / "shard_00000.npz").symlink_to("/dev/null")
    with pytest.raises(ValueError, match=r"'folder' argument of save_npz_shards must be a regular file or a new name"):
        save_npz_shards(sp.identity(3, format="csr"), tmp_path / "shards")


# ----------------------------------------------------------------------------- links in from_text_files


def test_from_text_files_refuses_links_leading_outside_the_directory(tmp_path):
    inside, outside = tmp_path / "docs", tmp_path / "secret"
    inside.mkdir()
    outside.mkdir()
    write(inside / "a.txt", "apple banana apple")
    write(outside / "s.txt", "password token")
    (inside / "b.txt").symlink_to(outside / "s.txt")
    with pytest.raises(ValueError, match=r"b\.txt: a symbolic link to .*secret/s\.txt'?, outside the directory "
                                         r".*follow_symlinks=True"):
        from_text_files(inside)
    followed = from_text_files(inside, follow_symlinks=True)
    assert followed.vocabulary == ("apple", "banana", "password", "token") and followed.names == ("a.txt", "b.txt")
    (inside / "b.txt").unlink()
    (inside / "c.txt").symlink_to(inside / "a.txt")  # a link that stays inside is read
    corpus = from_text_files(inside)
    np.testing.assert_array_equal(corpus.counts.toarray(), [[2, 1], [2, 1]])
    with pytest.raises(TypeError, match=r"'follow_symlinks' argument of from_text_files must be a bool"):
        from_text_files(inside, follow_symlinks="no")


def test_from_text_files_bounds_each_file_and_the_total(tmp_path):
    write(tmp_path / "big.txt", "word " * 400)  # 2000 bytes
    with pytest.raises(ValueError, match=r"big\.txt: longer than 1024 bytes.*pass a larger max_bytes to from_text_files"):
        from_text_files(tmp_path, max_bytes=16 * KIB)
    assert from_text_files(tmp_path, max_bytes=32 * KIB).counts.sum() == 400
    many = tmp_path / "many"
    many.mkdir()
    for i in range(20):
        write(many / f"f{i:02d}.txt", "word " * 20)  # 100 bytes each, below the 112 allowed a file at 1800
    with pytest.raises(ValueError, match=r"f18\.txt: the files up to this one hold more than max_bytes=1800"):
        from_text_files(many, max_bytes=1800)
    assert from_text_files(many, max_bytes=2000).counts.sum() == 400


# ----------------------------------------------------------------------------- vocabularies


def test_every_vocabulary_reader_refuses_repeated_words_and_wrong_lengths(tmp_path):
    write(tmp_path / "dup.txt", "alpha\nbeta\nalpha\n")
    write(tmp_path / "two.txt", "alpha\nbeta\n")
    write(tmp_path / "d.txt", "1\n3\n1\n1 3 2\n")
    write(tmp_path / "c.ldac", "1 2:1\n")
    repeated = r"dup\.txt, line 3: the word 'alpha' repeats line 1"
    with pytest.raises(ValueError, match=repeated):
        read_vocabulary(tmp_path / "dup.txt")
    with pytest.raises(ValueError, match=repeated):
        load_uci_bow(tmp_path / "d.txt", vocab_path=tmp_path / "dup.txt")
    with pytest.raises(ValueError, match=repeated):
        load_ldac(tmp_path / "c.ldac", vocab_path=tmp_path / "dup.txt")
    with pytest.raises(ValueError, match=r"two\.txt: has 2 words but .*d\.txt declares W=3"):
        load_uci_bow(tmp_path / "d.txt", vocab_path=tmp_path / "two.txt")
    with pytest.raises(ValueError, match=r"c\.ldac, line 1: term id 2 is outside the vocabulary of 2 words"):
        load_ldac(tmp_path / "c.ldac", vocab_path=tmp_path / "two.txt")
    with pytest.raises(ValueError, match=r"'vocabulary' argument of from_matrix must be distinct words .*"
                                         r"got 'a' at positions 0 and 2"):
        from_matrix([[1, 2, 3]], vocabulary=["a", "b", "a"])
    with pytest.raises(ValueError, match=r"'vocabulary' argument of Corpus must be distinct words"):
        Corpus([[1, 2]], vocabulary=["a", "a"])


# ----------------------------------------------------------------------------- estimate archives


def test_a_non_string_model_is_refused_by_the_constructor_and_in_a_file(tmp_path):
    beta, weights = random_instance(2, 5, 0)
    with pytest.raises(TypeError, match=r"'model' argument of SpectralEstimate must be a model name \(str\); got 5"):
        SpectralEstimate(5, {"beta": beta, "weights": weights}, k=2)
    good = estimate().save(tmp_path / "good.npz")
    with np.load(good, allow_pickle=False) as raw:
        meta = json.loads(str(raw["meta"]))
    meta["model"] = 5
    bad = tmp_path / "model5.npz"
    rewrite_archive(good, bad, {"meta.npy": npy_bytes(np.array(json.dumps(meta)))})
    with pytest.raises(ValueError, match=re.escape(repr(str(bad))) + r", metadata 'model': 5 is not a specinit family"):
        SpectralEstimate.load(bad)


@pytest.mark.parametrize("depth", [MAX_META_DEPTH + 1, 200_000])
def test_deeply_nested_metadata_is_refused_naming_the_file(tmp_path, depth):
    good = estimate().save(tmp_path / "good.npz")
    deep = tmp_path / "deep.npz"
    nested = "[" * depth + "]" * depth
    rewrite_archive(good, deep, {"meta.npy": npy_bytes(np.array('{"model": "x", "diagnostics": ' + nested + "}"))})
    with pytest.raises(ValueError, match=re.escape(repr(str(deep))) + r" is not a specinit estimate: its metadata is "
                                         rf"nested deeper than {MAX_META_DEPTH} levels"):
        SpectralEstimate.load(deep)


def test_model_facts_to_json_round_trips_whatever_the_parameters(tmp_path):
    beta, weights = random_instance(3, 6, 1)
    est = lda.spectral_from_moments(lda.population_moments(beta, weights), 3, weights.sum())
    params = {name: np.full_like(value, np.nan) for name, value in est.params.items()}
    facts = ModelFacts.from_sites(est.facts.to_sites(params), est.match_site)
    data = facts.to_json()
    assert ModelFacts.from_json(json.loads(json.dumps(data, allow_nan=False))) == facts
    assert facts.component_axes == est.facts.component_axes and facts.match_site == "beta"


def test_diagnostics_round_trip_with_numpy_scalars_and_non_finite_values(tmp_path):
    est = estimate()
    extra = {"n": np.int16(7), "x": np.float32(0.5), "flag": np.bool_(True), "nan": float("nan"),
             "inf": np.inf, "ninf": -np.inf, "seq": [1.5, np.nan], "name": np.str_("tpm")}
    est.diagnostics.update(extra)  # changed after construction: save checks again
    back = SpectralEstimate.load(est.save(tmp_path / "d.npz"))
    assert back.diagnostics["n"] == 7 and type(back.diagnostics["n"]) is int
    assert back.diagnostics["x"] == 0.5 and back.diagnostics["flag"] is True and back.diagnostics["name"] == "tpm"
    assert math.isnan(back.diagnostics["nan"]) and back.diagnostics["inf"] == math.inf
    assert back.diagnostics["ninf"] == -math.inf
    np.testing.assert_array_equal(back.diagnostics["seq"], [1.5, np.nan])
    with np.load(tmp_path / "d.npz", allow_pickle=False) as raw:  # the metadata is strict JSON
        meta = json.loads(str(raw["meta"]), parse_constant=lambda name: pytest.fail(f"non-JSON constant {name}"))
    assert meta["diagnostics"]["nan"] == {"float": "nan"}


@pytest.mark.parametrize("value, found", [({1, 2}, "set"), (len, "builtin_function_or_method"),
                                          (np.array([None, 1], dtype=object), "dtype object")])
def test_unserializable_diagnostics_are_refused_naming_the_key(tmp_path, value, found):
    est = estimate()
    est.diagnostics["bad/key"] = value
    with pytest.raises(TypeError, match=rf"'diagnostics' argument of SpectralEstimate\.save .*'bad/key'.*{found}"):
        est.save(tmp_path / "e.npz")
    assert list(tmp_path.iterdir()) == []


def test_npz_members_are_checked_before_they_are_inflated(tmp_path, monkeypatch):
    good = estimate().save(tmp_path / "good.npz")
    beta = SpectralEstimate.load(good).params["beta"]
    larger = tmp_path / "larger.npz"  # a consistent member, larger than the metadata records
    rewrite_archive(good, larger, {"param/beta.npy": npy_bytes(np.ones((3, 200_000)) / 200_000)})
    lying = tmp_path / "lying.npz"  # a header that claims 8 TB over the 480 bytes of the real data
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, {"descr": "<f8", "fortran_order": False, "shape": (10**6, 10**6)})
    rewrite_archive(good, lying, {"param/beta.npy": header.getvalue() + beta.tobytes()})
    read_array = np.lib.format.read_array

    def only_meta(handle, *args, **kwargs):
        assert handle.name == "meta.npy", f"{handle.name} was inflated before its member was checked"
        return read_array(handle, *args, **kwargs)

    monkeypatch.setattr(np.lib.format, "read_array", only_meta)
    with pytest.raises(ValueError, match=re.escape(repr(str(larger))) + r", member 'param/beta': holds shape "
                                         r"\(3, 200000\) of <f8 but the metadata records .*\[3, 20\]"):
        SpectralEstimate.load(larger)
    with pytest.raises(ValueError, match=re.escape(repr(str(lying))) + r", member 'param/beta': its header declares"):
        SpectralEstimate.load(lying)
    with pytest.raises(ValueError, match=re.escape(repr(str(good))) + r": reading it needs about [\d.]+ KiB \(the arrays its "
                                         r"members declare\).*max_bytes=512"):
        SpectralEstimate.load(good, max_bytes=512)
