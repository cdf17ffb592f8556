"""A party's refusal at join tells the aggregator nothing about that party's own counts.

Review finding (docs/security/fhauc.md): a malicious-variant party refused at join a session
whose worst case missed the required precision or guarantee, and with ``min_pairs = 0`` the
bound it checked was its own ``TP·FP``. The aggregator chooses the other inputs (decision
points, splits), so announcing join-only sessions (no upload, no keys) and watching which
were refused bracketed that product. The refusal now depends on public sizes and the
provisioned policy only: the same probes give the same answers whatever the party holds.
"""

from __future__ import annotations

import numpy as np
import pytest

from conftest import make_parties
from privfl.crypto import keywrap
from privfl.errors import InsufficientPrecisionError
from privfl.evaluation import fhauc

NAMES = ["p0", "p1", "p2"]
PROBES = [(n, s) for n in (3, 10, 30, 100, 300, 1000) for s in (2, 4, 16)]


def refusals(victim_rows: int, min_pairs: int, reveal: str = "auc") -> list[bool]:
    """Which join-only probes the victim ``p0`` refuses, holding ``victim_rows`` rows."""
    rng = np.random.default_rng(7)
    ids = {n: keywrap.IdentityKey() for n in NAMES}
    roster = {n: k.public_bytes for n, k in ids.items()}
    policy = fhauc.Policy(fhauc.Security.MALICIOUS, max_samples_per_party=4096, min_pairs=min_pairs)
    holder = fhauc.KeyHolder("p0", ids["p0"], roster)
    public, bundles = holder.provision(policy)
    agg = fhauc.Aggregator()
    agg.receive_setup(public)
    s, y = make_parties(rng, 1, victim_rows)[0]
    victim = fhauc.Party("p0", ids["p0"], roster, "p0", s, y, reveals=("auc", "curve"))
    victim.receive_bundle(bundles["p0"])
    out = []
    for n, splits in PROBES:
        config = agg.start_session(NAMES, n, security="malicious", splits=splits, reveal=reveal)
        try:
            victim.join(config)
            out.append(False)
        except InsufficientPrecisionError:  # and WeakGuaranteeError, its subclass
            out.append(True)
    return out


@pytest.mark.parametrize("reveal", ["auc", "curve"])
@pytest.mark.parametrize("min_pairs", [0, 1 << 20])
def test_join_only_probes_do_not_depend_on_the_party_s_own_counts(min_pairs, reveal):
    small = refusals(60, min_pairs, reveal)  # own TP·FP about 900
    large = refusals(4000, min_pairs, reveal)  # about 4·10^6
    assert small == large


def test_a_provisioned_min_pairs_lets_probes_through():
    """The check is not vacuous: with a realistic min_pairs some probes are accepted, and
    with none (min_pairs = 0) every malicious session is refused at join."""
    assert not all(refusals(4000, 1 << 20))
    assert all(refusals(4000, 0))


def test_keys_init_refuses_a_malicious_policy_without_min_pairs(tmp_path):
    """A deployment whose parties would refuse every session is refused before any key is
    made, naming the option to add."""
    from typer.testing import CliRunner

    from privfl.cli import app

    args = ["keys", "init", "--parties", "a,b", "--security", "malicious"]
    out = CliRunner().invoke(app, [*args, "--out", str(tmp_path / "k1")])
    assert out.exit_code == 2 and "--min-pairs" in out.output
    assert not (tmp_path / "k1").exists()
    out = CliRunner().invoke(app, [*args, "--out", str(tmp_path / "k2"), "--min-pairs", "1000"])
    assert out.exit_code == 0, out.output
