"""Federated logistic regression on UCI Adult with FedAvg, privately evaluated by FHAUC."""
