"""RevFRF efficiency (RevFRF's Tables 6 and 7) at |N| = 1024 and 2048.

* construction: grow trees on 5,000 Adult training rows (one feature per participant) until
  100 internal nodes exist; CS and participant computation seconds and MB exchanged;
* secure prediction (FRF-Predict, HoLT per node) of one row with 10 trees of depth 10: CS,
  participant and CC seconds, MB;
* batched secure prediction (``--parts rows --rows 100``): FRF-Predict of 100 Adult test rows
  with 10 trees of depth 10, packed comparisons (``predict_many``), beside row-at-a-time
  ``predict_for`` on the first ``--before-rows`` rows (default 5) in the same run: rows/s,
  CPU per comparison, bytes per row, with the load average;
* FRF-Test (``--parts test``): 1,000 Adult test rows through the same 10-tree forest, each
  provider comparing its own test values in the clear (no DT-PKC operation: the key size
  does not matter); CPU of all roles, wall time and MB;
* revocation: rebuild time after revoking 1..5 participants one by one (in column order),
  against growing the whole forest again without them; then, on a fresh forest, revoking
  each time the participant whose revocation destroys the fewest nodes (the best case).

Paper (Java, |N| = 1024): construction 3.09 s CS, 2.27 s participant, 1.07 MB; prediction
13.33 s CS, 0.78 MB; rebuild 1.2 s for one revoked participant vs 31.1 s full rebuild.

    .venv/bin/python benchmarks/revfrf.py [--bits 1024,2048] [--parts construction,prediction]
        [--json OUT]
    .venv/bin/python benchmarks/revfrf.py --bits 1024 --parts test   # FRF-Test only
    .venv/bin/python benchmarks/revfrf.py --bits 2048 --parts rows --rows 100

1024-bit keys are insecure; they are used here (through the explicit opt-in) only to compare
with the paper. Communication counts the protocol's channels, not the KGC's key delivery.
"""

from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np

from privfl.datasets import load_tabular
from privfl.forest.revfrf import RevFRF
from privfl.studies.revfrf import one_feature_per_participant


def mb(model: RevFRF) -> float:
    sizes = model.runner.sizes
    return sum(sum(v) for k, v in sizes.items() if "kgc" not in k) / 1e6


def secs(model: RevFRF, role: str) -> float:
    return sum(model.runner.seconds.get(role, [0.0]))


def forest(trees: int, bits: int, seed: int) -> RevFRF:
    return RevFRF(
        n_trees=trees, max_depth=10, key_bits=bits, seed=seed, allow_insecure_key_bits=bits < 2048
    )


