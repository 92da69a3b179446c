"""specinit.models: one module per model, each with its NumPyro program and moment map.

``lda``, ``single_topic``, ``hmm``, ``multiview`` and ``gmm`` each provide
``model`` (the NumPyro program), ``spectral`` (data -> SpectralEstimate) and
``population_moments`` (parameters -> exact moments).
"""
