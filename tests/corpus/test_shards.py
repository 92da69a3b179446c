"""Corpora on disk (npz shards, UCI docword, LDA-C) read block by block as Dask arrays give the in-memory moments."""

from __future__ import annotations

import dask
import numpy as np
import pytest
import scipy.sparse as sp

from specinit.corpus import from_matrix, save_ldac, save_uci_bow
from specinit.corpus.shards import (
    read_ldac_blocks,
    read_npz_shards,
    read_uci_blocks,
    save_npz_shards,
)
from specinit.engine.moments import CountMoments
from tests.conftest import random_instance, sample_lda


@pytest.fixture(scope="module")
def counts():
    beta, weights = random_instance(3, 40, seed=0)
    X, _ = sample_lda(beta, 2 * weights, N=230, length=15, seed=1)
    X[10] = 0  # an empty document inside a block
    X[229] = 0  # and a trailing one (absent from the UCI entries)
    return sp.csr_matrix(X)


@pytest.fixture(autouse=True)
def synchronous():
    with dask.config.set(scheduler="synchronous"):  # no cluster needed to check the readers
        yield


def test_npz_shards_round_trip(counts, tmp_path):
    paths = save_npz_shards(counts, tmp_path / "shards", rows_per_shard=50)
    assert len(paths) == 5
    lazy = read_npz_shards(tmp_path / "shards")
    assert lazy.chunks[0] == (50, 50, 50, 50, 30) and lazy.shape == counts.shape
    assert abs(lazy.compute() - counts).max() == 0


@pytest.mark.parametrize("rows", [1, 37, 500])
def test_uci_and_ldac_blocks_round_trip(counts, tmp_path, rows):
    corpus = from_matrix(counts)
    save_uci_bow(corpus, tmp_path / "docword.txt")
    save_ldac(corpus, tmp_path / "corpus.ldac")
    uci = read_uci_blocks(tmp_path / "docword.txt", rows_per_block=rows)
    ldac = read_ldac_blocks(tmp_path / "corpus.ldac", vocab_size=40, rows_per_block=rows)
    for lazy in (uci, ldac):
        assert lazy.shape == counts.shape and max(lazy.chunks[0]) == min(rows, 230)
        assert abs(lazy.compute() - counts).max() == 0


def test_moments_stream_from_shards(counts, tmp_path):
    save_npz_shards(counts, tmp_path / "s", rows_per_shard=64)
    ref, lazy = CountMoments(counts, alpha0=1.0), CountMoments(read_npz_shards(tmp_path / "s"), alpha0=1.0)
    Q = np.random.default_rng(0).standard_normal((40, 5))
    # Same float64 sums in another order: agreement to round-off (1e-10 relative, as the issue asks).
    assert np.abs(ref.m2_matmat(Q) - lazy.m2_matmat(Q)).max() < 1e-10 * np.abs(ref.m2_matmat(Q)).max()


def test_reader_errors(tmp_path):
    with pytest.raises(ValueError, match="shards"):
        read_npz_shards(tmp_path)
    bad = tmp_path / "docword.txt"
    bad.write_text("3\n4\n2\n1 1 2\n1 9 1\n")
    with pytest.raises(ValueError, match=r"docword.txt, line 5: entry '1 9 1' outside the header's D=3, W=4"):
        read_uci_blocks(bad, rows_per_block=2)
    with pytest.raises(ValueError, match="uncompressed"):
        read_uci_blocks(tmp_path / "docword.txt.gz")


