"""Detection rates of the attacks of issue 14 (findings 1-3) against FHAUC, over many seeds.

    .venv/bin/python benchmarks/fhauc_attacks.py [--seeds 100] [--json OUT]

Each seed builds a fresh deployment (4 parties x 1000 samples, N = 50, S = 4, malicious,
provisioned policy with a tight size bound and min_pairs = 10^6, default K = 3 executions)
and runs every attack once:

* replay-result: a later session re-announces the old session id; the aggregator answers
  with the old session's result (party 0's data changed meanwhile);
* stale-upload: same, but the aggregator aggregates party 1's upload of the old session
  (skipping its own transcript check);
* result-without-upload: a result step reaches a party that never uploaded;
* equivocation-*: one party is told other thresholds (x0.5), another score range, other
  splits, or another party list, with the same session id;
* scale-numerator / deflate-denominator at epsilon 1e-7..1e-3: the tolerance abuse.

An attack counts as detected when every targeted party refuses (typed error) and none
outputs an AUC. For the tolerance attacks the largest error of any accepted AUC is printed.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

import privfl
from privfl.crypto import keywrap
from privfl.errors import PrivflError
from privfl.evaluation import fhauc
from privfl.evaluation.fhauc import roles
from privfl.evaluation.fhauc.messages import SessionConfig, Start
from privfl.evaluation.fhauc.tamper import DeflateDenominator, ScaleNumeratorEverywhere
from privfl.evaluation.fhauc.uploads import PartyUpload
from privfl.evaluation.fhauc.variant import variant_for

N, S, M, SIZE = 50, 4, 4, 1000


def data(seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(seed)  # not secret: benchmark data
    out = []
    for _ in range(M):
        y = rng.integers(0, 2, SIZE).astype(np.int8)
        out.append((np.clip(rng.normal(0.4 + 0.2 * y, 0.2), 0, 1), y))
    return out


class Reusing(fhauc.Aggregator):
    """Re-announces a chosen session id; optionally slips in a stale upload."""

    reuse: bytes | None = None
    stale: bytes | None = None

    def start_session(self, *args: object, **kwargs: object) -> bytes:
        cfg = SessionConfig.from_bytes(super().start_session(*args, **kwargs))  # type: ignore[arg-type]
        if self.reuse is not None:
            cfg = SessionConfig(self.reuse, cfg.parties, cfg.thresholds, cfg.score_range,
                                cfg.security, cfg.splits)  # fmt: skip
            self.config = cfg
        return cfg.to_bytes()

    def aggregate(self, uploads: list[fhauc.Upload]) -> fhauc.Reply:
        if self.stale is not None:
            cfg, ctx = self.session_config, self._ctx()
            scale = variant_for(cfg.security).upload_scale_bits(ctx.params, cfg, self._policy())
            msg = PartyUpload.from_bytes(self.stale, cfg.session, self.roster)
            lay = self._layout()
            old = msg.open(ctx, lay.chunks, lay.denominator_ciphertexts, scale, lay.f_ciphertexts)
            uploads = [old[self.execution] if u.sender == msg.sender else u for u in uploads]
        return super().aggregate(uploads)


class Site:
    """A hand-wired deployment of M parties sharing one provisioning."""

    def __init__(self, seed: int) -> None:
        self.names = [f"p{i}" for i in range(M)]
        ids = {n: keywrap.IdentityKey() for n in self.names}
        roster = {n: k.public_bytes for n, k in ids.items()}
        # min_pairs: the deployment's known lower bound on global positives x negatives
        # (about 2000 x 2000 here), which the parties' tolerance uses instead of their own pairs.
        policy = fhauc.Policy(fhauc.Security.MALICIOUS, max_samples_per_party=1024,
                              max_points=N, max_splits=S, min_pairs=10**6)  # fmt: skip
        holder = fhauc.KeyHolder("p0", ids["p0"], roster)
        self.public, bundles = holder.provision(policy)
        self.data = data(seed)
        self.parties = []
        for n, (s, y) in zip(self.names, self.data, strict=True):
            p = roles.make_party("single", n, ids[n], roster, "p0", s, y)
            p.receive_bundle(bundles[n])
            self.parties.append(p)

    def aggregator(self, cls: type[fhauc.Aggregator] = fhauc.Aggregator) -> fhauc.Aggregator:
        agg = cls()
        agg.receive_setup(self.public)
        return agg

    def session(self, agg: fhauc.Aggregator) -> tuple[bytes, dict[str, bytes], bytes]:
        config = agg.start_session(self.names, N, security="malicious", splits=S)
        joins = {p.name: p.join(config) for p in self.parties}
        start = agg.collect_joins(joins)
        return config, joins, start


def refused(fn: object, *args: object) -> bool:
    try:
        fn(*args)  # type: ignore[operator]
    except PrivflError:
        return True
    return False


def replay_result(seed: int) -> bool:
    site = Site(seed)
    agg = site.aggregator(Reusing)
    _, _, start = site.session(agg)
    old = agg.handle_uploads({p.name: p.upload(start) for p in site.parties})
    for p in site.parties:
        p.finish(old)
    agg.reuse = agg.session_config.session  # type: ignore[attr-defined]
    site.parties[0]._scores = 1 - site.data[0][0]
    _, _, start = site.session(agg)
    for p in site.parties:
        p.upload(start)
    return all(refused(p.finish, old) for p in site.parties)


def stale_upload(seed: int) -> bool:
    site = Site(seed)
    agg = site.aggregator(Reusing)
    _, _, start = site.session(agg)
    ups = {p.name: p.upload(start) for p in site.parties}
    for p in site.parties:
        p.finish(agg.handle_uploads(ups))
    agg.reuse, agg.stale = agg.session_config.session, ups["p1"]  # type: ignore[attr-defined]
    _, _, start = site.session(agg)
    result = agg.handle_uploads({p.name: p.upload(start) for p in site.parties})
    return all(refused(p.finish, result) for p in site.parties)


def result_without_upload(seed: int) -> bool:
    site = Site(seed)
    agg = site.aggregator()
    _, _, start = site.session(agg)
    result = agg.handle_uploads({p.name: p.upload(start) for p in site.parties})
    late = site.parties[0]
    late.restore(None)  # a party (process) that never saw the upload round
    return refused(late.finish, result)


def equivocation(change: str):
    def attack(seed: int) -> bool:
        site = Site(seed)
        agg = site.aggregator()
        config = agg.start_session(site.names, N, security="malicious", splits=S)
        cfg = SessionConfig.from_bytes(config)
        other = SessionConfig(
            cfg.session,
            cfg.parties[:-1] if change == "parties" else cfg.parties,
            cfg.thresholds * (0.5 if change == "thresholds" else 1.0),
            (0.0, 2.0) if change == "range" else cfg.score_range,
            cfg.security,
            3 if change == "splits" else cfg.splits,
        ).to_bytes()
        joins = {p.name: p.join(other if p.name == "p0" else config) for p in site.parties}
        # a relay that skips the aggregator's own check and forwards every join
        outcomes = []
        for p in site.parties:
            start = Start(cfg.session, other if p.name == "p0" else config,
                          tuple(joins[n] for n in site.names)).to_bytes()  # fmt: skip
            outcomes.append(refused(p.upload, start))
        return all(outcomes)

    return attack


def tolerance(cls: type[ScaleNumeratorEverywhere], eps: float):
    def attack(seed: int) -> tuple[bool, float]:
        parties = data(seed)
        try:
            res = privfl.federated_auc(parties, N, security="malicious", splits=S,
                                       aggregator=cls(eps))  # fmt: skip
        except privfl.VerificationError:
            return True, 0.0
        return False, abs(res.auc - privfl.binned_auc(parties, N))

    return attack


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=100)
    ap.add_argument("--json")
    args = ap.parse_args()
    attacks = {
        "1 replay-result (same session id)": replay_result,
        "1 stale-upload of one party": stale_upload,
        "1 result-without-upload": result_without_upload,
        **{
            f"2 equivocation-{c}": equivocation(c)
            for c in ("thresholds", "range", "splits", "parties")
        },
    }
    out: dict[str, dict[str, float]] = {}
    start = time.perf_counter()
    for name, fn in attacks.items():
        caught = sum(bool(fn(seed)) for seed in range(args.seeds))
        out[name] = {"detected": caught, "seeds": args.seeds}
        print(f"finding {name:<38} detected {caught}/{args.seeds}", flush=True)
    for cls in (ScaleNumeratorEverywhere, DeflateDenominator):
        for eps in (1e-7, 1e-6, 1e-5, 1e-4, 1e-3):
            runs = [tolerance(cls, eps)(seed) for seed in range(args.seeds)]
            caught = sum(r[0] for r in runs)
            worst = max((r[1] for r in runs if not r[0]), default=0.0)
            key = f"3 {cls.__name__} eps={eps:g}"
            out[key] = {"detected": caught, "seeds": args.seeds, "worst_accepted_error": worst}
            print(f"finding {key:<38} detected {caught}/{args.seeds}; worst accepted "
                  f"|AUC - binned| {worst:.1e}", flush=True)  # fmt: skip
    print(f"{time.perf_counter() - start:.0f} s")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(out, fh, indent=2)
            fh.write("\n")  # a JSON file ends with a newline


if __name__ == "__main__":
    main()
