"""A family defined outside the library, registered by defining it, gets what the built-in families get: the
registry, the scikit-learn estimator, save and load, the command line (``module:Class``) and NumPyro warm starts."""

from __future__ import annotations

import pickle
import sys

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
import pytest

from specinit.cli import EXIT_OK, main
from specinit.engine.sequences import one_hot
from specinit.engine.views import ViewMoments, multiview_population
from specinit.estimate import Site, SpectralEstimate
from specinit.estimators import SpectralEstimator, estimator_class
from specinit.faces import RANDOM_STATE, Face, mean_log_likelihood, n_components_param, responsibilities
from specinit.family import Family, family, registered
from specinit.models import FAMILIES

FACES = 4


class ThreeThrows(Family):
    """A mixture of dice: each row is three throws of one die."""

    name = "three_throws_test"
    sites = {"weights": Site("simplex", (0,), ("dice",)), "faces": Site("simplex", (0,), ("dice", "face"))}
    match_site = "faces"
    fit_kind = "multiview"

    def moments(self, throws, *, k, backend):
        throws = np.asarray(throws).astype(np.int64)
        return ViewMoments([one_hot(throws[:, j], FACES) for j in range(3)], backend=backend)

    def population_moments(self, params):
        return multiview_population([params["faces"]] * 3, params["weights"])

    def max_components(self, moments):
        return FACES, f"at most the number of faces ({FACES})"

    def unwhiten(self, fit, moments, k, floor, **options):
        return {"weights": fit.weights, "faces": fit.means[0]}, {}, {}

    def component_log_prob(self, params, throws):
        return jnp.log(jnp.asarray(params["faces"])).T[throws].sum(axis=1)

    def refine_data(self, throws, estimate):
        return np.asarray(throws).astype(np.int64)

    def estimator_face(self):
        return Face(class_name="SpectralThreeThrows", summary="Dice mixtures.", mixins=("cluster",),
                    parameters={"n_components": n_components_param("dice", 2, "spectral"),
                                "random_state": RANDOM_STATE},
                    spectral={"n_components": "k"}, data="rows", attributes={}, score=mean_log_likelihood,
                    predict_proba=responsibilities)


def model(throws, k):
    weights = numpyro.sample("weights", dist.Dirichlet(jnp.ones(k)))
    with numpyro.plate("dice", k):
        faces = numpyro.sample("faces", dist.Dirichlet(jnp.ones(FACES)))
    with numpyro.plate("rows", throws.shape[0]):
        die = numpyro.sample("die", dist.Categorical(weights), infer={"enumerate": "parallel"})
        for j in range(3):
            numpyro.sample(f"throw_{j}", dist.Categorical(faces[die]), obs=throws[:, j])


TRUTH = {"weights": np.array([0.65, 0.35]), "faces": np.array([[0.6, 0.2, 0.1, 0.1], [0.05, 0.1, 0.25, 0.6]])}


def _throws(n=6000, seed=0):
    rng = np.random.default_rng(seed)
    dice = rng.choice(2, size=n, p=TRUTH["weights"])
    return np.stack([(rng.random((n, 1)) > TRUTH["faces"][dice].cumsum(axis=1)).sum(axis=1) for _ in range(3)], 1)


def test_defining_the_class_registers_it_beside_the_built_in_families():
    assert isinstance(family("three_throws_test"), ThreeThrows)
    assert set(FAMILIES) < set(registered()) and "three_throws_test" not in FAMILIES
    # the population moments of the truth give it back exactly
    exact = family("three_throws_test").spectral_from_moments(ThreeThrows().population_moments(TRUTH), 2)
    order = np.argsort(-exact.params["weights"])
    np.testing.assert_allclose(exact.params["faces"][order], TRUTH["faces"], atol=1e-8)


def test_estimator_save_load_and_warm_start(tmp_path):
    throws = _throws()
    cls = estimator_class("three_throws_test")
    assert issubclass(cls, SpectralEstimator) and cls is estimator_class(ThreeThrows())
    fitted = cls(2, random_state=0).fit(throws)
    estimate = fitted.estimate_
    order = np.argsort(-estimate.params["weights"])
    assert np.abs(estimate.params["faces"][order] - TRUTH["faces"]).max() < 0.05
    assert fitted.predict(throws[:5]).shape == (5,) and np.isfinite(fitted.score(throws))
    loaded = SpectralEstimate.load(estimate.save(tmp_path / "dice.npz"))
    assert loaded.model == "three_throws_test" and loaded.sites == estimate.sites
    np.testing.assert_array_equal(loaded.params["faces"], estimate.params["faces"])
    init = loaded.init_params(model, 1, jax.random.PRNGKey(0), model_kwargs={"throws": throws[:50], "k": 2})
    assert set(init) == {"weights", "faces"}


def test_the_estimator_of_a_user_family_pickles_without_a_name_in_its_module():
    throws = _throws(2000, seed=1)
    fitted = estimator_class(ThreeThrows())(2, random_state=0).fit(throws)
    assert not hasattr(sys.modules[__name__], type(fitted).__name__)  # found by no name: rebuilt from the family
    again = pickle.loads(pickle.dumps(fitted))
    assert type(again) is type(fitted) and again.get_params() == fitted.get_params()
    np.testing.assert_array_equal(again.estimate_.params["faces"], fitted.estimate_.params["faces"])
    np.testing.assert_array_equal(again.predict(throws[:20]), fitted.predict(throws[:20]))


def test_the_command_line_fits_a_family_named_by_module_and_class(tmp_path, capsys):
    data = tmp_path / "throws.npy"
    np.save(data, _throws())
    out = tmp_path / "fit.npz"
    assert main(["fit", f"{__name__}:ThreeThrows", str(data), "--k", "2", "--out", str(out)]) == EXIT_OK
    assert "three_throws_test: k=2" in capsys.readouterr().out
    assert SpectralEstimate.load(out).model == "three_throws_test"
    assert main(["fit", f"{__name__}:model", str(data), "--k", "2"]) == 2
    assert "not a Family subclass" in capsys.readouterr().err


def test_a_name_taken_by_another_class_is_refused():
    with pytest.raises(ValueError, match="'three_throws_test' .* already registered by tests.test_user_family"):
        type("Other", (ThreeThrows,), {"name": "three_throws_test", "__module__": "elsewhere"})
