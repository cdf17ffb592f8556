"""ServerApp: stock FedAvg, with FHAUC on the clients' validation sets every k rounds."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from flwr.app import Array, ArrayRecord, Context
from flwr.serverapp import Grid, ServerApp
from flwr.serverapp.strategy import FedAvg

from privfl.federation.flower.private_eval import PrivateAUC
from trainauc.task import initial_weights

app = ServerApp()


@app.main()
def main(grid: Grid, context: Context) -> None:
    cfg = context.run_config
    private_auc = PrivateAUC.from_run_config(grid, context)
    clients = len(private_auc.parties)
    strategy = FedAvg(
        fraction_train=1.0,
        fraction_evaluate=0.0,  # the evaluation is FHAUC's, below
        min_train_nodes=clients,
        min_available_nodes=clients,
    )
    result = strategy.start(
        grid=grid,
        initial_arrays=ArrayRecord({"w": Array(initial_weights(int(cfg["features"])))}),
        num_rounds=int(cfg["num-server-rounds"]),
        timeout=float(cfg.get("timeout", 120.0)),
        evaluate_fn=private_auc,
    )
    private_auc.write_history(result)
    out = Path(str(cfg.get("output-dir", "private-auc-results")))
    np.save(out / f"final-model-{context.run_id}.npy", result.arrays["w"].numpy())
