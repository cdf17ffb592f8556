"""Entry point of one upload helper process (:mod:`~privfl.evaluation.fhauc.upload_pool`).

``python -m privfl.evaluation.fhauc.upload_helper IN OUT``: reads jobs from file descriptor
``IN`` and answers on ``OUT`` until ``IN`` closes. Nothing imports this module.
"""

from __future__ import annotations

import sys
from multiprocessing.connection import Connection

from privfl.evaluation.fhauc.upload_pool import worker_main

if __name__ == "__main__":
    worker_main(
        Connection(int(sys.argv[1]), writable=False), Connection(int(sys.argv[2]), readable=False)
    )
