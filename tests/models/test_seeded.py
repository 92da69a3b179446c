"""Seeded topics: seed words as anchors (exact on population moments), labels kept, errors and warnings."""

import re
import warnings

import numpy as np
import pytest
import scipy.sparse as sp

from specinit.engine.anchors import fit_anchor
from specinit.engine.moments import CountMoments
from specinit.estimate import SpectralEstimate
from sklearn.base import clone

from specinit.estimators import SpectralLDA
from specinit.models import lda, single_topic
from specinit.engine.sources import CountSource
from specinit.models._topics import SeedWords, close_topics, seed_constraints


from tests.conftest import sample_lda
from tests.models.test_lda import PopulationPairs


def pure_word_instance(k=4, V=30, pure=3, seed=0):
    """Topics whose first ``pure`` words of block i belong to topic i alone; the other words are shared."""
    rng = np.random.default_rng(seed)
    beta = rng.dirichlet(np.ones(V), size=k)
    beta[:, : k * pure] = 0.0
    for i in range(k):
        beta[i, i * pure:(i + 1) * pure] = rng.uniform(0.05, 0.1, size=pure)
    alpha = rng.uniform(0.5, 1.5, size=k)
    return beta / beta.sum(axis=1, keepdims=True), alpha


def topic_words(i, pure=3):
    return list(range(i * pure, (i + 1) * pure))


@pytest.mark.parametrize("seed_anchor", ["extreme", "pooled", "harmonic"])
def test_seeded_anchors_are_exact_on_population_moments_and_keep_the_groups_order(seed_anchor):
    """Seed groups of pure words, given in another order than the topics: topic i of the fit is group i's topic,
    exactly (to the projected gradient's accuracy), and the unseeded topics are found by the search."""
    beta, alpha = pure_word_instance()
    order = [2, 0]  # group 0 names topic 2, group 1 names topic 0
    groups = tuple(np.array(topic_words(i)[:2]) for i in order)
    b, a, _, report = fit_anchor(PopulationPairs(beta, alpha), 4, func="t", seed=0, floor=1e-14, n_iter=5000,
                                 seed_groups=groups, seed_anchor=seed_anchor)
    np.testing.assert_allclose(b[:2], beta[order], atol=1e-8)
    rest = [i for i in range(4) if i not in order]
    matched = [int(np.argmin(np.abs(b[2:] - beta[i]).sum(axis=1))) + 2 for i in rest]
    np.testing.assert_allclose(b[matched], beta[rest], atol=1e-8)
    np.testing.assert_allclose(a[:2], alpha[order] / alpha.sum(), atol=1e-8)
    np.testing.assert_allclose(report["seed/support"], 1.0, atol=1e-8)  # pure words: all their mass is the topic's
    np.testing.assert_allclose(report["seed/seed_mass"], [beta[i, topic_words(i)[:2]].sum() for i in order], atol=1e-8)
    assert np.all(report["seed/similarity"] < 0.95)
    if seed_anchor == "extreme":  # a word of the group's topic
        assert all(report["anchors"][j] in topic_words(i) for j, i in enumerate(order))
    else:
        assert list(report["anchors"][:2]) == [-1, -1]  # rows combined from the group's, not words


def test_without_seeds_the_anchor_search_is_unchanged():
    """No seed groups: the search is the greedy farthest-point one (anchors of separable topics, exact topics)."""
    beta, alpha = pure_word_instance()
    b, _, _, report = fit_anchor(PopulationPairs(beta, alpha), 4, func="t", seed=0, floor=1e-14, n_iter=5000)
    assert all(any(w in topic_words(i) for w in report["anchors"]) for i in range(4))
    assert not any(key.startswith("seed/") for key in report)


def planted(n_docs, seed=1):
    beta, alpha = pure_word_instance()
    return beta, sp.csr_matrix(sample_lda(beta, alpha * 0.3, n_docs, 60, seed)[0])


VOCABULARY = [f"w{j}" for j in range(30)]


def test_seeded_anchors_from_samples_converge_at_the_sampling_rate():
    """Sample pair moments: the seeded topics' L1 error halves when N quadruples (1/sqrt(N))."""
    errors = []
    for n_docs in (1000, 4000, 16000):
        beta, X = planted(n_docs)
        b, _, _, _ = fit_anchor(CountMoments(X, weighting="per-document"), 4, func="t", seed=0, floor=1e-14,
                                n_iter=5000, seed_groups=(np.array([6, 7]), np.array([0, 1])))
        errors.append(np.abs(b[:2] - beta[[2, 0]]).sum(axis=1).max())
    assert errors[0] < 0.08 and errors[1] < 0.65 * errors[0] and errors[2] < 0.65 * errors[1], errors


