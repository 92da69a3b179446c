"""Checked by mypy (tests/test_typing.py), never run: what a type checker infers for calls of the public API."""

from pathlib import Path
from typing import Any, Callable, assert_type

import arviz as az
import numpy as np
import pandas as pd
import xarray as xr

from specinit import SpectralEstimate
from specinit.models import factors, gmm, hmm, lda, multiview, single_topic
from specinit.align import align_draws, amari_index, draw_permutations, match_components, topic_error
from specinit.cli import main
from specinit.compare import NutsComparison, SviComparison, compare_nuts, compare_svi, local_sites
from specinit.conditional import ExactGibbs, Structure, exact_kernel, find_structure
from specinit.corpus import Corpus, HeldoutResult, corpus_from_texts, document_completion, fold_in, from_matrix
from specinit.corpus import load_letter_sequences, top_words, umass_coherence
from specinit.corpus.formats import load_ldac, load_uci_bow, read_vocabulary
from specinit.corpus.shards import save_npz_shards
from specinit.corpus.text_files import from_text_files
from specinit.distributions.hmm import posterior_marginals, viterbi
from specinit.engine.decompose import Decomposition, decompose
from specinit.engine.kernel_features import NystromFeatures, RandomFourierFeatures, kernel_features
from specinit.engine.moments import CountMoments, PairSums
from specinit.engine.views import MultiViewFit, fit_multiview
from specinit.estimators import SpectralEstimator, estimator_class
from specinit.family import Family, family
from specinit.pointwise import RowLogLikelihood, row_log_likelihood
from specinit.posterior import LooResult, compare_table, loo, max_rhat, to_inference_data
from specinit.refine import RefineResult
from specinit.synthetic import SyntheticCorpus, sample_lda, sample_single_topic
from specinit.warmstart import Laplace, SiteInfo, laplace, latent_sites, site_info

counts = np.ones((20, 6))
est = lda.spectral(counts, 2)
assert_type(est, SpectralEstimate)
assert_type(single_topic.spectral(counts, 2), SpectralEstimate)
assert_type(gmm.spectral(counts, 2), SpectralEstimate)
assert_type(hmm.spectral([np.arange(5)], 2, 5), SpectralEstimate)
assert_type(factors.spectral(counts, 2), SpectralEstimate)
assert_type(multiview.spectral([counts, counts, counts], 2), SpectralEstimate)
assert_type(est.params, dict[str, np.ndarray])
assert_type(est.init_params(lda.model, 2, None), dict[str, Any])
assert_type(est.inverse_mass_matrix(lda.model), np.ndarray)
assert_type(est.condition(lda.model), Callable[..., Any])
assert_type(SpectralEstimate.load("estimate.npz"), SpectralEstimate)
assert_type(est.save("estimate.npz"), Path)
assert_type(est.init_strategy(["beta"]), Callable[..., Any])
assert_type(laplace(est, lda.model, model_args=(counts, 2)), Laplace)
assert_type(laplace(est, lda.model, model_args=(counts, 2)).covariance, np.ndarray)
assert_type(latent_sites(lda.model, (counts, 2)), dict[str, tuple[int, ...]])
assert_type(site_info(lda.model, (counts, 2)), dict[str, SiteInfo])

mixture = gmm.spectral(counts, 2)
assert_type(gmm.refine(counts, mixture), RefineResult)
assert_type(gmm.refine(counts, mixture).estimate, SpectralEstimate)
assert_type(hmm.refine([np.arange(5)], hmm.spectral([np.arange(5)], 2, 5)), RefineResult)

# Aligning posterior draws to a spectral estimate, and the error measures.
draws = {"beta": np.ones((2, 10, 2, 6))}
assert_type(align_draws(draws, est, {"beta": 2}), dict[str, np.ndarray])
assert_type(draw_permutations(draws, est, axis=2), np.ndarray)
assert_type(match_components(est.params["beta"], est.params["beta"]), np.ndarray)
assert_type(topic_error(est.params["beta"], est.params["beta"]), float)
assert_type(amari_index(counts[:2], counts[:2]), float)

