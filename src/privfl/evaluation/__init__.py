"""Private federated evaluation: statistics, references, FHAUC and DPAUC."""
