"""Federated MLP training with the last layers under threshold CKKS (SmartCryptNN).

:func:`train_federated` runs it; :mod:`.mlp` is the numpy MLP, :mod:`.twin` its federated
numpy twin, :mod:`.party` / :mod:`.server` the roles, :mod:`.protocol` the step sequence.
"""