# Comparing spectral and posterior fits; exact conditional kernels.
assert_type(compare_nuts(lda.model, est, (counts, 2), num_chains=1), NutsComparison)
assert_type(compare_svi(lda.model, est, (counts, 2)), SviComparison)
assert_type(local_sites(lda.model, (counts, 2)), tuple[str, ...])
assert_type(find_structure(lda.model, (counts, 2)), Structure | None)
assert_type(exact_kernel(lda.model, (counts, 2)), ExactGibbs)

# Synthetic corpora, corpora from matrices and texts, held-out scoring, topic quality.
synthetic = sample_lda(50, 30, 3, seed=0)
assert_type(synthetic, SyntheticCorpus)
assert_type(sample_single_topic(50, 30, 3), SyntheticCorpus)
assert_type(from_matrix(counts), Corpus)
assert_type(corpus_from_texts(["a text", "another text"], min_df=1), Corpus)
assert_type(load_letter_sequences(), list[np.ndarray])
assert_type(document_completion(counts, est.params["beta"], est.params["alpha"]), HeldoutResult)
assert_type(fold_in(counts, est.params["beta"], est.params["alpha"]), np.ndarray)
assert_type(top_words(est.params["beta"]), list[list[str]])
assert_type(umass_coherence(est.params["beta"], counts), np.ndarray)

# Exact inference in HMMs given parameters; the engine's fits.
chain = hmm.spectral([np.arange(5)], 2, 5)
assert_type(viterbi(np.arange(5), chain), np.ndarray | list[np.ndarray])
assert_type(posterior_marginals([np.arange(5)], chain), np.ndarray | list[np.ndarray])
assert_type(decompose(np.ones((3, 3, 3)), 2), Decomposition)
assert_type(fit_multiview([counts, counts, counts], 2), MultiViewFit)
assert_type(kernel_features(counts, rank=8), RandomFourierFeatures | NystromFeatures)

# The hand-off to ArviZ.
mcmc: Any = None
idata = to_inference_data(mcmc, est)
assert_type(idata, az.InferenceData | xr.DataTree)
assert_type(est.to_inference_data(), az.InferenceData | xr.DataTree)
assert_type(compare_table(idata, est), pd.DataFrame)
assert_type(max_rhat(idata), float)
assert_type(loo(idata), LooResult)
assert_type(row_log_likelihood(lda.model, draws, (counts, 2)), RowLogLikelihood | None)

# Moments of counts.
assert_type(PairSums.from_counts(counts), PairSums)
assert_type(PairSums.from_counts(counts) + PairSums.from_counts(counts), PairSums)
assert_type(CountMoments(counts, 1.0).m2_matmat(counts.T[:, :2]), np.ndarray)

# Corpora on disk.
assert_type(load_ldac("corpus.ldac", "vocab.txt"), Corpus)
assert_type(load_uci_bow(Path("docword.txt")), Corpus)
assert_type(read_vocabulary("vocab.txt"), tuple[str, ...])
assert_type(from_text_files("texts", stop_words="english", min_df=2, max_df=0.9), Corpus)
assert_type(save_npz_shards(counts, "shards"), list[Path])

# The command line.
assert_type(main(["fit", "--help"]), int)

# The family layer: the faces generated from declarations, the Family skeleton, the scikit-learn estimators.
assert_type(lda.spectral_from_moments(lda.population_moments(est.params["beta"], est.params["alpha"]), 2),
            SpectralEstimate)
assert_type(lda.update(counts, None, k=2), SpectralEstimate)
assert_type(lda.refine(counts, est), RefineResult)
assert_type(lda.log_likelihood(counts, est), np.ndarray)
assert_type(gmm.predict(counts, mixture), tuple[np.ndarray, np.ndarray])
assert_type(gmm.update(counts, None, k=2), SpectralEstimate)
assert_type(single_topic.refine(counts, single_topic.spectral(counts, 2)), RefineResult)
assert_type(lda.FAMILY.spectral(counts, 2), SpectralEstimate)
assert_type(lda.FAMILY.refine(counts, est), RefineResult)
assert_type(gmm.FAMILY.predict(counts, mixture), tuple[np.ndarray, np.ndarray])
assert_type(family("gmm"), Family)
assert_type(estimator_class("lda"), type[SpectralEstimator])


def fitted(estimator: SpectralEstimator) -> None:
    assert_type(estimator.fit(counts), SpectralEstimator)
    assert_type(estimator.score(counts), float)
