"""ClientApp: local training (``@app.train``) plus privfl's private-AUC handlers, which score
this node's local validation set with the global model the server sends."""

from __future__ import annotations

import numpy as np
from flwr.app import Array, ArrayRecord, Context, Message, MetricRecord, RecordDict
from flwr.clientapp import ClientApp

from privfl.federation.flower.private_eval_client import add_private_auc
from trainauc.task import load_partition, log_loss, train

app = ClientApp()


def _partition(context: Context):
    return load_partition(
        int(context.node_config["partition-id"]),
        int(context.node_config["num-partitions"]),
        int(context.run_config.get("max-rows", 2000)),
        cache_dir=str(context.node_config.get("output-dir", ".")),
    )


@app.train()
def local_train(message: Message, context: Context) -> Message:
    data = _partition(context)
    w = message.content["arrays"]["w"].numpy()
    w = train(
        w, data.x_train, data.y_train,
        int(context.run_config.get("local-epochs", 20)), float(context.run_config.get("lr", 0.5)),
    )  # fmt: skip
    content = RecordDict(
        {
            "arrays": ArrayRecord({"w": Array(w)}),
            "metrics": MetricRecord(
                {
                    "train-loss": log_loss(w, data.x_train, data.y_train),
                    "num-examples": len(data.y_train),
                }
            ),
        }
    )
    return Message(content=content, reply_to=message)


def validation_scores(arrays: ArrayRecord, context: Context) -> tuple[np.ndarray, np.ndarray]:
    """This node's validation set scored by the global model (for FHAUC)."""
    data = _partition(context)
    from trainauc.task import predict

    return predict(arrays["w"].numpy(), data.x_val), data.y_val


add_private_auc(app, validation_scores)