def run(bits: int, parts_wanted: set[str]) -> dict:
    d = load_tabular("adult")
    x, y = d.x_train[:5000], d.y_train[:5000]
    parts = one_feature_per_participant(x, d.features)
    # construction of 100 nodes: add trees until 100 internal nodes exist
    trees = 1
    while True:
        cpu = time.process_time()
        model = forest(trees, bits, 0).fit(parts, y)
        cpu = time.process_time() - cpu
        if model.report().internal_nodes >= 100:
            break
        trees += 1
    nodes = model.report().internal_nodes
    scale = 100 / nodes
    construction = {
        "internal_nodes": nodes,
        "cs_s_per_100_nodes": secs(model, "cs") * scale,
        "participant_s_per_100_nodes": secs(model, "participant") * scale,
        "mb_per_100_nodes": mb(model) * scale,
        "cpu_s_per_100_nodes": cpu * scale,  # every role, one process (keys included)
    }
    # secure prediction with 10 trees of depth 10
    model = forest(10, bits, 1).fit(parts, y)
    model.runner.seconds.clear()
    model.runner.sizes.clear()
    row = {k: v[:1] for k, v in parts.items()}
    start, cpu = time.perf_counter(), time.process_time()
    # FRF-Predict (a requester's encrypted row, HoLT per node); FRF-Test decrypts nothing
    secure = model.predict_for("r", {k: v[0] for k, v in parts.items()})
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    prediction = {
        "comparisons": len(model.runner.seconds["cc"]),  # CC answers one HoLT per comparison
        "wall_s": wall,
        "cpu_s": cpu,
        "cs_s": secs(model, "cs"),
        "participant_s": secs(model, "participant"),
        "cc_s": secs(model, "cc"),
        "mb": mb(model),
    }
    assert np.array_equal(np.atleast_1d(secure), model.predict_plain(row))
    result = {"bits": bits, "construction": construction, "prediction": prediction}
    if "revocation" not in parts_wanted:
        return result | {"revocation": [], "revocation_least_used": []}
    # revocation: cumulative rebuild vs full rebuild without the revoked participants
    names = list(parts)
    revocation = []
    model = forest(10, bits, 2).fit(parts, y)
    total = 0.0
    for k in range(1, 6):
        rep = model.revoke(names[k - 1], level=1)
        total += rep.seconds
        rest = {n: v for n, v in parts.items() if n not in names[:k]}
        start = time.perf_counter()
        forest(10, bits, 2).fit(rest, y)
        full = time.perf_counter() - start
        revocation.append(
            {
                "revoked": k,
                "rebuild_s": rep.seconds,
                "cumulative_s": total,
                "full_rebuild_s": full,
                "destroyed_nodes": rep.destroyed_nodes,
            }
        )
    # the same forest, each time revoking the participant whose revocation destroys the fewest
    # nodes (the rebuild cost depends on how high its nodes sit, not on how many it provides)
    model = forest(10, bits, 2).fit(parts, y)
    least_used = []
    for k in range(1, 6):
        impact = {n: model.nodes_destroyed_by(n) for n in names if n not in model.revoked}
        name = min((n for n in impact if impact[n] > 0), key=lambda n: impact[n])
        rep = model.revoke(name, level=1)
        least_used.append(
            {
                "revoked": k,
                "participant": name,
                "rebuild_s": rep.seconds,
                "destroyed_nodes": rep.destroyed_nodes,
            }
        )
    return result | {"revocation": revocation, "revocation_least_used": least_used}


def frf_test(bits: int) -> dict:
    """FRF-Test of 1,000 Adult test rows on the 10-tree, depth-10 forest of the prediction
    figure (the rows are loaded once outside the timing)."""
    d = load_tabular("adult")
    parts = one_feature_per_participant(d.x_train[:5000], d.features)
    model = forest(10, bits, 1).fit(parts, d.y_train[:5000])
    rows = one_feature_per_participant(d.x_test[:1000], d.features)
    model.runner.seconds.clear()
    model.runner.sizes.clear()
    start, cpu = time.perf_counter(), time.process_time()
    got = model.predict(rows)
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    assert got.shape == (1000,)
    return {"bits": bits, "rows": 1000, "wall_s": wall, "cpu_s": cpu, "mb": mb(model),
            "internal_nodes": model.report().internal_nodes}  # fmt: skip