def test_seeded_spectral_names_its_topics_in_seed_order():
    """lda.spectral with word names: topic i is seed group i's (closed by the EM sweeps), named in diagnostics."""
    beta, X = planted(4000)
    est = lda.spectral(X, 4, vocabulary=VOCABULARY, seed=0, seed_words={"third": ["w6", "w7"], "first": ["w0", "w1"]},
                       doc_topics=False)
    assert np.abs(est.params["beta"][:2] - beta[[2, 0]]).sum(axis=1).max() < 0.1
    assert list(est.diagnostics["seed/names"]) == ["third", "first"]
    assert list(est.diagnostics["seed/words"]) == ["w6 w7", "w0 w1"]
    assert np.all(est.diagnostics["seed/support"] > 0.9)


def test_seed_words_by_column_index_equal_seed_words_by_name():
    _, X = planted(1000)
    by_name = lda.spectral(X, 4, vocabulary=VOCABULARY, seed=0, seed_words=[["w6", "w7"]], doc_topics=False)
    by_index = lda.spectral(X, 4, seed=0, seed_words=[[6, 7]], doc_topics=False)
    np.testing.assert_array_equal(by_name.params["beta"], by_index.params["beta"])
    assert list(by_index.diagnostics["seed/names"]) == ["6/7"]


def test_seed_constraints_mask_the_other_topics_of_seed_words_and_of_documents_with_seed_words():
    """Topic i alone emits group i's words; a document with seed words draws from their groups' topics and the
    unseeded ones; a document without any draws from every topic."""
    groups = (np.array([0, 1]), np.array([4]))
    words = seed_constraints(groups, (3, 6))
    np.testing.assert_array_equal(words, [[1, 1, 1, 1, 0, 1], [0, 0, 1, 1, 1, 1], [0, 0, 1, 1, 0, 1]])
    counts = sp.csr_matrix(np.array([[2, 0, 1, 0, 0, 0], [0, 0, 0, 0, 3, 1], [0, 1, 0, 0, 1, 0], [0, 0, 5, 1, 0, 2]]))
    documents = seed_constraints(groups, (3, 6), counts)
    np.testing.assert_array_equal(documents, [[1, 0, 1], [0, 1, 1], [1, 1, 1], [1, 1, 1]])


def test_seeded_sweeps_keep_seed_words_in_their_topic_and_run_to_convergence():
    """The closing sweeps of a seeded fit leave a seed word's probability in every other topic at the floor (its
    occurrences are its topic's), also for a word that every topic uses, and by default they run up to
    SEEDED_SWEEPS (unseeded: EM_SWEEPS)."""
    beta_true, X = planted(1000)
    shared = 15  # a word of every topic (at least 2.8% of each), given as a seed of the topic of words 6, 7
    assert beta_true[:, shared].min() > 0.01
    est = lda.spectral(X, 4, seed=0, seed_words=[[6, 7, shared], [0, 1]], doc_topics=False, closing_tol=0.0)
    beta = est.params["beta"]
    floor = 1e-3 / 30
    assert beta[1:, [6, 7, shared]].max() < 1.01 * floor and beta[[0, 2, 3]][:, [0, 1]].max() < 1.01 * floor
    assert beta[0, [6, 7, shared]].min() > 100 * floor and beta[1, [0, 1]].min() > 100 * floor
    assert est.diagnostics["closing_sweeps"] == lda.SEEDED_SWEEPS
    assert lda.spectral(X, 4, seed=0, doc_topics=False, closing_tol=0.0).diagnostics["closing_sweeps"] == lda.EM_SWEEPS
    # the sweeps without the constraints (the anchor fit closed by plain EM) keep the shared word in every topic
    anchor = lda.spectral(X, 4, seed=0, seed_words=[[6, 7, shared], [0, 1]], doc_topics=False, em_sweeps=0)
    plain, _, _ = close_topics(CountSource(X), anchor.params["beta"], anchor.params["alpha"], lda.SEEDED_SWEEPS,
                               floor=1e-3)
    assert plain[1:, shared].min() > 100 * floor


def test_documents_with_seed_words_give_their_other_words_to_the_seeds_topics():
    """Word 2 occurs only beside group 0's seed word, word 3 only beside group 1's: one constrained sweep gives
    each to its documents' topic, from topics that start the other way round."""
    counts = sp.csr_matrix(np.array([[2, 0, 4, 0]] * 20 + [[0, 2, 0, 4]] * 20, dtype=np.float64))
    wrong = np.array([[0.4, 0.1, 0.1, 0.4], [0.1, 0.4, 0.4, 0.1]])  # word 2 in topic 1, word 3 in topic 0
    beta, _, _ = close_topics(CountSource(counts), wrong, np.array([0.5, 0.5]), 1, floor=1e-3,
                              seed_groups=(np.array([0]), np.array([1])))
    assert beta[0, 2] > 0.6 and beta[1, 3] > 0.6
    assert beta[1, 2] < 0.01 and beta[0, 3] < 0.01


