"""Order-4 decompositions (tensor power method, ECA) and the whitened cumulants of data."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from specinit.engine.cumulants import (
    pair_product_tensor,
    whitened_fourth_cumulant,
    whitened_third_cumulant,
)
from specinit.engine.decompose4 import (
    check_options4,
    contract4,
    decompose4,
    eca4,
    reconstruct4,
    tensor_power_method4,
)
from tests.conftest import best_permutation


def _odeco(k, seed, weights=None):
    rng = np.random.default_rng(seed)
    V = np.linalg.qr(rng.normal(size=(k, k)))[0]
    lam = np.array([3.0, -1.2, 0.5, -0.8, 2.0, 1.0, -0.3, 6.0])[:k] if weights is None else np.asarray(weights)
    return V, lam, reconstruct4(lam, V)


def _match(V, lam, dec):
    perm = best_permutation(V.T, dec.vectors.T, metric="abs_cosine")
    vectors, weights = dec.vectors[:, perm], dec.weights[perm]
    return np.max(np.abs(np.abs(np.sum(vectors * V, axis=0)) - 1)), np.max(np.abs(weights - lam))


@pytest.mark.parametrize("method", ["tpm", "eca"])
def test_exact_recovery_of_mixed_sign_odeco_tensor(method):
    V, lam, T = _odeco(8, seed=1)
    dec = decompose4(T, 8, method, seed=0)
    vec_err, lam_err = _match(V, lam, dec)
    # exact tensor: only round-off separates the result from the truth
    assert vec_err < 1e-10 and lam_err < 1e-10
    assert dec.diagnostics["residual"] < 1e-10 and dec.diagnostics["orthogonality"] < 1e-10
    # weights keep their signs and come by decreasing magnitude
    assert np.all(np.diff(np.abs(dec.weights)) <= 0) and np.sum(dec.weights < 0) == 3


def test_tpm4_diagnostics_and_deflation_of_fewer_components():
    V, lam, T = _odeco(6, seed=2)
    dec = tensor_power_method4(T, 3, seed=0)
    assert dec.vectors.shape == (6, 3)
    # the three largest |lambda| are found first
    np.testing.assert_allclose(np.sort(np.abs(dec.weights)), np.sort(np.abs(lam))[-3:], atol=1e-10)
    assert dec.diagnostics["converged"].all() and dec.diagnostics["eigengaps"].shape == (3,)
    assert 0 < dec.diagnostics["residual"] < 1  # the three smallest components are left in the residual


def test_tpm4_error_is_proportional_to_the_perturbation():
    V, lam, T = _odeco(5, seed=3)
    rng = np.random.default_rng(0)
    errors = []
    for eps in (1e-3, 1e-5):
        E = rng.normal(size=T.shape)
        E = sum(E.transpose(p) for p in [(0, 1, 2, 3), (1, 0, 2, 3), (2, 1, 0, 3), (3, 1, 2, 0)]) / 4  # nearly symmetric
        dec = tensor_power_method4(T + eps * E, 5, seed=0)
        errors.append(max(_match(V, lam, dec)))
    # first-order perturbation: the error scales with eps (a factor 100 here; allow 30 for constants)
    assert errors[0] < 0.1 and errors[1] < errors[0] / 30


def test_tpm4_warns_when_not_converged():
    _, _, T = _odeco(5, seed=4, weights=[1.0, 0.99, 0.98, 0.97, 0.96])
    with pytest.warns(RuntimeWarning, match="did not converge"):
        tensor_power_method4(T, 5, n_iter=1, seed=0)


def test_contract4_matches_einsum():
    rng = np.random.default_rng(5)
    T = rng.normal(size=(4, 4, 4, 4))
    U = rng.normal(size=(4, 3))
    np.testing.assert_allclose(contract4(T, U), np.einsum("abcd,bm,cm,dm->am", T, U, U, U), atol=1e-12)


def test_bad_arguments():
    _, _, T = _odeco(4, seed=6)
    with pytest.raises(ValueError, match="'T' argument"):
        tensor_power_method4(T[..., 0])
    bad = T.copy()
    bad[0, 0, 0, 0] = np.nan
    with pytest.raises(ValueError, match="finite"):
        eca4(bad)
    with pytest.raises(ValueError, match="'k' argument"):
        tensor_power_method4(T, 5)
    with pytest.raises(TypeError, match="decompose_options"):
        check_options4("tpm", {"directions": None}, "f")
    with pytest.raises(ValueError, match="'method' argument"):
        decompose4(T, 2, "svtd")
    dec = decompose4(T, 4, "tpm", options={"n_restarts": 3, "n_iter": 50})
    assert dec.weights.shape == (4,)


def test_whitened_cumulants_match_dense_formulas():
    rng = np.random.default_rng(7)
    y = rng.exponential(size=(300, 3))
    y -= y.mean(axis=0)
    n = len(y)
    m3 = np.einsum("na,nb,nc->abc", y, y, y) / n
    m4 = np.einsum("na,nb,nc,nd->abcd", y, y, y, y) / n
    S = y.T @ y / n
    k4 = m4 - np.einsum("ab,cd->abcd", S, S) - np.einsum("ac,bd->abcd", S, S) - np.einsum("ad,bc->abcd", S, S)
    np.testing.assert_allclose(whitened_third_cumulant(y), m3, atol=1e-12)
    np.testing.assert_allclose(whitened_fourth_cumulant(y), k4, atol=1e-12)
    np.testing.assert_allclose(pair_product_tensor(S), m4 - k4, atol=1e-12)
    with pytest.raises(ValueError, match="'y' argument"):
        whitened_fourth_cumulant(np.full((3, 2), np.nan))


def test_fourth_cumulant_of_gaussian_data_shrinks_with_n():
    rng = np.random.default_rng(8)
    norms = []
    for n in (2_000, 200_000):
        y = rng.normal(size=(n, 3))
        y -= y.mean(axis=0)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            norms.append(np.linalg.norm(whitened_fourth_cumulant(y)))
    # sampling error ~ 1/sqrt(N): a factor 10 here; allow 4 for the randomness of one draw
    assert norms[1] < norms[0] / 4