def batched(bits: int, n_rows: int, before_rows: int) -> dict:
    """Secure prediction of ``n_rows`` test rows, batched and packed, and of the first
    ``before_rows`` row by row, on one 10-tree depth-10 forest grown on 5,000 Adult rows."""
    d = load_tabular("adult")
    parts = one_feature_per_participant(d.x_train[:5000], d.features)
    test = one_feature_per_participant(d.x_test[:n_rows], d.features)
    model = forest(10, bits, 1).fit(parts, d.y_train[:5000])
    out: dict = {"bits": bits, "rows": n_rows, "before_rows": before_rows, "after_rows": n_rows}
    for mode, k in (("before", before_rows), ("after", n_rows)):
        model.runner.seconds.clear()
        model.runner.sizes.clear()
        rows = {name: v[:k] for name, v in test.items()}
        charged = model.computation_provider.comparisons_charged
        start, cpu, load = time.perf_counter(), time.process_time(), os.getloadavg()[0]
        if mode == "before":
            got = np.asarray(
                [model.predict_for("r0", {n: v[i] for n, v in rows.items()}) for i in range(k)]
            )
        else:
            got = model.predict_many("r1", rows)
        wall, cpu = time.perf_counter() - start, time.process_time() - cpu
        n_cmp = model.computation_provider.comparisons_charged - charged
        out[mode] = {
            "rows_per_s": k / wall,
            "cpu_rows_per_s": k / cpu,
            "wall_s": wall,
            "cpu_s": cpu,
            "comparisons": n_cmp,
            "cpu_ms_per_comparison": cpu / n_cmp * 1e3,
            "bytes_per_row": mb(model) * 1e6 / k,
            "load_start": load,
            "load_end": os.getloadavg()[0],
        }
        plain = model.predict_plain(rows)
        assert np.array_equal(got, plain), "secure and plaintext predictions differ"
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bits", default="1024,2048")
    ap.add_argument("--parts", default="construction,prediction,revocation")
    ap.add_argument("--rows", type=int, default=100)
    ap.add_argument("--before-rows", type=int, default=5)
    ap.add_argument("--json")
    args = ap.parse_args()
    results: list[dict] = []
    wanted = set(args.parts.split(","))
    for bits in (int(b) for b in args.bits.split(",")) if "test" in wanted else ():
        t = frf_test(bits)
        results.append({"frf_test": t})
        print(
            f"|N|={bits} FRF-Test, 10 trees depth 10 ({t['internal_nodes']} nodes), 1,000 Adult "
            f"test rows: CPU of all roles {t['cpu_s']:.2f} s, wall {t['wall_s']:.2f} s, "
            f"{t['mb']:.2f} MB",
            flush=True,
        )
    for bits in (int(b) for b in args.bits.split(",")) if "rows" in wanted else ():
        r = batched(bits, args.rows, args.before_rows)
        results.append({"batched_prediction": r})
        for mode in ("before", "after"):
            m = r[mode]
            what = "row at a time (predict_for)" if mode == "before" else "batched, packed"
            print(
                f"|N|={bits} secure prediction {mode}: {what}, {r[mode + '_rows']} "
                f"Adult rows, 10 trees depth 10: {m['rows_per_s']:.3f} rows/s wall "
                f"({m['cpu_rows_per_s']:.3f} rows/s of CPU, all roles in one process), "
                f"{m['comparisons']} comparisons, {m['cpu_ms_per_comparison']:.1f} ms CPU each, "
                f"{m['bytes_per_row'] / 1e6:.3f} MB per row; load average "
                f"{m['load_start']:.2f} -> {m['load_end']:.2f}",
                flush=True,
            )
    for bits in (int(b) for b in args.bits.split(",")) if wanted - {"test", "rows"} else ():
        r = run(bits, wanted)
        results.append(r)
        c, p = r["construction"], r["prediction"]
        print(
            f"|N|={bits} construction of 100 nodes (5,000 Adult rows, "
            f"{c['internal_nodes']} nodes grown): CS {c['cs_s_per_100_nodes']:.2f} s, "
            f"participants {c['participant_s_per_100_nodes']:.2f} s, "
            f"{c['mb_per_100_nodes']:.2f} MB; CPU of all roles {c['cpu_s_per_100_nodes']:.2f} s "
            "(one process, key generation included)"
        )
        print(
            f"|N|={bits} secure prediction, 10 trees depth 10, one row: CS {p['cs_s']:.2f} s, "
            f"participants {p['participant_s']:.2f} s, CC {p['cc_s']:.2f} s, {p['mb']:.2f} MB "
            f"(wall {p['wall_s']:.2f} s; {p['comparisons']} comparisons, "
            f"{p['wall_s'] / p['comparisons'] * 1e3:.1f} ms each; CPU of all roles "
            f"{p['cpu_s'] / p['comparisons'] * 1e3:.1f} ms each)"
        )
        for rv in r["revocation"]:
            print(
                f"|N|={bits} revoke #{rv['revoked']}: rebuild {rv['rebuild_s']:.2f} s "
                f"({rv['destroyed_nodes']} nodes destroyed), full rebuild without them "
                f"{rv['full_rebuild_s']:.2f} s",
                flush=True,
            )
        for rv in r["revocation_least_used"]:
            print(
                f"|N|={bits} revoke least-impact #{rv['revoked']} ({rv['participant']}): rebuild "
                f"{rv['rebuild_s']:.2f} s ({rv['destroyed_nodes']} nodes destroyed)",
                flush=True,
            )
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(results, fh, indent=2)
            fh.write("\n")  # a JSON file ends with a newline


if __name__ == "__main__":
    main()