def test_seed_prior_pulls_the_seed_words_into_their_topic_in_the_closing_sweeps():
    """The closing sweeps' prior adds seed_prior to each seed word in its topic: more of it, more seed mass."""
    _, X = planted(1000)
    mass = [lda.spectral(X, 4, seed=0, seed_words=[[6, 7]], seed_prior=prior, doc_topics=False)
            .diagnostics["seed/seed_mass"][0] for prior in (0.0, 1000.0)]
    assert mass[1] > mass[0] + 0.05


@pytest.mark.parametrize("seeds, vocabulary, message", [
    ({"a": ["w0", "nope"]}, True, r"'nope' in group 'a', not in it"),
    ({"a": ["w0", "w01"]}, True, r"close: .*w0"),
    ({"a": []}, True, r"non-empty word groups \(group 'a'"),
    ([["w0"], ["w1"], ["w2"], ["w3"], ["w4"]], True, r"at most k = 4 groups"),
    ({"a": ["w0", "w1"], "b": ["w1"]}, True, r"disjoint groups: 'w1' is in group 'a' and in group 'b'"),
    ([["w0"]], False, r"column indices, or words together with vocabulary="),
    ([[30]], False, r"column indices in \[0, 30\)"),
    ([[0], ["w0"]], True, r"a column named twice"),
    ([], True, r"at least one group"),
])
def test_bad_seed_words_are_named(seeds, vocabulary, message):
    _, X = planted(300)
    vocab = VOCABULARY if vocabulary else None
    with pytest.raises(ValueError, match=message) as info:
        lda.spectral(X, 4, vocabulary=vocab, seed=0, seed_words=seeds)
    assert "'seed_words' argument of lda.spectral" in str(info.value)


def test_seed_words_of_the_wrong_kind_and_path():
    _, X = planted(300)
    with pytest.raises(TypeError, match="'seed_words' argument of lda.spectral must be a mapping"):
        lda.spectral(X, 4, seed=0, seed_words="w0")
    with pytest.raises(TypeError, match=r"words given as str or column index \(group 0\)"):
        lda.spectral(X, 4, seed=0, seed_words=[[1.5]])
    with pytest.raises(ValueError, match="seeded topics are anchored: method='anchor'"):
        lda.spectral(X, 4, seed=0, seed_words=[[0]], method="tpm")
    with pytest.raises(ValueError, match="'k' argument of lda.spectral must be an integer with seed_words"):
        lda.spectral(X, "auto", seed=0, seed_words=[[0]])


