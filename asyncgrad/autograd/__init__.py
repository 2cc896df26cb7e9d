"""The recorded graph, grad and anomaly modes, and the backward()/grad() entry points."""