@pytest.mark.parametrize("body, problem", [
    ("3\n4\n3\n1 1 2\n2 2 1\n4 1 1\n", r"line 6: entry '4 1 1' outside the header's D=3"),  # doc beyond D
    ("3\n4\n3\n1 1 2\n2 2 1\n", r"line 3: the header gives NNZ=3 but the file has 2 entries"),  # truncated
    ("3\n4\n1\n1 1 2\n2 2 1\n", r"line 3: the header gives NNZ=1 but the file has 2 entries"),
    ("3\n4\n2\n1 1 2\n2 2 -1\n", r"line 5: expected 'docID wordID count' \(non-negative integers\)"),
    ("3\n4\n2\n1 1 2\n2 2 1.5\n", r"line 5: expected 'docID wordID count'"),
    ("3\n4\n2\n2 1 2\n1 2 1\n", r"line 5: docID 1 after docID 2"),
    ("3\nfour\n2\n", r"line 2: expected the header integer W"),
    ("0\n4\n0\n", r"line 1: the header D \(number of documents\) must be at least 1"),
    ("3\n0\n0\n", r"line 2: the header W \(vocabulary size\) must be at least 1"),
    ("3\n4\n-1\n", r"line 3: the header NNZ \(number of entries\) must be non-negative"),
    ("", r"line 1: expected the header integer D"),
    ("99999999999999999999999\n4\n1\n1 1 1\n", r"docword\.txt: reading it needs about .* \(the Dask graph of "
                                               r"D=9+ documents"),
    ("3\n99999999999999999999999\n0\n", r"docword\.txt: reading it needs about .* \(a block of 2 documents with 0 "
                                       r"entries over 9+ words\)"),
])
def test_uci_blocks_never_lose_entries(tmp_path, body, problem):
    path = tmp_path / "docword.txt"
    path.write_text(body)
    with pytest.raises(ValueError, match=problem):
        read_uci_blocks(path, rows_per_block=2)


@pytest.mark.parametrize("body, problem", [
    ("2 0:1 1:2.5\n", r"line 1: expected 'M term:count \.\.\.' with non-negative integer"),
    ("2 0:1 1:-2\n", r"line 1: expected 'M term:count"),
    ("1 0:1\n3 0:1 1:2\n", r"line 2: M=3 but the line has 2 term:count pairs"),
    ("1 0:1\n1 7:1\n", r"line 2: term id 7 outside 0..3"),
    ("1 0:1\n1 0-1\n", r"line 2: expected 'M term:count"),
])
def test_ldac_blocks_refuse_what_they_cannot_keep(tmp_path, body, problem):
    path = tmp_path / "c.ldac"
    path.write_bytes(body.encode())
    with pytest.raises(ValueError, match=problem):
        read_ldac_blocks(path, vocab_size=4, rows_per_block=1)


@pytest.mark.parametrize("damage, problem", [
    (lambda m: sp.csr_matrix((np.array([1.0, -2.0]), np.array([0, 1]), np.array([0, 2])), shape=(1, 3)),
     r"must hold counts \(non-negative integers of at most 2\*\*53\); found -2"),
    (lambda m: sp.csr_matrix((np.array([1.0, np.nan]), np.array([0, 1]), np.array([0, 2])), shape=(1, 3)),
     r"must hold counts .*found nan"),
    (lambda m: sp.csr_matrix((np.array([1.5]), np.array([0]), np.array([0, 1])), shape=(1, 3)),
     r"must hold counts .*found 1\.5"),
])
def test_npz_shards_name_the_shard_that_holds_no_counts(tmp_path, damage, problem):
    sp.save_npz(tmp_path / "a.npz", sp.csr_matrix(np.ones((1, 3))))
    lazy = read_npz_shards(tmp_path)  # the folder scan reads the shapes only
    sp.save_npz(tmp_path / "a.npz", damage(None))
    with pytest.raises(ValueError, match=r"a\.npz: " + problem):
        lazy.compute()


def test_npz_shards_name_a_damaged_or_rewritten_shard(tmp_path):
    sp.save_npz(tmp_path / "a.npz", sp.csr_matrix(np.ones((2, 3))), compressed=False)
    lazy = read_npz_shards(tmp_path)
    with np.load(tmp_path / "a.npz") as archive:
        members = dict(archive)
    np.savez(tmp_path / "a.npz", **{**members, "indices": members["indices"] + 7})  # columns beyond the shape
    with pytest.raises(ValueError, match=r"a\.npz: a damaged sparse matrix \(ValueError: "):
        lazy.compute()
    sp.save_npz(tmp_path / "a.npz", sp.csr_matrix(np.ones((4, 3))))
    with pytest.raises(ValueError, match=r"a\.npz: holds a matrix of shape \(4, 3\), not the \(2, 3\) it declared"):
        lazy.compute()