def test_weak_and_duplicated_seed_groups_warn_naming_them():
    """A group of words shared by every topic names no topic; two groups of one topic's words collapse."""
    _, X = planted(2000)
    shared = list(range(12, 30))  # words every topic uses
    with pytest.warns(RuntimeWarning, match=r"seed groups 'shared' co-occur with every word as the corpus does"):
        lda.spectral(X, 4, seed=0, seed_words={"shared": shared}, doc_topics=False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        lda.spectral(X, 4, seed=0, seed_words={"one": [0, 1], "same": [2]}, doc_topics=False)
    messages = [str(w.message) for w in caught]
    assert any("seed groups 'one', 'same' co-occur with the same words" in m for m in messages), messages
    # one topic's words split between two topics: at least one of them explains little of its seed words
    assert any(re.search(r"weakly supported by the data: '(one|same)'", m) for m in messages), messages


def test_online_updates_keep_the_seeds_and_their_labels_across_save_and_load(tmp_path):
    beta, X = planted(3000)
    est = lda.update(X[:1000], k=4, seed=0, seed_words={"third": [6, 7], "first": [0, 1]})
    path = tmp_path / "seeded.npz"
    est.save(path)
    est = lda.update(X[1000:], SpectralEstimate.load(path), seed=0)
    assert est.diagnostics["n_batches"] == 2 and list(est.diagnostics["seed/names"]) == ["third", "first"]
    assert np.abs(est.params["beta"][:2] - beta[[2, 0]]).sum(axis=1).max() < 0.15
    with pytest.raises(ValueError, match="the estimate keeps its seeds"):
        lda.update(X[:10], est, seed_words={"other": [5]})
    every = lda.update(X[:1000], k=4, seed=0, seed_words=[topic_words(i)[:2] for i in (3, 2, 1, 0)])
    every = lda.update(X[1000:], every, seed=0)  # every topic seeded: nothing left to match
    assert [int(np.argmin(np.abs(beta - row).sum(axis=1))) for row in every.params["beta"]] == [3, 2, 1, 0]


def test_seed_prior_is_the_models_topic_concentration():
    _, X = planted(500)
    est = lda.spectral(X, 4, seed=0, seed_words=[[6, 7], [0, 1]], doc_topics=False)
    prior = lda.seed_prior(est, eta=0.05, strength=2.0)
    expected = np.full((4, 30), 0.05)
    expected[0, [6, 7]] += 2.0
    expected[1, [0, 1]] += 2.0
    np.testing.assert_array_equal(prior, expected)
    with pytest.raises(ValueError, match="'estimate' argument of lda.seed_prior must be a SpectralEstimate fitted "
                                         "with seed_words"):
        lda.seed_prior(lda.spectral(X, 4, seed=0, doc_topics=False))


def test_seed_words_check_is_idempotent_and_keeps_the_given_words():
    seeds = SeedWords.check("seed_words", {"a": ["x", "y", "x"], "b": "z"})
    assert seeds.groups == (("x", "y"), ("z",)) and SeedWords.check("seed_words", seeds) is seeds
    resolved = seeds.resolved(["z", "y", "x"])
    assert resolved.groups == ((2, 1), (0,)) and resolved.given == seeds.groups
    assert list(resolved.diagnostics()["seed/words"]) == ["x y", "z"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert SeedWords.check("seed_words", None) is None


def test_seeded_labels_survive_svi_and_warm_started_mcmc_with_the_seed_prior_and_reach_arviz_named():
    """Topic i stays seed group i's topic after variational EM and after exact Gibbs-within-NUTS draws started
    from the estimate under the seed prior; ArviZ's ``topics`` coordinates are the seed names."""
    import jax
    from numpyro.infer import MCMC

    from specinit import posterior

    beta, X = planted(400)
    dense = X.toarray()
    seeds = {"third": ["w6", "w7"], "first": ["w0", "w1"]}
    est = lda.spectral(X, 4, vocabulary=VOCABULARY, seed=0, seed_words=seeds)

    def seeded_topics(topics):  # the true topic closest to each fitted one, for the seeded two
        return [int(np.argmin(np.abs(beta - row).sum(axis=1))) for row in np.asarray(topics)[:2]]

    assert seeded_topics(est.params["beta"]) == [2, 0]
    refined = lda.refine(X, est, num_steps=60, seed=0).estimate
    assert seeded_topics(refined.params["beta"]) == [2, 0]
    eta = lda.seed_prior(est)
    kernel = lda.kernel(dense, k=4, eta=eta, max_tree_depth=3)
    init = est.init_params(lda.model, 2, jax.random.PRNGKey(1), spread=0.05, kernel=kernel, model_args=(dense,),
                           model_kwargs={"k": 4, "eta": eta})
    run = MCMC(kernel, num_warmup=20, num_samples=20, num_chains=2, chain_method=jax.vmap, progress_bar=False)
    run.run(jax.random.PRNGKey(2), dense, k=4, eta=eta, init_params=init)
    draws = np.asarray(run.get_samples(group_by_chain=True)["beta"])
    for chain in draws:
        assert seeded_topics(chain.mean(axis=0)) == [2, 0]
    idata = posterior.to_inference_data(run, est, log_likelihood=False)  # the names; LOO is tested elsewhere
    topics = posterior.group(idata, "posterior")["beta"].coords["topics"].values
    assert list(topics) == ["third", "first", "topic 2", "topic 3"]


def test_single_topic_updates_take_seed_words_too():
    beta, X = planted(3000)
    est = single_topic.update(X[:1500], k=4, seed=0, seed_words={"third": [6, 7]})
    est = single_topic.update(X[1500:], est, seed=0)
    assert list(est.diagnostics["seed/names"]) == ["third"] and est.diagnostics["seed/support"][0] > 0.9
    assert int(np.argmin(np.abs(beta - est.params["beta"][0]).sum(axis=1))) == 2


def test_the_scikit_learn_face_takes_seed_words_by_name_and_keeps_them_online():
    _, X = planted(2000)
    model = SpectralLDA(4, seed_words={"third": ["w6", "w7"]}, vocabulary=VOCABULARY, random_state=0).fit(X)
    assert list(model.estimate_.diagnostics["seed/names"]) == ["third"]
    online = clone(model).partial_fit(X[:1000]).partial_fit(X[1000:])
    assert list(online.estimate_.diagnostics["seed/names"]) == ["third"]
    np.testing.assert_allclose(online.components_[0], model.components_[0], atol=0.1)
