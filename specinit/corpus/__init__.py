"""Corpora in and out: the container, text files, file formats, shipped corpora and topic quality.

Everything a topic-model user needs to get counts in (:func:`from_matrix`,
:func:`from_text_files`, :func:`load_uci_bow`, :func:`load_ldac`,
:func:`load_reuters`) and to judge topics (:func:`top_words`,
:func:`umass_coherence`, :func:`relevance`).

Readers open regular files only and take ``max_bytes``, a memory budget
(default :func:`specinit.memory_limit`) checked against what a file
declares before anything is allocated; errors name the file and the line.
"""

from specinit.corpus.containers import Corpus, from_matrix
from specinit.corpus.formats import (
    load_ldac,
    load_reuters,
    load_uci_bow,
    read_vocabulary,
    save_ldac,
    save_uci_bow,
    write_vocabulary,
)
from specinit.corpus.heldout import (
    HeldoutResult,
    document_completion,
    fold_in,
    split_tokens,
)
from specinit.corpus.quality import (
    relevance,
    top_relevant_words,
    top_words,
    umass_coherence,
)
from specinit.corpus.shards import (
    read_ldac_blocks,
    read_npz_shards,
    read_uci_blocks,
    save_npz_shards,
)
from specinit.corpus.shipped import (
    LETTERS,
    LETTER_MODULES,
    SUMMARY_PACKAGES,
    corpus_from_texts,
    load_docstring_summaries,
    load_letter_sequences,
    load_man_pages,
    load_python_docs,
)
from specinit.corpus.text_files import ENGLISH_STOP_WORDS, from_text_files

__all__ = [
    "ENGLISH_STOP_WORDS",
    "Corpus",
    "HeldoutResult",
    "corpus_from_texts",
    "document_completion",
    "fold_in",
    "load_man_pages",
    "load_docstring_summaries",
    "SUMMARY_PACKAGES",
    "load_python_docs",
    "load_letter_sequences",
    "LETTERS",
    "LETTER_MODULES",
    "split_tokens",
    "from_matrix",
    "from_text_files",
    "load_ldac",
    "load_reuters",
    "load_uci_bow",
    "read_ldac_blocks",
    "read_npz_shards",
    "read_uci_blocks",
    "read_vocabulary",
    "relevance",
    "save_ldac",
    "save_npz_shards",
    "save_uci_bow",
    "top_relevant_words",
    "top_words",
    "umass_coherence",
    "write_vocabulary",
]
