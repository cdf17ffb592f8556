"""FHAUC with threshold keys: the key backend where no party decrypts alone.

The single-key FHAUC roles (:mod:`privfl.evaluation.fhauc`) are composed with this backend
when ``keys="threshold"``: the joint key rounds (:mod:`.setup`, :mod:`.keys`,
:mod:`.keycheck`), the kept key sets and their decryption budget (:mod:`.keyset`,
:mod:`.state`), the aggregator's OpenFHE ciphertext operations (:mod:`.ops`, :mod:`.plan`,
:mod:`.curve`), the joint decryption and its reveal (:mod:`.reveal`), the roles
(:mod:`.aggregator`, :mod:`.party`) and their messages (:mod:`.messages`). Sessions run
through the one schedule, :mod:`privfl.evaluation.fhauc.schedule`, whose threshold rounds
are :class:`privfl.evaluation.fhauc.rounds.ThresholdRounds`.
"""
