"""Moving protocol messages: in-process runner and the Flower apps."""
