"""FHAUC over Flower (optional extra ``privfl[flower]``).

``server_app.app`` is a Flower ``ServerApp`` that drives
:class:`privfl.evaluation.fhauc.Aggregator` through
:func:`~privfl.federation.flower.rounds.exchange` (one round per protocol step);
``client_app.app`` is a ``ClientApp`` whose query handlers drive
:class:`privfl.evaluation.fhauc.Party`. Both move the same message bytes as the in-process
runner, inside ``ArrayRecord`` uint8 arrays.
"""
